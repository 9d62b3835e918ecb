"""A deployment is ready only after its test generation succeeded, with the health evidence recorded."""


def test_ready_only_after_a_passed_test_generation(audit, audit_deployment):
    rule = f"ready:evidence:{audit_deployment}"
    assert audit.count(rule) == 0, audit.explain(rule)
