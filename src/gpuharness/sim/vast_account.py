"""The Vast account and the calls whose answer comes later: user, SSH keys, logs and execute, under /vast.

`logs` and `execute` answer with a `result_url` that the client polls without a key (on Vast, a storage bucket);
the simulator serves those results itself under /vast/results/.
"""

from __future__ import annotations

import secrets
from typing import Any

from gpuharness.sim.routing import SimRequest, SimResponse, json_response, text_response
from gpuharness.sim.state import SimInstance, SimState

PROVIDER = "vast"
USER_ID = 424_242
#: what `vastai execute` may run, per its help ("available commands: ls, rm, du")
EXECUTABLE = ("ls", "rm", "du")
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGh1c2ltdWxhdGVka2V5Zm9ydmFzdGFjY291bnQ0Mg gpuharness-sim"


def show_user(req: SimRequest, state: SimState) -> SimResponse:
    """GET /api/v0/users/current: the fields `vastai show user` prints (the key itself is never sent)."""
    spent = sum(i.accrued_usd for (p, _), i in state.instances.items() if p == PROVIDER)
    return json_response(200, {
        "id": USER_ID, "key_id": 1_001, "username": "gpuharness-sim", "fullname": "gpuharness simulator",
        "email": "sim@example.invalid", "email_verified": True, "balance": 0.0, "credit": round(100.0 - spent, 4),
        "balance_threshold": 5.0, "balance_threshold_enabled": False, "billaddress_city": None,
        "billaddress_country": None, "billaddress_line1": None, "billaddress_line2": None, "billaddress_zip": None,
        "billed_expected": 0.0, "billed_verified": 0.0, "billing_creditonly": False, "can_pay": True,
        "got_signup_credit": True, "has_billing": True, "has_payout": False, "last4": None, "paid_expected": 0.0,
        "paid_verified": 0.0, "password_resettable": True, "paypal_email": None, "ssh_key": SSH_KEY,
        "user": "gpuharness-sim", "host_agreement_accepted": False, "sid": "sim-session",
    })


def show_ssh_keys(req: SimRequest, state: SimState) -> SimResponse:
    """GET /api/v0/ssh/: the account's keys, a bare array."""
    return json_response(200, [{"id": 101, "user_id": USER_ID, "public_key": SSH_KEY, "key": SSH_KEY,
                                "created_at": 1_760_000_000.0, "deleted_at": None}])


def _instance(req: SimRequest, state: SimState) -> SimInstance | SimResponse:
    instance = state.get(PROVIDER, req.match["id"])
    if instance is None:
        return json_response(404, {"success": False, "error": "not_found", "msg": "Instance not found"})
    return instance


def _publish(req: SimRequest, state: SimState, text: str) -> str:
    """Keep text at a new result URL on this simulator (the host the client called) and return the URL."""
    token = secrets.token_urlsafe(16)
    state.results[token] = text
    host = req.headers.get("host", "127.0.0.1")
    return f"http://{host}/vast/results/{token}"


def _log_lines(instance: SimInstance, state: SimState) -> list[str]:
    lines = [f"Pulling image {instance.image}", f"{instance.image}: Pull complete", "Container created"]
    if instance.status == "running":
        lines += ["Starting sshd", "Server listening on 0.0.0.0 port 22.", "success, running"]
    elif instance.status == "stopped":
        lines.append("Container stopped")
    return lines


def request_logs(req: SimRequest, state: SimState) -> SimResponse:
    """PUT /api/v0/instances/request_logs/{id}/ with optional tail / filter -> {"success", "result_url"}."""
    found = _instance(req, state)
    if isinstance(found, SimResponse):
        return found
    body: dict[str, Any] = req.body if isinstance(req.body, dict) else {}
    lines = _log_lines(found, state)
    if body.get("filter"):
        lines = [line for line in lines if str(body["filter"]) in line]
    tail = str(body.get("tail") or "")
    if tail.isdigit():
        lines = lines[-int(tail):] if int(tail) else []
    return json_response(200, {"success": True, "msg": "logs requested",
                               "result_url": _publish(req, state, "\n".join(lines) + "\n")})


def execute(req: SimRequest, state: SimState) -> SimResponse:
    """PUT /api/v0/instances/command/{id}/ {"command"} -> {"success", "writeable_path", "result_url"}."""
    found = _instance(req, state)
    if isinstance(found, SimResponse):
        return found
    command = req.body.get("command") if isinstance(req.body, dict) else None
    if not isinstance(command, str) or not command.strip():
        return json_response(400, {"success": False, "error": "invalid_args", "msg": "command is required"})
    program = command.split()[0]
    if program not in EXECUTABLE:
        return json_response(400, {"success": False, "error": "invalid_args",
                                   "msg": f"command {program!r} is not allowed (allowed: {', '.join(EXECUTABLE)})"})
    if found.status != "running":
        return json_response(400, {"success": False, "error": "invalid_args",
                                   "msg": f"instance {found.id} is not running"})
    writeable = f"/var/lib/vastai/instances/C.{found.id}"
    # [UNVERIFIED] the output is a stand-in: the simulator does not run the command on the instance
    output = {"ls": "workspace\n", "rm": "", "du": f"4.0K\t{writeable}/workspace\n"}[program]
    return json_response(200, {"success": True, "writeable_path": writeable,
                               "result_url": _publish(req, state, output)})


def result(req: SimRequest, state: SimState) -> SimResponse:
    """GET /vast/results/{token}: a logs or execute result, read without a key."""
    text = state.results.get(req.match["token"])
    if text is None:
        return text_response(404, "NoSuchKey")
    return text_response(200, text)
