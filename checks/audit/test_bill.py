"""The provider's bill as the outside anchor: what each provider says it charged, per instance and UTC day (recorded
offline, or read live), against the billed intervals the registry's journal gives, within policy.cost_tolerance.
"""

import pytest

from gpuharness.audit import rules
from gpuharness.cli.registry_cmds import registry_intervals
from gpuharness.core.clock import parse_ts
from gpuharness.core.policy import Policy
from gpuharness.providers.bill import bill_lines


@pytest.mark.audit_rule(rules.BILL_MATCHES)
def test_billed_intervals_match_the_providers_bill(gh_registry, gh_bill):
    tolerance = Policy(gh_registry.policy_document()).cost_tolerance
    intervals = registry_intervals(gh_registry, parse_ts(gh_bill.until))
    over = [line for line in bill_lines(gh_bill, intervals, gh_registry.deployments()) if line.over(tolerance)]
    if over:
        pytest.fail(f"{len(over)} difference(s) with the providers' bill ({gh_bill.source}, {gh_bill.since[:10]} .. "
                    f"{gh_bill.until[:10]}):\n" + "\n".join(line.message(tolerance) for line in over)
                    + "\nfind what billed outside the journal (`gpuharness bill` shows each day), then fix the "
                    "journal or take it up with the provider", pytrace=False)
