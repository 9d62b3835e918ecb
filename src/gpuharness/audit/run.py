"""One audit of a registry: every rule evaluated once, findings grouped by rule id for the checks to assert."""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, final

import msgspec
import orjson

from gpuharness.audit import anchor, rules
from gpuharness.audit import checkpoint as cp
from gpuharness.audit.findings import Finding
from gpuharness.audit.journal_rules import NumberedEntry, journal_problems
from gpuharness.audit.ledger_pass import (
    PassContext,
    PassResult,
    Prior,
    canonical_ts,
    complete_length,
    digest_findings,
    hash_range,
    past_line,
    readable_size,
    scan,
)
from gpuharness.audit.ledger_split import TailChild, cut_point, scan_split
from gpuharness.audit.readiness import readiness_problems
from gpuharness.core import regular_file, schema
from gpuharness.core.billing import billed_intervals
from gpuharness.core.clock import FUTURE_SKEW, format_ts, parse_ts, utcnow
from gpuharness.core.deployment import Deployment, ShutdownRule, live_burn
from gpuharness.core.errors import UserError
from gpuharness.core.job_line import DECODE_ERRORS
from gpuharness.core.journal import JournalEntry
from gpuharness.core.json_text import LineError, loads_line
from gpuharness.core.policy import Policy, exceeds
from gpuharness.core.registry import DOCUMENTS, JOURNAL, LEDGER
from gpuharness.core.rules import Rule
from gpuharness.core.secrets import Credential, configured_credentials, scan_tree
from gpuharness.core.spend import RowKey, Spent, bill, group_book, row_of
from gpuharness.core.statefile import read_json
from gpuharness.core.stewardship import missing_steward


def rate(deployment: Deployment) -> float:
    """A deployment's cost_hr as a number (0 when missing or malformed; the schema rule reports that)."""
    return deployment.cost_hr


def _rule(rule: Rule | str) -> Rule:
    """A rule of the audit table, given as itself or by its id (an unknown id is a KeyError, never a zero)."""
    return rule if isinstance(rule, Rule) else rules.AUDIT_RULES[rule]


def _ts(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return parse_ts(text).timestamp()
    except ValueError:
        return None


@final
@dataclass(slots=True, repr=False, weakref_slot=True)
class AuditRun:
    """The result of one audit: findings by rule, warnings, and the ledger state that a pass would record."""

    root: Path
    now: datetime
    findings: dict[Rule, list[Finding]] = field(default_factory=lambda: defaultdict(list))
    #: problems per (rule, subject): the subject is a deployment id for the per-deployment rules, else ""
    counts: dict[tuple[Rule, str], int] = field(default_factory=lambda: defaultdict(int))
    #: why a per-deployment rule does not apply to a deployment: (rule, deployment id) -> reason
    not_applicable: dict[tuple[Rule, str], str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    state: cp.LedgerState = field(default_factory=cp.LedgerState)
    previous: cp.Checkpoint | None = None
    incremental: bool = False
    lines_validated: int = 0
    pending_dir: Path | None = None
    deployment_ids: list[str] = field(default_factory=list)
    policy_sha256: str = ""
    #: the anchor the checkpoint was verified with: anchor.HMAC or anchor.UNANCHORED
    anchor: str = anchor.UNANCHORED
    #: the providers' configured credentials (credential_env), whose values must be nowhere in what is audited
    credentials: tuple[Credential, ...] = ()
    #: each deployment's well-formed journal entries, in order, with their line numbers
    journal_entries: dict[str, list[NumberedEntry]] = field(default_factory=lambda: defaultdict(list))
    #: deployments.json's deployments, as found (read once, by deployments())
    found: list[Deployment] | None = None
    #: billed and used spend per (UTC day, provider, GPU, deployment): what the spend ceilings read
    book: dict[RowKey, Spent] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"AuditRun({str(self.root)!r}, {sum(self.counts.values())} problem(s))"

    def add(self, rule: Rule, where: str, message: str, *, subject: str = "", count: int = 1) -> None:
        self.findings[rule].append(Finding(rule, where, message, subject))
        self.counts[(rule, subject)] += count

    def problems(self, rule: Rule | str, subject: str | None = None) -> list[Finding]:
        """The findings of one rule (of one subject, when given; capped examples, see `count`)."""
        found = self.findings.get(_rule(rule), [])
        return [f for f in found if subject is None or f.subject == subject]

    def count(self, rule: Rule | str, subject: str | None = None) -> int:
        """How many problems a rule found (about one subject, when given)."""
        rule = _rule(rule)
        if subject is not None:
            return int(self.counts.get((rule, subject), 0))
        return sum(count for (found, _), count in self.counts.items() if found == rule)

    def inapplicable(self, rule: Rule, subject: str) -> str | None:
        """Why a per-deployment rule does not apply to that deployment, or None when it does."""
        return self.not_applicable.get((rule, subject))

    def explain(self, rule: Rule | str, subject: str | None = None, limit: int = 12) -> str:
        """An actionable failure message: every example line, then how many more."""
        rule = _rule(rule)
        found = self.problems(rule, subject)
        lines = [f.line() for f in found[:limit]]
        total = self.count(rule, subject)
        if total - len(lines) > 0:
            lines.append(f"... and {total - len(lines)} more")
        label = f"{rule.id}:{subject}" if subject else rule.id
        return f"{label}: {total} problem(s)\n  " + "\n  ".join(lines)

    def problem_counts(self) -> dict[str, int]:
        """Problems per rule and subject, as `rule` or `rule:subject`, sorted (the report's summary)."""
        labelled = {(f"{rule.id}:{subject}" if subject else rule.id): count
                    for (rule, subject), count in self.counts.items() if count}
        return dict(sorted(labelled.items()))

    @property
    def policy(self) -> Policy:
        """The ceilings of policy.json; malformed values are dropped (the schema rule reports them)."""
        doc = self.documents.get("policy.json") or {}
        clean: dict[str, Any] = {}
        for key, value in doc.items():
            if key in ("require_shutdown_rule",):
                if isinstance(value, bool):
                    clean[key] = value
            elif key == "cost_tolerance":
                if isinstance(value, dict):
                    clean[key] = {k: v for k, v in value.items()
                                  if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0}
            elif isinstance(value, int | float) and not isinstance(value, bool):
                clean[key] = value
        return Policy(clean)

    def items(self, file_name: str) -> list[dict[str, Any]]:
        """The well-formed items of a document (others are reported by the schema rule)."""
        _, key = DOCUMENTS[file_name]
        doc = self.documents.get(file_name) or {}
        items = doc.get(key or "", []) if key else []
        return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []

    def journal(self) -> list[JournalEntry]:
        """The journal's well-formed entries, each deployment's in order: what the billed intervals are read from."""
        return [entry for entries in self.journal_entries.values() for _, entry in entries]

    def deployments(self) -> list[Deployment]:
        """The deployments as found (Deployment.as_found: a malformed field reads as missing), read once."""
        if self.found is None:
            self.found = [Deployment.as_found(item) for item in self.items("deployments.json")]
        return self.found

    @property
    def passed(self) -> bool:
        return not any(self.counts.values())

    def checkpoint_document(self) -> dict[str, Any]:
        return cp.document(self.state, self.deployment_ids, self.policy_sha256)

    def attest(self) -> str:
        """Write the checkpoint after a whole audit whose checks all passed, and say what happened: written,
        unchanged (it already attests this ledger), or not written (this run fails now: the registry changed
        during the audit; or the file could not be written)."""
        if not self.passed:
            return "audit checkpoint not written: the registry changed during the audit and now fails"
        path = cp.checkpoint_path(self.root)
        try:
            written = cp.write(path, self.checkpoint_document(), self.previous)
        except OSError as exc:
            return f"audit checkpoint not written ({exc.strerror}: {path})"
        if not written:
            return f"audit checkpoint {path} already attests {self.state.line_count} lines; unchanged"
        return f"audit checkpoint written: {path} ({self.state.line_count} lines, {self.state.byte_length} bytes)"


def _load_documents(run: AuditRun) -> None:
    for file_name, (schema_name, _) in DOCUMENTS.items():
        rule = rules.SCHEMA[file_name]
        path = run.root / file_name
        try:
            doc = read_json(path)
        except UserError as exc:
            run.add(rule, file_name, f"{exc.what}; {exc.hint or 'fix the file'}")
            continue
        if not isinstance(doc, dict):
            run.add(rule, f"{file_name}:$", "expected a JSON object at the top level")
            continue
        run.documents[file_name] = doc
        errors, warnings = schema.check(schema_name, doc)
        for error in errors:
            run.add(rule, f"{file_name}:{error.json_path}", f"{error.message}; fix that field")
        run.warnings.extend(f"{file_name}:{w.json_path}: {w.message}" for w in warnings)


def _journal(run: AuditRun) -> dict[str, float]:
    """Schema-check transitions.jsonl; return each deployment's last transition time."""
    rule = rules.SCHEMA[JOURNAL]
    last: dict[str, float] = {}
    path = run.root / JOURNAL
    try:
        handle = regular_file.open_stream(path)
    except FileNotFoundError:
        return last
    except UserError as exc:  # a FIFO, a device, a directory in its place
        run.add(rule, JOURNAL, f"{exc.what}; {exc.hint}")
        return last
    known = {d.id for d in run.deployments() if "id" in d.written}
    limit = future_after(run)
    with handle:
        try:
            for lineno, raw in enumerate(regular_file.lines(handle, path, what="journal line"), 1):
                if not _journal_line(run, lineno, raw, known, last, limit):
                    break
        except UserError as exc:  # a line over its cap
            run.add(rule, f"{JOURNAL}:{exc.place}", f"{exc.what}; {exc.hint}")
    return last


def _journal_line(run: AuditRun, lineno: int, raw: bytes, known: set[str], last: dict[str, float],
                  limit: str) -> bool:
    """Check one journal line (False: a torn last line, the end); limit: the latest time it may carry."""
    rule = rules.SCHEMA[JOURNAL]
    if not raw.endswith(b"\n"):
        run.warnings.append(f"{JOURNAL}:{lineno}: torn last line (a writer died mid-write)")
        return False
    try:
        line = loads_line(raw)
    except LineError as exc:
        run.add(rule, f"{JOURNAL}:{lineno}", f"not valid JSON ({exc.message}); move the broken line out")
        return True
    errors, _ = schema.check("transition", line) if isinstance(line, dict) else (
        [schema.SchemaIssue("$", "a journal line must be a JSON object")], [])
    for error in errors[:3]:
        run.add(rule, f"{JOURNAL}:{lineno}:{error.json_path}", error.message)
    if errors or not isinstance(line, dict):
        return True
    entry = JournalEntry.from_json(line)
    deployment = entry.deployment
    if deployment not in known:
        run.add(rules.JOURNAL_DEPLOYMENT, f"{JOURNAL}:{lineno}",
                f"transition of deployment {deployment} ({entry.from_state} → {entry.to_state}), which is not "
                "in deployments.json: history was deleted; restore the deployment (status destroyed, "
                "with destroyed_at)")
    run.journal_entries[deployment].append((lineno, entry))
    moment = _ts(entry.ts)
    if moment is not None and moment > last.get(deployment, 0.0):
        last[deployment] = moment
    if moment is not None and moment > parse_ts(limit).timestamp():
        run.add(rules.JOURNAL_FUTURE, f"{JOURNAL}:{lineno}",
                f"{deployment}: ts {entry.ts} lies after {limit} (now plus the clock skew allowed): a "
                "wrong clock or a forged entry; find out which (the journal is history: never edit it)")
    return True


def future_after(run: AuditRun) -> str:
    """The latest time a ledger line or journal entry may carry: the audit's now (or the machine's, if later: an audit
    as of an earlier time still knows what cannot have happened yet) plus the clock skew allowed."""
    return format_ts(max(run.now, utcnow()) + FUTURE_SKEW)


def _references(run: AuditRun) -> None:
    for file_name, keys in rules.IDENTITY.items():
        seen: dict[tuple[Any, ...], int] = {}
        for index, item in enumerate(run.items(file_name)):
            key = tuple(item.get(k) for k in keys)
            if key in seen:
                label = ", ".join(f"{k}={v}" for k, v in zip(keys, key, strict=True))
                run.add(rules.UNIQUE[file_name], f"{file_name}:$.{DOCUMENTS[file_name][1]}[{index}]",
                        f"duplicate {label} (first at index {seen[key]}); merge or rename one of them")
            else:
                seen[key] = index
    providers = {p.get("name") for p in run.items("providers.json")}
    for deployment in run.deployments():
        provider = deployment.provider if "provider" in deployment.written else None
        if provider not in providers:
            run.add(rules.DEPLOYMENT_PROVIDER, f"deployment {deployment.id}",
                    f"provider {provider!r} is not in providers.json "
                    f"(known: {sorted(p for p in providers if p)}); add it there or fix the deployment")


def _ledger(run: AuditRun, use_checkpoint: bool) -> None:
    root = run.root
    path = root / LEDGER
    size = readable_size(path, lambda rule, message: run.add(rule, LEDGER, message))
    if size is None:
        return
    ids = [d.id if "id" in d.written else None for d in run.deployments()]
    # built once from the Deployments: the pass looks a rate up per line
    rates = {d.id: d.cost_hr for d in run.deployments() if "cost_hr" in d.written and "id" in d.written and d.id}
    tol_abs, tol_rel = run.policy.cost_tolerance
    ctx = PassContext(str(path), rates, tol_abs, tol_rel, run.policy.ceilings.per_job_usd,
                      credentials=run.credentials, future_after=future_after(run))
    previous: cp.Checkpoint | None = None
    if use_checkpoint:
        try:
            previous = cp.load(cp.checkpoint_path(root))
        except ValueError as exc:
            run.add(rules.LEDGER_APPEND_ONLY, rules.CHECKPOINT,
                    f"{exc}; move it aside to re-baseline (the next passing audit writes a new one)")
    previous = _anchored(run, previous)
    run.previous = previous
    pending = Path(tempfile.mkdtemp(prefix="gh-audit-"))
    run.pending_dir = pending
    weakref.finalize(run, shutil.rmtree, str(pending), True)
    results: list[PassResult] = []
    digest: Any = None
    rebaseline = previous is not None and (previous.policy_sha256 != run.policy_sha256
                                           or len(previous.state.job_files) > cp.MAX_JOB_FILES
                                           or cp.ROW not in previous.state.aggregates)
    with ThreadPoolExecutor(1) as hasher:  # hashing releases the GIL: it runs beside the pass
        if previous is not None:
            # The attested prefix is hashed while the new lines are checked; they count only if it proves unchanged.
            pending_digest = hasher.submit(_prefix_digest, path, size, previous.state.byte_length,
                                           previous.state.prefix_hash)
            end = previous.state.byte_length
            if size > end and not rebaseline:
                state = previous.state
                wanted = _job_ids(path, end, size)
                prior = Prior(cp.load_jobs(cp.checkpoint_path(root).parent, state.job_files, wanted),
                              frozenset(state.open_jobs), frozenset(state.unsynced))
                results = [scan(ctx, end, size, prior, pending / "jobs-delta.jsonl")]
                end = complete_length(path, size)
            digest = _verified_prefix(run, previous, pending_digest.result())
        if previous is not None and digest is not None and not rebaseline:
            run.state = previous.state
            run.incremental = True
            hash_range(path, previous.state.byte_length, end, digest)
        else:
            run.state = cp.LedgerState()
            end = complete_length(path, size)
            cut = cut_point(str(path), size)
            child = TailChild.start(ctx, cut, size, pending) if cut else None  # forked before the hash thread starts
            full_digest = hasher.submit(_prefix_digest, path, size, end, cp.PREFIX_HASH)
            if cut:
                results = [scan_split(ctx, size, cut, child, pending)]
            else:
                results = [scan(ctx, 0, size, None, pending / "jobs-full.jsonl")] if size else []
            digest = full_digest.result()
    _merge(run, results)
    run.state.byte_length = end
    run.state.prefix_digest = digest.hexdigest()
    if previous is not None:
        vanished = sorted(set(previous.deployment_ids) - set(ids))
        for deployment in vanished:
            run.add(rules.HISTORY_NO_VANISHED, f"deployment {deployment}",
                    f"was in deployments.json at the checkpoint of {previous.written_at} and is gone now; history "
                    "is never deleted: restore it (status destroyed, with destroyed_at)")


class _JobId(msgspec.Struct, gc=False):
    id: str


_decode_job_id = msgspec.json.Decoder(_JobId).decode


def _job_ids(path: Path, start: int, end: int) -> set[str]:
    """The job ids of the lines in [start, end), read as orjson reads them (msgspec reads a superset of what orjson
    does, skipping what the id does not need; orjson decides the lines it refuses; unparsable lines, and lines over
    their cap, are left to the pass)."""
    ids: set[str] = set()
    with regular_file.open_stream(path) as handle:
        position = handle.seek(start)
        while position < end:
            raw = handle.readline(min(regular_file.JSONL_LINE + 1, end - position))
            if not raw:
                break
            if not raw.endswith(b"\n") and position + len(raw) < end:  # over its cap: skipped whole, never held
                position = past_line(handle, position + len(raw), end)
                handle.seek(position)
                continue
            position += len(raw)
            try:
                ids.add(_decode_job_id(raw).id)
                continue
            except DECODE_ERRORS:
                pass
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict) and isinstance(record.get("id"), str):
                ids.add(record["id"])
    return ids


def _anchored(run: AuditRun, previous: cp.Checkpoint | None) -> cp.Checkpoint | None:
    """The checkpoint when its anchor holds (else None, and a finding naming it); records the anchor used."""
    verdict = previous.anchored if previous is not None else anchor.Verdict(
        anchor.HMAC if anchor.key() is not None else anchor.UNANCHORED)
    run.anchor = verdict.used
    if (weak := anchor.weak_key()) is not None:
        run.warnings.append(weak)
    if verdict.problem is not None:
        run.add(rules.LEDGER_APPEND_ONLY, rules.CHECKPOINT,
                f"{verdict.problem}; do not trust its totals: restore checkpoint.json and jobs.jsonl from a backup, "
                f"or move checkpoint.json aside to re-baseline with {anchor.KEY_ENV} set (a full pass)")
        return None
    if previous is not None and verdict.used == anchor.UNANCHORED:
        run.warnings.append(f"{rules.CHECKPOINT}: the checkpoint is unanchored ({anchor.UNANCHORED}): whoever can "
                            f"rewrite jobs.jsonl can rewrite it too; set {anchor.KEY_ENV} to sign it with HMAC-SHA256")
    return previous


def _prefix_digest(path: Path, size: int, length: int, hash_name: str) -> Any:
    """The hash state over the first `length` bytes, or None when the file is shorter than that."""
    if size < length:
        return None
    digest = cp.PREFIX_HASHES[hash_name]()
    hash_range(path, 0, length, digest)
    return digest


def _verified_prefix(run: AuditRun, previous: cp.Checkpoint, digest: Any) -> Any:
    """The digest when the checkpointed prefix is unchanged, else None (and a finding)."""
    state = previous.state
    where = f"{LEDGER}:1-{state.line_count}"
    if digest is None:
        run.add(rules.LEDGER_APPEND_ONLY, where,
                f"the ledger is shorter than the {state.byte_length} bytes ({state.line_count} lines) the checkpoint "
                f"of {previous.written_at} covered: history was truncated; restore jobs.jsonl from a backup")
        return None
    if digest.hexdigest() != state.prefix_digest:
        run.add(rules.LEDGER_APPEND_ONLY, where,
                f"the first {state.line_count} lines ({state.byte_length} bytes) changed since the checkpoint of "
                f"{previous.written_at} ({state.prefix_hash} {digest.hexdigest()[:12]}… ≠ "
                f"{state.prefix_digest[:12]}…): history was rewritten; restore those lines and append correction "
                "lines instead")
        return None
    return digest


def _merge(run: AuditRun, results: list[PassResult]) -> None:
    state = run.state
    base = state.line_count
    for result in results:
        for rule, count in result.counts.items():
            run.counts[(rule, "")] += count
        state.absorb(result)
        if result.torn is not None:
            run.warnings.append(f"{LEDGER}:{base + result.torn.lineno}: torn last line ({result.torn.length} bytes "
                                "without a newline): a writer died mid-write; it was never acknowledged and the next "
                                "append quarantines it")
        for found in result.findings:
            where = f"{LEDGER}:{base + found.lineno}" if found.lineno else LEDGER
            run.findings[found.rule].append(Finding(found.rule, where, found.message))
    lowered = [item._replace(lineno=base + item.lineno) for result in results for item in result.lowered]
    for found in digest_findings(run.root / LEDGER, lowered):
        run.add(found.rule, f"{LEDGER}:{found.lineno}", found.message)
    lines = results[0].lines if results else 0
    state.line_count = base + lines
    run.lines_validated = lines


def billed_book(run: AuditRun) -> dict[RowKey, Spent]:
    """Billed spend (each deployment's billed intervals from the journal, up to the audit's `now`) beside the jobs'
    cost, per UTC day, provider, GPU and deployment."""
    deployments = run.deployments()
    storage: dict[str, float] = {}
    if any(d.status == "stopped" for d in deployments):  # a stopped volume bills where its provider charges for it
        from gpuharness.providers.factory import stopped_storage_rates

        storage = stopped_storage_rates(run.items("providers.json"))
    intervals = billed_intervals(deployments, run.journal(), run.now, storage)
    used = {row_of(name): amount for name, amount in run.state.aggregates.get(cp.ROW, {}).items()}
    return bill(used, intervals)


def _spend(run: AuditRun) -> None:
    """Daily and monthly billed spend, live burn and concurrency (per-job spend is checked in the ledger pass)."""
    policy = run.policy
    run.book = billed_book(run)
    ceilings = policy.ceilings
    for grouping, ceiling, limit in (("day", "daily_usd", ceilings.daily_usd),
                                     ("month", "monthly_usd", ceilings.monthly_usd)):
        if limit is None:
            continue
        for key, spent in group_book(run.book, grouping).items():
            if exceeds(spent.billed, limit):
                run.add(rules.SPEND_DAILY if grouping == "day" else rules.SPEND_MONTHLY, f"{grouping} {key} (UTC)",
                        f"billed ${spent.billed:,.2f} (jobs ${spent.used:,.2f}, idle ${spent.idle:,.2f}) > {ceiling} "
                        f"${limit:,.2f} (over by ${spent.billed - limit:,.2f}); see `gpuharness spend "
                        f"--by {grouping}` and stop the leak (an idle pod bills too), or raise the ceiling on purpose")
    billing = [d for d in run.deployments() if d.bills]
    burn, _ = live_burn(billing)
    cap_hr = ceilings.max_cost_hr
    names = ", ".join(f"{d.id} ${d.cost_hr:.2f}/hr ({d.status})" for d in billing)
    if exceeds(burn, cap_hr):
        run.add(rules.SPEND_LIVE_BURN, "deployments.json",
                f"live burn ${burn:.2f}/hr > max_cost_hr ${cap_hr or 0.0:.2f}/hr: {names}; destroy or stop one "
                "(`gpuharness destroy ID`)")
    cap_n = ceilings.max_concurrent_deployments
    if exceeds(len(billing), cap_n):
        run.add(rules.SPEND_CONCURRENT, "deployments.json",
                f"{len(billing)} live deployments > max_concurrent_deployments {cap_n:g}: {names}; destroy the "
                "ones not needed")


def _history(run: AuditRun) -> dict[str, list[str]]:
    """Destroyed deployments keep their history and died with nothing unsynced; returns the open jobs by
    deployment."""
    destroyed_at: dict[str, str] = {}
    kept = rules.HISTORY_DESTROYED_AT
    synced = rules.HISTORY_ARTIFACTS_SYNCED
    for d in run.deployments():
        dep = d.id
        when = _ts(d.destroyed_at)
        if d.status == "destroyed":
            if when is None:
                run.add(kept, f"deployment {dep}", "status is destroyed but destroyed_at is missing; record when it "
                        "was destroyed (see transitions.jsonl)", subject=dep)
            else:
                destroyed_at[dep] = canonical_ts(str(d.destroyed_at))
                created = _ts(d.created_at)
                if created is not None and when < created:
                    run.add(kept, f"deployment {dep}",
                            f"destroyed_at {d.destroyed_at} is before created_at {d.created_at}; fix the "
                            "times from transitions.jsonl", subject=dep)
        else:
            run.not_applicable[(synced, dep)] = f"status {d.status}: not destroyed"
        if d.status != "destroyed" and when is not None:
            run.add(kept, f"deployment {dep}",
                    f"has destroyed_at {d.destroyed_at} but status {d.status}; a destroyed deployment "
                    "keeps status destroyed (check the provider: is it still running?)", subject=dep)
    state = run.state
    open_jobs: dict[str, list[str]] = defaultdict(list)
    for job_id, deployment in sorted(state.open_jobs.items()):
        open_jobs[deployment].append(job_id)
    for job_id, (deployment, name) in sorted(state.unsynced.items()):
        if deployment in destroyed_at:
            run.add(synced, f"job {job_id}",
                    f"artifact {name!r} was never synced (no synced_at) before deployment {deployment} was destroyed; "
                    "sync it if a copy exists, else record discarded: true in a correction line", subject=deployment)
    for deployment, gone in destroyed_at.items():
        latest = state.synced_max.get(deployment)
        if latest is not None and latest.synced_at > gone:
            late = (parse_ts(latest.synced_at) - parse_ts(gone)).total_seconds()
            run.add(synced, f"job {latest.job_id}", f"artifacts synced at {latest.synced_at}, {late:.0f} s after "
                    f"deployment {deployment} was destroyed ({gone}); outputs die with the instance: sync before "
                    "destroy", subject=deployment)
        for job_id in open_jobs.get(deployment, []):
            run.add(synced, f"job {job_id}", f"still open (queued or running) on destroyed deployment {deployment}; "
                    "its outputs died with the instance: append an interrupted (or failed) line", subject=deployment)
    return open_jobs


def unguarded(run: AuditRun, d: Deployment) -> None:
    """shutdown:guard: its last probe saw no running guard (the health record's shutdown_guard_armed failed)."""
    health = d.health or {}
    found = health.get("checks")
    checks: dict[str, Any] = found if isinstance(found, dict) else {}
    failed = "shutdown_guard_armed" in (health.get("failed_checks") or []) or (
        checks.get("shutdown_guard_armed") == "failed")
    if not (d.shutdown_rule and d.shutdown_rule.to_json()):
        run.not_applicable[(rules.SHUTDOWN_GUARD, d.id)] = "no shutdown rule for a guard to carry out"
    elif failed:
        run.add(rules.SHUTDOWN_GUARD, f"deployment {d.id}",
                f"live at ${rate(d):g}/hr with the shutdown rule '{d.shutdown_rule.words()}' but its last probe "
                f"({health.get('failed_at') or health.get('passed_at') or '?'}) saw no guard running: only `gpuharness "
                f"reap --apply` stops it now; re-arm it with `gpuharness guard {d.id}`, or destroy it",
                subject=d.id)


def _shutdown(run: AuditRun, journal_last: dict[str, float], open_jobs: dict[str, list[str]]) -> None:
    """Every live paid deployment has a shutdown rule, is not idle past max_idle_minutes and is within its stop."""
    policy = run.policy
    max_idle = policy.ceilings.max_idle_minutes
    need_rule = policy.require_shutdown_rule
    for d in run.deployments():
        dep = d.id
        if d.burn_hr <= 0:
            reason = f"status {d.status}, ${rate(d):g}/hr: not a live paid deployment"
            for rule in (rules.SHUTDOWN_RULE, rules.SHUTDOWN_IDLE, rules.SHUTDOWN_EXPIRED, rules.SHUTDOWN_STEWARD,
                         rules.SHUTDOWN_GUARD):
                run.not_applicable[(rule, dep)] = reason
            continue
        _stop_condition(run, d)
        unguarded(run, d)
        if missing := missing_steward(d):
            run.add(rules.SHUTDOWN_STEWARD, f"deployment {dep}",
                    f"live at ${rate(d):g}/hr with no {' and no '.join(missing)}: a paid resource needs a cleanup "
                    "owner and a reason; set them in deployments.json (provision --owner/--reason), or destroy it",
                    subject=dep)
        if not need_rule:
            run.not_applicable[(rules.SHUTDOWN_RULE, dep)] = "policy.json does not set require_shutdown_rule"
        elif not (d.shutdown_rule and d.shutdown_rule.to_json()):
            run.add(rules.SHUTDOWN_RULE, f"deployment {dep}",
                    f"live at ${rate(d):g}/hr with no shutdown_rule; add idle_minutes, max_hours "
                    "or a deadline to it in deployments.json, or destroy it", subject=dep)
        if max_idle is None:
            run.not_applicable[(rules.SHUTDOWN_IDLE, dep)] = "policy.json sets no max_idle_minutes"
            continue
        if open_jobs.get(dep):
            run.not_applicable[(rules.SHUTDOWN_IDLE, dep)] = f"busy: {len(open_jobs[dep])} open job(s)"
            continue
        stamps = [_ts(d.created_at), _ts(d.ready_at), _ts(run.state.last_ts.get(dep)),
                  journal_last.get(dep)]
        last = max((s for s in stamps if s is not None), default=None)
        if last is None:
            continue
        idle = (run.now.timestamp() - last) / 60.0
        if exceeds(idle, max_idle):
            run.add(rules.SHUTDOWN_IDLE, f"deployment {dep}",
                    f"idle for {idle:.0f} min (no open job since {format_ts(datetime.fromtimestamp(last, UTC))}) > "
                    f"max_idle_minutes {float(max_idle):g} at ${rate(d):g}/hr; destroy it "
                    "(`gpuharness destroy " + dep + "`) or run the queued work", subject=dep)


def _readiness_and_journal(run: AuditRun) -> None:
    for d in run.deployments():
        dep = d.id
        entries = run.journal_entries.get(dep, [])
        into_ready = [(lineno, entry.from_state) for lineno, entry in entries
                      if entry.to_state == "ready" and entry.from_state != "ready"]
        for where, message in readiness_problems(d, into_ready):
            run.add(rules.READY_EVIDENCE, where, message, subject=dep)
        if not entries:
            run.not_applicable[(rules.JOURNAL_CONSISTENT, dep)] = "no journal entries (a hand-kept history)"
            continue
        for where, message in journal_problems(d, entries):
            run.add(rules.JOURNAL_CONSISTENT, where, message, subject=dep)


def _stop_condition(run: AuditRun, d: Deployment) -> None:
    """A live paid deployment past its own deadline or max_hours is money spent past its declared stop."""
    dep = d.id
    stop = d.shutdown_rule or ShutdownRule()
    now = run.now.timestamp()
    deadline = _ts(stop.deadline)
    if deadline is not None and now > deadline:
        over = (now - deadline) / 3600
        run.add(rules.SHUTDOWN_EXPIRED, f"deployment {dep}",
                f"still live {over:.1f} h past its deadline {stop.deadline} at ${rate(d):g}/hr "
                f"(≈ ${over * rate(d):.2f} spent past it); destroy it (`gpuharness reap --apply`) or move the deadline",
                subject=dep)
    created = _ts(d.created_at)
    max_hours = stop.max_hours
    if created is not None and max_hours is not None and (now - created) / 3600 > float(max_hours):
        over = (now - created) / 3600 - float(max_hours)
        run.add(rules.SHUTDOWN_EXPIRED, f"deployment {dep}",
                f"live for {(now - created) / 3600:.1f} h > its max_hours {float(max_hours):g} at ${rate(d):g}/hr "
                f"(≈ ${over * rate(d):.2f} spent past it); destroy it (`gpuharness reap --apply`) or raise max_hours",
                subject=dep)
    if deadline is None and max_hours is None:
        run.not_applicable[(rules.SHUTDOWN_EXPIRED, dep)] = "its shutdown rule sets no deadline or max_hours"


def _unknown_deployments(run: AuditRun) -> None:
    known = {d.id for d in run.deployments() if "id" in d.written}
    missing = sorted(run.state.ledger_deployments - known)
    if not missing:
        return
    state = run.state
    for deployment in missing:
        examples = ", ".join(state.dep_examples.get(deployment, []))
        run.add(rules.JOB_DEPLOYMENT, f"deployment {deployment}",
                f"{state.dep_lines.get(deployment, 0)} ledger line(s) (e.g. jobs {examples}) run on a deployment that "
                "is not in deployments.json; restore it there (destroyed deployments stay, with destroyed_at)")


def _secrets(run: AuditRun, extra_roots: dict[Rule, Path]) -> None:
    # the ledger is scanned by the ledger pass; audit/ holds only what this audit derived from it
    for path, lineno, hit in scan_tree(run.root, skip=(LEDGER, "audit"), credentials=run.credentials):
        rel = path.relative_to(run.root)
        run.add(rules.SECRETS_REGISTRY, f"{rel}:{lineno}", f"{hit.kind} {hit.shown}; revoke it at the provider and "
                "keep only the environment variable's name (credential_env)")
    for rule, root in extra_roots.items():
        for path, lineno, hit in scan_tree(root, credentials=run.credentials):
            run.add(rule, f"{path}:{lineno}", f"{hit.kind} {hit.shown}; revoke it, then delete or "
                    "re-record the file scrubbed")


def run_audit(root: Path, now: datetime, *, use_checkpoint: bool = True,
              secret_roots: dict[Rule, Path] | None = None) -> AuditRun:
    """Audit the registry at root, as of `now`, using (and verifying) its checkpoint when there is one."""
    run = AuditRun(root=root, now=now)
    _load_documents(run)
    run.deployment_ids = sorted(d.id for d in run.deployments())
    run.policy_sha256 = cp.policy_digest(run.documents.get("policy.json") or {})
    run.credentials = configured_credentials(p.get("credential_env") for p in run.items("providers.json"))
    journal_last = _journal(run)
    _references(run)
    _ledger(run, use_checkpoint)
    _spend(run)
    _unknown_deployments(run)
    _shutdown(run, journal_last, _history(run))
    _readiness_and_journal(run)
    _secrets(run, secret_roots or {})
    return run
