"""The core: registry, ledger, state files, schemas, policy, lifecycle, economics, spend, clock, errors."""
