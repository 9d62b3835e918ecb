"""Every transition is journaled: the audit reads each deployment's journal against its status and the table."""

from gpuharness.audit.journal_rules import journal_problems
from gpuharness.core.deployment import Deployment
from gpuharness.core.journal import JournalEntry


def entry(lineno: int, source: str | None, target: str) -> tuple[int, JournalEntry]:
    """Line lineno of the journal: deployment d moved from source to target (the entry the lifecycle writes)."""
    return lineno, JournalEntry.from_json({"ts": "2026-12-01T00:00:00Z", "deployment": "d", "from": source,
                                           "to": target})


STORY = [entry(1, None, "provisioning"), entry(2, "provisioning", "installing"),
         entry(3, "installing", "configuring"), entry(4, "configuring", "health-checking"),
         entry(5, "health-checking", "ready"), entry(6, "ready", "running"), entry(7, "running", "running"),
         entry(8, "running", "ready")]


def test_a_consistent_story_passes():
    assert journal_problems(Deployment.as_found({"id": "d", "status": "ready"}), STORY) == []


def test_a_missing_entry_breaks_the_chain():
    [(where, message)] = journal_problems(Deployment.as_found({"id": "d", "status": "ready"}), STORY[:4] + STORY[5:])
    assert where == "transitions.jsonl:6" and "previous entry left it health-checking" in message


def test_a_disallowed_transition_is_named():
    problems = journal_problems(Deployment.as_found({"id": "d", "status": "destroyed"}),
                                [*STORY, entry(9, "ready", "destroyed")])
    assert problems == [("transitions.jsonl:9", "deployment d: ready → destroyed is not an allowed transition "
                         "(see gpuharness.core.lifecycle.ALLOWED); it skipped a step of the lifecycle")]


def test_a_status_the_journal_never_reached_is_flagged():
    [(where, message)] = journal_problems(Deployment.as_found({"id": "d", "status": "running"}), STORY)
    assert where == "deployment d" and "journal ends at ready" in message


def test_the_audit_reads_the_entry_the_lifecycle_writes():
    written = JournalEntry(deployment="d", from_state="ready", to_state="running", provider="vast", target_id="7",
                           route="ssh", marker={"step": 2}, note="n", ts="2026-12-01T00:00:00Z")
    assert JournalEntry.from_json(written.to_json()) == written
    assert list(written.to_json())[:6] == ["ts", "deployment", "provider", "target_id", "from", "to"]
