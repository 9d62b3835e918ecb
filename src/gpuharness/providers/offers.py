"""What can be rented now, from every configured provider, cheapest first, marked where policy refuses."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from gpuharness.core.policy import Action, Policy, exceeds
from gpuharness.providers.base import Offer, OfferSource, Provider, ProviderError


def policy_verdict(offer: Offer, kind: str, policy: Policy, burn_hr: float, live_count: int) -> str | None:
    """Why the policy would refuse to launch this offer now (None: it would allow it)."""
    decision = None
    for provider in dict.fromkeys((offer.provider, kind)):
        decision = policy.evaluate(Action(kind="launch", provider=provider, cost_hr=offer.cost_hr,
                                          has_shutdown_rule=True, live_burn_hr=burn_hr,
                                          live_deployments=live_count))
        if decision.allowed or decision.ceiling != "allowed_providers":
            break
    return None if decision is None or decision.allowed else f"{decision.ceiling}: {decision.reason}"


def gather(sources: Iterable[tuple[str, str, OfferSource]], gpu: str, policy: Policy, *,
           max_cost_hr: float | None = None, burn_hr: float = 0.0,
           live_count: int = 0) -> tuple[list[Offer], dict[str, str]]:
    """Offers from (name, kind, source) triples, cheapest first; failures per provider kept, not raised."""
    found: list[Offer] = []
    failures: dict[str, str] = {}
    for name, kind, source in sources:
        try:
            offers = source.offers(gpu)
        except ProviderError as exc:
            failures[name] = str(exc)
            continue
        for offer in offers:
            if exceeds(offer.cost_hr, max_cost_hr):
                continue
            found.append(replace(offer, refused=policy_verdict(offer, kind, policy, burn_hr, live_count)))
    found.sort(key=lambda o: (o.cost_hr, o.provider, o.gpu_count))
    return found, failures


def cheapest_offer(provider: Provider, gpu: str, gpu_count: int) -> Offer | None:
    """The cheapest offer of gpu at this provider per GPU, scaled to gpu_count (one read); None if none."""
    source = provider if isinstance(provider, OfferSource) else None
    found = [o for o in source.offers(gpu) if o.gpu_count in (gpu_count, 1)] if source else []
    if not found:
        return None
    best = min(found, key=lambda o: o.cost_hr / max(o.gpu_count, 1))
    return replace(best, cost_hr=round(best.cost_hr / max(best.gpu_count, 1) * gpu_count, 4), gpu_count=gpu_count)
