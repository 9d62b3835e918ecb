"""Leaked and lost instances: the registry against the provider inventory (recorded offline, or live).

Orphans are instances carrying our key prefix that no live deployment claims: money leaking. Vanished
deployments are ones the registry calls live while the provider no longer has their instance.
"""

import pytest

from gpuharness.audit import rules
from gpuharness.operations.reconcile import find_orphans, find_vanished, key_prefixes


@pytest.mark.audit_rule(rules.INVENTORY_ORPHANS)
def test_no_orphan_instances_at_the_providers(gh_registry, gh_inventory):
    orphans = find_orphans(gh_registry.deployments(), gh_inventory, key_prefixes(gh_registry.providers()))
    if orphans:
        pytest.fail(f"{len(orphans)} orphan instance(s) per {gh_inventory.source} at {gh_inventory.observed_at}:\n"
                    + "\n".join(o.message() for o in orphans), pytrace=False)


@pytest.mark.audit_rule(rules.INVENTORY_VANISHED)
def test_no_vanished_deployments(gh_registry, gh_inventory):
    vanished = find_vanished(gh_registry.deployments(), gh_inventory)
    if vanished:
        pytest.fail(f"{len(vanished)} vanished deployment(s) per {gh_inventory.source} at "
                    f"{gh_inventory.observed_at}:\n" + "\n".join(v.message() for v in vanished), pytrace=False)
