"""The `.pi/gpu/` registry: validated loads, locked read-modify-write, atomic saves."""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, final

from gpuharness.core import schema, secrets, tables
from gpuharness.core.deployment import Deployment, json_value
from gpuharness.core.errors import UserError
from gpuharness.core.policy import MONEY_CEILINGS, STARTING, Policy
from gpuharness.core.statefile import atomic_write_json, exclusive_lock, read_json, sweep_stale_temps
from gpuharness.core.stewardship import refuse_dropped_owner

DEFAULT_DIR = ".pi/gpu"
ENV_VAR = "GPUHARNESS_REGISTRY"

#: whole-file JSON documents: file name -> (schema name, list key or None for flat documents)
DOCUMENTS: dict[str, tuple[str, str | None]] = {
    "providers.json": ("providers", "providers"),
    "machines.json": ("machines", "machines"),
    "deployments.json": ("deployments", "deployments"),
    "models.json": ("models", "models"),
    "workflows.json": ("workflows", "workflows"),
    "connections.json": ("connections", "connections"),
    "policy.json": ("policy", None),
}
LEDGER = "jobs.jsonl"
JOURNAL = "transitions.jsonl"
OBSERVATIONS = "observations.jsonl"

def default_policy() -> dict[str, Any]:
    """The policy a new registry starts with: these ceilings, and every provider kind there is allowed (the provider
    table's kinds: a new provider is allowed without editing this)."""
    policy: dict[str, Any] = {"schema_version": 1}
    for key, value in STARTING.items():
        if key == "require_shutdown_rule":  # in the order the file has always had
            policy["allowed_providers"] = list(tables.names(tables.PROVIDER_KINDS))
        policy[key] = copy.deepcopy(value)
    return policy


def empty_document(file_name: str) -> dict[str, Any]:
    """The empty form of a whole-file document."""
    _, key = DOCUMENTS[file_name]
    if key is None:
        return default_policy()
    return {"schema_version": 1, key: []}


def nearest_registry(start: Path) -> Path | None:
    """The nearest directory .pi/gpu at start or above it, as git finds .git; None where there is none."""
    for folder in (start, *start.parents):
        candidate = folder / DEFAULT_DIR
        if candidate.is_dir():
            return candidate if folder != start else Path(DEFAULT_DIR)
    return None




@final
class Registry:
    """One registry directory. Reads are validated; writes are atomic and locked."""

    __slots__ = ("root", "warnings")

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.warnings: list[str] = []
        secrets.watch_providers(self.path("providers.json"))  # every sink redacts this registry's providers' keys

    @classmethod
    def locate(cls, explicit: str | Path | None = None, *, search: bool = True) -> Registry:
        """--registry DIR, else $GPUHARNESS_REGISTRY, else the nearest .pi/gpu from here up the directory tree
        (as git finds .git; search=False, for init, takes ./.pi/gpu), else .pi/gpu."""
        if explicit:
            return cls(explicit)
        chosen = os.environ.get(ENV_VAR)
        if chosen:
            return cls(chosen)
        found = nearest_registry(Path.cwd()) if search else None
        return cls(found or DEFAULT_DIR)

    @classmethod
    def existing(cls, explicit: str | Path | None = None) -> Registry:
        """The registry located as by locate(); refused (one line) when there is none: only `init` creates one."""
        registry = cls.locate(explicit)
        registry.require()
        return registry

    def require(self) -> None:
        """Refuse, creating nothing, when this directory is not a registry (missing, or holding none of its
        files): a mistyped --registry must not read as an empty estate."""
        names = (*DOCUMENTS, LEDGER, JOURNAL)
        if not self.root.is_dir() or not any(self.path(name).exists() for name in names):
            what = ("no registry here: the directory holds none of its files" if self.root.is_dir()
                    else "no registry directory here")
            raise UserError(what, path=self.root, hint="run `gpuharness init` or pass --registry DIR")

    def path(self, file_name: str) -> Path:
        """The path of a file of this registry."""
        return self.root / file_name

    @property
    def ledger_path(self) -> Path:
        return self.root / LEDGER

    @property
    def journal_path(self) -> Path:
        return self.root / JOURNAL

    @property
    def audit_dir(self) -> Path:
        return self.root / "audit"

    def exists(self) -> bool:
        return self.root.is_dir()

    def init(self) -> list[Path]:
        """Create missing files (never overwrites); return the ones created."""
        if self.root.exists() and not self.root.is_dir():
            raise UserError("exists and is not a directory", path=self.root,
                            hint="pass --registry DIR naming a directory")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"cannot create the registry directory: {exc.strerror}", path=self.root) from None
        created: list[Path] = []
        for file_name in DOCUMENTS:
            path = self.path(file_name)
            if not path.exists():
                atomic_write_json(path, empty_document(file_name))
                created.append(path)
        for file_name in (LEDGER, JOURNAL):
            path = self.path(file_name)
            if not path.exists():
                path.touch()
                created.append(path)
        return created

    def validate(self, file_name: str, document: Any) -> None:
        """Raise UserError on the first schema error; keep unknown-field warnings."""
        schema_name, _ = DOCUMENTS[file_name]
        path = self.path(file_name)
        try:
            errors, warnings = schema.check(schema_name, document)
        except RecursionError:
            raise UserError("a value is nested too deeply to check", path=path, place="$",
                            hint="nothing was changed") from None
        for warning in warnings:
            text = f"{path}:{warning.json_path}: {warning.message}"
            if text not in self.warnings:  # loading a file again does not repeat its warnings
                self.warnings.append(text)
        if errors:
            first = errors[0]
            more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
            raise UserError(f"{first.message}{more}", path=path, place=first.json_path,
                            hint="fix that field; nothing was changed")

    def load(self, file_name: str, *, missing_ok: bool = False) -> dict[str, Any]:
        """Load and validate a whole-file document."""
        path = self.path(file_name)
        if missing_ok and not path.exists():
            return empty_document(file_name)
        document = read_json(path)
        if not isinstance(document, dict):
            raise UserError("expected a JSON object at the top level", path=path, place="1:1")
        self.validate(file_name, document)
        return document

    def items(self, file_name: str, *, missing_ok: bool = True) -> list[dict[str, Any]]:
        """The list held by a document (deployments, providers, ...)."""
        _, key = DOCUMENTS[file_name]
        if key is None:
            raise KeyError(f"{file_name} holds no list")
        items: list[dict[str, Any]] = self.load(file_name, missing_ok=missing_ok)[key]
        return items

    @contextlib.contextmanager
    def update(self, file_name: str) -> Iterator[dict[str, Any]]:
        """Locked read-modify-write: yields the document; saves it atomically if it validates."""
        path = self.path(file_name)
        if not self.root.is_dir():  # only init creates the directory
            self.require()
        with exclusive_lock(path):
            document = self.load(file_name, missing_ok=True)
            owners = ({str(d["id"]): {"owner": d.get("owner")} for d in document["deployments"]}
                      if file_name == "deployments.json" else {})
            yield document
            self.validate(file_name, document)
            if file_name == "deployments.json":
                refuse_dropped_owner(owners, document["deployments"], path)
            atomic_write_json(path, document)
            sweep_stale_temps(path)

    # Deployments: typed records, one lookup by id, changes under the lock.
    def deployments(self) -> list[Deployment]:
        """Every deployment of deployments.json (an empty list when the file does not exist yet)."""
        return [Deployment.from_json(item) for item in self.items("deployments.json")]

    def deployment(self, deployment_id: str) -> Deployment:
        """The deployment with this id; a UserError naming the known ids when there is none."""
        return Deployment.from_json(self._record(self.items("deployments.json"), deployment_id))

    def _record(self, records: list[dict[str, Any]], deployment_id: str) -> dict[str, Any]:
        for record in records:
            if record["id"] == deployment_id:
                return record
        known = [str(r["id"]) for r in records]
        listed = ", ".join(known[:12]) + (f", … ({len(known)} in all)" if len(known) > 12 else "")
        raise UserError(f"no deployment {deployment_id!r} (known: {listed or 'none'})",
                        path=self.path("deployments.json"), hint="see `gpuharness status` for the known ids")

    @contextlib.contextmanager
    def change_deployment(self, deployment_id: str) -> Iterator[DeploymentChange]:
        """Locked read-modify-write of one deployment: the change is saved (atomically, if the document still
        validates) when the block ends; fields not set stay exactly as they were written."""
        with self.update("deployments.json") as document:
            yield DeploymentChange(self, document, self._record(document["deployments"], deployment_id))

    def update_deployment(self, deployment_id: str, **changes: Any) -> Deployment:
        """Set fields of one deployment under the lock; returns it as saved."""
        with self.change_deployment(deployment_id) as change:
            change.set(**changes)
        return change.after

    def add_deployment(self, build: Callable[[list[Deployment]], Deployment | None]) -> Deployment | None:
        """Append the deployment build(the deployments recorded now) makes, under the deployments.json lock (so
        whatever build decides from them holds when it is written); build returning None adds nothing. An id
        already taken is refused, and nothing is written."""
        with self.update("deployments.json") as document:
            deployments = [Deployment.from_json(item) for item in document["deployments"]]
            deployment = build(deployments)
            if deployment is None:
                return None
            if any(d.id == deployment.id for d in deployments):
                raise self.id_taken(deployment.id)
            document["deployments"].append(deployment.to_json())
        return deployment

    def id_taken(self, deployment_id: str) -> UserError:
        """The error of a new deployment whose id is taken (ids are never reused)."""
        return UserError(f"deployment id {deployment_id!r} already exists", path=self.path("deployments.json"),
                         hint="ids are never reused; pick another or omit --id")

    def providers(self) -> list[dict[str, Any]]:
        return self.items("providers.json")

    def provider(self, name: str) -> dict[str, Any]:
        for item in self.providers():
            if item["name"] == name:
                return item
        raise UserError(f"no provider {name!r}", path=self.path("providers.json"),
                        hint="add it to providers.json")

    def policy_document(self) -> dict[str, Any]:
        """policy.json, or the built-in defaults when the file is missing (for read-only views, which say so:
        see has_policy)."""
        return self.load("policy.json", missing_ok=True)

    def has_policy(self) -> bool:
        """Whether policy.json exists (without it, the ceilings shown are the built-in defaults)."""
        return self.path("policy.json").exists()

    def policy_origin(self) -> str:
        """Where the ceilings a read-only view shows come from: policy.json, or the built-in defaults, so labelled."""
        if self.has_policy():
            return str(self.path("policy.json"))
        return "built-in defaults (no policy.json; `gpuharness init` writes one; provision and run refuse without it)"

    def spending_policy(self) -> dict[str, Any]:
        """policy.json for a money-spending action (provision, run, a plan's launch). A missing file is refused:
        the built-in defaults are not the user's ceilings, and the policy is read before every such action."""
        if not self.has_policy():
            raise UserError("no policy.json: the ceilings that guard spending are missing",
                            path=self.path("policy.json"),
                            hint="run `gpuharness init` (it writes a default policy.json to review); nothing was "
                                 "launched or run")
        document = self.load("policy.json")
        if Policy(document).sets_no_ceiling:
            raise UserError("policy.json sets no ceiling at all: nothing would limit what this spends",
                            path=self.path("policy.json"), place="ceilings",
                            hint=f"set one of {', '.join(MONEY_CEILINGS)}, or say `\"ceilings\": \"none\"` with a "
                                 "`\"reason\"`; nothing was launched or run")
        return document


@final
class DeploymentChange:
    """One deployment being changed inside Registry.change_deployment (the registry's lock is held)."""

    __slots__ = ("_document", "_record", "_registry", "before")

    def __init__(self, registry: Registry, document: dict[str, Any], record: dict[str, Any]) -> None:
        self._registry = registry
        self._document = document
        self._record = record
        self.before = Deployment.from_json(record)

    def set(self, **changes: Any) -> None:
        """Set fields (typed values are written in the file's form)."""
        self._record.update({name: json_value(value) for name, value in changes.items()})

    @property
    def after(self) -> Deployment:
        """The deployment with the changes set so far."""
        return Deployment.from_json(self._record)

    def validate(self) -> None:
        """Raise UserError now if the changed document would not validate (it is checked again on save)."""
        self._registry.validate("deployments.json", self._document)
