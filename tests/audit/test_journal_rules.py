"""Every transition is journaled: the audit reads each deployment's journal against its status and the table."""

from gpuharness.audit.journal_rules import journal_problems
from gpuharness.core.deployment import Deployment

STORY = [(1, None, "provisioning"), (2, "provisioning", "installing"), (3, "installing", "configuring"),
         (4, "configuring", "health-checking"), (5, "health-checking", "ready"), (6, "ready", "running"),
         (7, "running", "running"), (8, "running", "ready")]


def test_a_consistent_story_passes():
    assert journal_problems(Deployment.as_found({"id": "d", "status": "ready"}), STORY) == []


def test_a_missing_entry_breaks_the_chain():
    [(where, message)] = journal_problems(Deployment.as_found({"id": "d", "status": "ready"}), STORY[:4] + STORY[5:])
    assert where == "transitions.jsonl:6" and "previous entry left it health-checking" in message


def test_a_disallowed_transition_is_named():
    problems = journal_problems(Deployment.as_found({"id": "d", "status": "destroyed"}),
                                [*STORY, (9, "ready", "destroyed")])
    assert problems == [("transitions.jsonl:9", "deployment d: ready → destroyed is not an allowed transition "
                         "(see gpuharness.core.lifecycle.ALLOWED); it skipped a step of the lifecycle")]


def test_a_status_the_journal_never_reached_is_flagged():
    [(where, message)] = journal_problems(Deployment.as_found({"id": "d", "status": "running"}), STORY)
    assert where == "deployment d" and "journal ends at ready" in message
