"""The audit rules, each declared once: its id, its title and what it reads. The engine emits findings by these rule
objects, and the checks in checks/audit are parametrized from this table (tests/audit/test_audit_rules.py proves that
every rule has a check and every check a rule)."""

from __future__ import annotations

from typing import Final

from gpuharness.core.registry import DOCUMENTS, JOURNAL, LEDGER
from gpuharness.core.rules import Rule, RuleTable

#: Whole-file documents and their identity keys, for the uniqueness rules.
IDENTITY: Final[dict[str, tuple[str, ...]]] = {
    "providers.json": ("name",), "machines.json": ("provider", "instance_id"), "deployments.json": ("id",),
    "models.json": ("name",), "workflows.json": ("id", "version"), "connections.json": ("target", "kind"),
}
SCHEMA_FILES: Final = (*DOCUMENTS, JOURNAL)
CHECKPOINT: Final = "audit/checkpoint.json"

SCHEMA: Final = {name: Rule(f"schema:{name}", f"{name} matches its schema", (name,)) for name in SCHEMA_FILES}
UNIQUE: Final = {name: Rule(f"unique:{name}", f"ids in {name} are unique", (name,)) for name in IDENTITY}
DEPLOYMENT_PROVIDER: Final = Rule("ref:deployment-provider", "every deployment's provider is in providers.json",
                                  ("deployments.json", "providers.json"))
JOB_DEPLOYMENT: Final = Rule("ref:job-deployment", "every job's deployment is in deployments.json",
                             (LEDGER, "deployments.json"))
JOURNAL_DEPLOYMENT: Final = Rule("ref:journal-deployment", "every journaled deployment is in deployments.json",
                                 (JOURNAL, "deployments.json"))

LEDGER_SCHEMA: Final = Rule("ledger:schema", "every ledger line matches the job schema", (LEDGER,))
LEDGER_TORN: Final = Rule("ledger:torn", "no torn or broken line before the last", (LEDGER,))
LEDGER_APPEND_ONLY: Final = Rule("ledger:append-only", "the ledger is append-only since the checkpoint",
                                 (LEDGER, CHECKPOINT))
LEDGER_FUTURE: Final = Rule("ledger:no-future-time", "no ledger line's ts or completed_at lies in the future (beyond "
                            "the clock skew allowed)", (LEDGER,))

JOB_TIMES: Final = Rule("job:completed-after-started",
                       "a completed job has started_at and completed_at, in that order", (LEDGER,))
JOB_DURATION: Final = Rule("job:duration-agrees", "duration_s agrees with completed_at − started_at", (LEDGER,))
JOB_COST: Final = Rule("job:cost-matches-rate", "cost_usd ≈ duration_s × cost_hr / 3600 within policy.cost_tolerance",
                       (LEDGER, "deployments.json", "policy.json"))
JOB_FAILED_ERROR: Final = Rule("job:failed-has-error", "a failed job carries an error", (LEDGER,))
JOB_SEQUENCE: Final = Rule("job:only-corrections-after-terminal",
                           "only a correction with a reason follows a terminal line", (LEDGER,))
JOB_LOWERED: Final = Rule("job:lowered-cost-justified", "a correction that lowers a job's cost carries a reason and "
                          "the digest of the line it corrects", (LEDGER,))
#: The per-line job rules, one check each.
JOB: Final = (JOB_TIMES, JOB_DURATION, JOB_COST, JOB_FAILED_ERROR, JOB_SEQUENCE, JOB_LOWERED)

SPEND_PER_JOB: Final = Rule("spend:per-job", "no job billed more than per_job_usd", (LEDGER, "policy.json"))
SPEND_DAILY: Final = Rule("spend:daily", "no UTC day's billed spend (uptime, idle included) above daily_usd",
                          ("deployments.json", JOURNAL, LEDGER, "policy.json"))
SPEND_MONTHLY: Final = Rule("spend:monthly", "no UTC month's billed spend (uptime, idle included) above monthly_usd",
                            ("deployments.json", JOURNAL, LEDGER, "policy.json"))
SPEND_LIVE_BURN: Final = Rule("spend:live-burn", "the live deployments' cost_hr sum stays within max_cost_hr",
                              ("deployments.json", "policy.json"))
SPEND_CONCURRENT: Final = Rule("spend:concurrent", "no more live deployments than max_concurrent_deployments",
                               ("deployments.json", "policy.json"))
#: The spend ceilings of policy.json, one check each.
SPEND: Final = (SPEND_PER_JOB, SPEND_DAILY, SPEND_MONTHLY, SPEND_LIVE_BURN, SPEND_CONCURRENT)

HISTORY_DESTROYED_AT: Final = Rule("history:destroyed-at", "a destroyed deployment keeps status destroyed with "
                                   "destroyed_at, after created_at", ("deployments.json",))
HISTORY_NO_VANISHED: Final = Rule("history:no-vanished", "no deployment vanished since the checkpoint",
                                  ("deployments.json", CHECKPOINT))
HISTORY_ARTIFACTS_SYNCED: Final = Rule("history:artifacts-synced", "every artifact of a destroyed deployment was "
                                       "synced before it was destroyed, and no job was left open on it",
                                       (LEDGER, "deployments.json"))
READY_EVIDENCE: Final = Rule("ready:evidence", "a deployment was ready only after a passed test generation, with "
                             "its health evidence", ("deployments.json", JOURNAL))
JOURNAL_CONSISTENT: Final = Rule("journal:consistent", "the journal chains, follows the lifecycle and ends at the "
                                 "status", (JOURNAL, "deployments.json"))
JOURNAL_FUTURE: Final = Rule("journal:no-future-time", "no journal entry's ts lies in the future (beyond the clock "
                             "skew allowed)", (JOURNAL,))
SHUTDOWN_RULE: Final = Rule("shutdown:rule", "a live paid deployment has a shutdown rule",
                            ("deployments.json", "policy.json"))
SHUTDOWN_IDLE: Final = Rule("shutdown:idle", "no live paid deployment idle beyond max_idle_minutes",
                            ("deployments.json", LEDGER, JOURNAL, "policy.json"))
SHUTDOWN_EXPIRED: Final = Rule("shutdown:expired", "no live paid deployment past its deadline or max_hours",
                               ("deployments.json",))
SHUTDOWN_STEWARD: Final = Rule("shutdown:steward", "a live paid deployment names its cleanup owner and its reason",
                               ("deployments.json",))
SHUTDOWN_GUARD: Final = Rule("shutdown:guard", "a live paid deployment with a shutdown rule had its guard running "
                             "at its last probe", ("deployments.json",))

SECRETS_REGISTRY: Final = Rule("secrets:registry", "no secret in the registry's files", ("the registry",))
SECRETS_LEDGER: Final = Rule("secrets:ledger", "no secret in the ledger, nor the value of a configured credential",
                             (LEDGER, "providers.json"))
SECRETS_CASSETTES: Final = Rule("secrets:cassettes", "no secret in recorded cassettes", ("cassettes/",))
SECRETS_REPORTS: Final = Rule("secrets:reports", "no secret in written reports", ("reports/",))
#: Where secrets are looked for, one check each.
SECRETS: Final = (SECRETS_REGISTRY, SECRETS_LEDGER, SECRETS_CASSETTES, SECRETS_REPORTS)

INVENTORY_ORPHANS: Final = Rule("inventory:orphans", "no instance of ours at a provider that no live deployment "
                                "claims", ("deployments.json", "providers.json", "the providers' inventory"))
INVENTORY_VANISHED: Final = Rule("inventory:vanished", "no live deployment whose instance the provider no longer has",
                                 ("deployments.json", "the providers' inventory"))

BILL_MATCHES: Final = Rule("bill:matches-provider", "each deployment's billed intervals match the provider's own "
                          "bill, per UTC day, within policy.cost_tolerance",
                          ("deployments.json", JOURNAL, "policy.json", "the providers' bill"))

#: Rules judged once per deployment: their findings carry the deployment's id as subject.
PER_DEPLOYMENT: Final = (HISTORY_DESTROYED_AT, HISTORY_ARTIFACTS_SYNCED, READY_EVIDENCE, JOURNAL_CONSISTENT,
                         SHUTDOWN_RULE, SHUTDOWN_IDLE, SHUTDOWN_EXPIRED, SHUTDOWN_STEWARD, SHUTDOWN_GUARD)

AUDIT_RULES: Final = RuleTable("audit", [
    *SCHEMA.values(), *UNIQUE.values(), DEPLOYMENT_PROVIDER, JOB_DEPLOYMENT, JOURNAL_DEPLOYMENT,
    LEDGER_SCHEMA, LEDGER_TORN, LEDGER_APPEND_ONLY, LEDGER_FUTURE, *JOB, *SPEND,
    HISTORY_DESTROYED_AT, HISTORY_NO_VANISHED, HISTORY_ARTIFACTS_SYNCED, READY_EVIDENCE, JOURNAL_CONSISTENT,
    JOURNAL_FUTURE,
    SHUTDOWN_RULE, SHUTDOWN_IDLE, SHUTDOWN_EXPIRED, SHUTDOWN_STEWARD, SHUTDOWN_GUARD, *SECRETS, INVENTORY_ORPHANS,
    INVENTORY_VANISHED, BILL_MATCHES,
])


def short_name(rule: Rule) -> str:
    """The rule's id after its family prefix: what a check parametrized over a group shows (`cost-matches-rate`)."""
    return rule.id.partition(":")[2]
