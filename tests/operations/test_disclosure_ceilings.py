"""The disclosure before a launch names the ceilings that apply (issue 18, item 4): each money ceiling policy.json
sets, or that none applies, with the policy's reason."""

from __future__ import annotations

from lifecycle_fakes import make_world

from gpuharness.operations.provision import ProvisionRequest, ceilings_words, provision


def request() -> ProvisionRequest:
    return ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfyui:latest", cost_hr=0.5, runtime="comfyui",
                            model="minimax-h3", workflow="h3-text-to-video", idle_minutes=15)


def disclosed(world) -> str:
    provision(world.ctx, request(), poll_s=5)
    return next(line for line in world.said if "hourly burn:" in line)


def test_the_disclosure_names_every_money_ceiling_of_the_policy(tmp_path):
    text = disclosed(make_world(tmp_path))
    assert ("ceilings:        per_job_usd $5.00, daily_usd $50.00, monthly_usd $500.00, max_cost_hr $10.00/hr"
            in text.splitlines()), text


def test_the_disclosure_names_only_the_ceilings_set(tmp_path):
    world = make_world(tmp_path)
    with world.registry.update("policy.json") as document:
        for name in ("per_job_usd", "daily_usd", "monthly_usd"):
            del document[name]
    assert "ceilings:        max_cost_hr $10.00/hr" in disclosed(world).splitlines()


def test_the_disclosure_says_no_ceiling_applies_with_its_reason(tmp_path):
    world = make_world(tmp_path)
    with world.registry.update("policy.json") as document:
        for name in ("per_job_usd", "daily_usd", "monthly_usd", "max_cost_hr"):
            del document[name]
        document.update(ceilings="none", reason="a lab account with a hard limit at the provider")
    text = disclosed(world)
    assert "ceilings:        none (reason: a lab account with a hard limit at the provider)" in text.splitlines()


def test_ceilings_words():
    assert ceilings_words({"max_cost_hr": 2, "daily_usd": 1234.5}) == "daily_usd $1,234.50, max_cost_hr $2.00/hr"
    assert ceilings_words({"ceilings": "none", "reason": "lab"}) == "none (reason: lab)"
