"""The check suites users run against their infrastructure: health, audit and plan."""
