"""The public API of gpuharness is deliberate: this pins it."""

from __future__ import annotations

import gpuharness


def test_exported_members() -> None:
    assert gpuharness.__all__ == [
        "ALLOWED",
        "STATES",
        "Action",
        "Decision",
        "KeepAliveDecision",
        "Ledger",
        "Policy",
        "Registry",
        "UserError",
        "keep_alive",
        "transition",
    ]


def test_every_exported_member_exists_and_is_documented() -> None:
    for name in gpuharness.__all__:
        member = getattr(gpuharness, name)
        if callable(member):
            assert member.__doc__, f"gpuharness.{name} has no docstring"


def test_exported_members_come_from_gpuharness() -> None:
    for name in gpuharness.__all__:
        member = getattr(gpuharness, name)
        module = getattr(member, "__module__", "gpuharness")
        assert module.startswith("gpuharness"), name
