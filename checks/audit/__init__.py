"""checks/audit: a package, so its test modules never clash by basename with tests/ (pytest's prepend import mode)."""
