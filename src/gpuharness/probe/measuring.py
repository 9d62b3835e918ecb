"""The GPU measurement in the probe phase: taken where the policy asks for it (`performance_floor.measure`), as one
more exec on the probe's connection, by the interpreter the probe found running the service; recorded with the
probe's transcript and replayed with it, so that offline the performance check judges what was measured."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, final

from gpuharness.core.deployment import Deployment
from gpuharness.core.json_fields import JsonFields
from gpuharness.core.policy import Policy
from gpuharness.gpu import measurement
from gpuharness.gpu.measurement import Measurement
from gpuharness.probe.facts import ProbeResult
from gpuharness.remote import Remote


@final
@dataclass(frozen=True, slots=True)
class MeasurementRecord(JsonFields):
    """One probe phase's GPU measurement: its exec's output, or why it was not taken (`skipped`: absent or
    no_interpreter, a host that cannot be measured; job_running or gpu_error, one not to measure now)."""

    stdout: str | None = None
    stderr: str = ""
    exit_status: int | None = None
    interpreter: str | None = None
    duration_s: float | None = None
    skipped: str | None = None
    reason: str | None = None

    def parse(self) -> Measurement | None:
        """The measurement; for a host that cannot be measured, why (None: not taken for another reason)."""
        if self.stdout is not None:
            return measurement.parse(self.stdout, self.stderr, self.exit_status, interpreter=self.interpreter)
        if self.skipped == "absent":
            return Measurement("absent", self.reason or "torch is absent")
        if self.skipped == "no_interpreter":
            return Measurement("no_interpreter", self.reason or "no interpreter")
        return None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MeasurementRecord:
        known = {name: data.get(name) for name in ("stdout", "interpreter", "duration_s", "skipped", "reason",
                                                   "exit_status")}
        return cls(stderr=str(data.get("stderr") or ""), **known)


def deadline_s(policy: Policy) -> int:
    """The measurement's own deadline (`health_timeouts.measure_s`)."""
    return policy.health_timeouts.measure_s


def skip(deployment: Deployment, facts: ProbeResult) -> MeasurementRecord | None:
    """Why not to measure this host now (None: measure it)."""
    if deployment.status == "running":
        return MeasurementRecord(skipped="job_running", reason="a job is running: measuring would slow it, and it "
                                                               "would slow the figures")
    if facts.gpu_error is not None:
        return MeasurementRecord(skipped="gpu_error", reason=f"nvidia-smi failed ({facts.gpu_error}): nothing to "
                                                             "measure")
    smoke = facts.smoke
    if smoke.outcome == "absent":
        return MeasurementRecord(interpreter=smoke.interpreter, skipped="absent",
                                 reason=f"torch is not importable by {smoke.interpreter or 'the service'} "
                                        f"(the smoke test: {smoke.result})")
    if not smoke.interpreter:
        return MeasurementRecord(skipped="no_interpreter", reason=f"the probe found no interpreter of the service "
                                                                  f"({smoke.result})")
    return None


def take(remote: Remote, deployment: Deployment, policy: Policy, facts: ProbeResult,
         precision: str | None, clock: Callable[[], float] = time.monotonic) -> MeasurementRecord | None:
    """Measure on the probe's connection where the policy asks for it (None: it does not)."""
    if not policy.performance_floor.measure:
        return None
    skipped = skip(deployment, facts)
    if skipped is not None:
        return skipped
    started = clock()
    interpreter = facts.smoke.interpreter
    result = remote.exec(measurement.build_script(interpreter, deadline_s=deadline_s(policy),
                                                      precision=precision), deadline_s=deadline_s(policy) + 15)
    return MeasurementRecord(result.stdout, result.stderr, result.exit_status, interpreter,
                             round(clock() - started, 3))


def transcript_entry(record: MeasurementRecord | None, scrub: Callable[[str], str]) -> dict[str, Any]:
    """What a probe transcript keeps of the measurement (scrubbed), or nothing where none was asked for."""
    if record is None:
        return {}
    data = record.to_json()
    for name in ("stdout", "stderr"):
        if data[name] is not None:
            data[name] = scrub(data[name])
    data.pop("duration_s")
    return {"measurement": data, "measurement_version": measurement.MEASUREMENT_VERSION}


def recorded(document: Mapping[str, Any]) -> MeasurementRecord | None:
    """The measurement a probe transcript recorded (None: none)."""
    entry = document.get("measurement")
    return MeasurementRecord.from_json(entry) if isinstance(entry, Mapping) else None
