"""No secret (API key, bearer token, private key, password) in the registry, the ledger, cassettes/ or reports/."""

import pytest


@pytest.mark.parametrize("place", ["registry", "ledger", "cassettes", "reports"])
def test_no_secret_in(audit, place):
    assert audit.count(f"secrets:{place}") == 0, audit.explain(f"secrets:{place}")
