"""No secret (API key, bearer token, private key, password, a configured credential's value) in the registry, the
ledger, cassettes/ or reports/."""

from gpuharness.audit import rules
from gpuharness.pytest_plugin.audit import over_rules


@over_rules(rules.SECRETS)
def test_no_secret_in(audit, audit_rule):
    assert audit.count(audit_rule) == 0, audit.explain(audit_rule)
