"""The journal tells each deployment's story: transitions chain, follow the lifecycle table, and end at its status."""

from __future__ import annotations

from collections.abc import Sequence

from gpuharness.core.deployment import Deployment
from gpuharness.core.journal import JournalEntry
from gpuharness.core.lifecycle import allowed

#: a journal entry with the line of transitions.jsonl it was read from
NumberedEntry = tuple[int, JournalEntry]


def journal_problems(deployment: Deployment, entries: Sequence[NumberedEntry]) -> list[tuple[str, str]]:
    """(where, message) for each place where the journal and the deployment disagree (an entry's from_state None:
    its first).

    An entry whose from equals its to is an observation (a progress marker, a billing note), not a transition.
    """
    dep = deployment.id
    problems: list[tuple[str, str]] = []
    previous: str | None = None
    for lineno, entry in entries:
        source, target = entry.from_state, entry.to_state
        where = f"transitions.jsonl:{lineno}"
        if previous is not None and source != previous:
            problems.append((where, f"deployment {dep} goes {source} → {target}, but its previous entry left it "
                             f"{previous}: a transition was not journaled (or was edited); append the missing one"))
        if source is not None and source != target and not allowed(source, target):
            problems.append((where, f"deployment {dep}: {source} → {target} is not an allowed transition "
                             "(see gpuharness.core.lifecycle.ALLOWED); it skipped a step of the lifecycle"))
        previous = target
    status = deployment.status
    if previous is not None and previous != status:
        problems.append((f"deployment {dep}", f"status is {status} in deployments.json but its journal ends at "
                         f"{previous}: the change was not journaled; journal it (or restore the status)"))
    return problems
