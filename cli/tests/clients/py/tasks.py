"""Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663) on 2026-07-28.

The Python SDK 2.3.0 ships no tasks client of its own; it ships the extension
machinery a tasks client is built from (`mcp.client.extension.ClientExtension` and
`ResultClaim`, SEP-2133). `TasksExtension` below is that client half, written the
way the SDK documents it: it advertises the extension (the SDK stamps it into every
2026-07-28 request's `_meta` `io.modelcontextprotocol/clientCapabilities`, and only
on modern connections, because its claim is active only there) and claims the
`resultType: "task"` shape of `tools/call`, resolving it by polling `tasks/get`.

Checked:
- `terminal(command="sleep 2; echo task-done", background=true)` called as a task is
  answered with a task handle; `tasks/get` reports `working`, then `completed` with the
  tool result inlined: output `task-done`, exit code 0;
- `Client.call_tool` resolves a tasked call transparently through the claim;
- a task running `exec sleep 60` cancelled with `tasks/cancel` ends as `cancelled` and
  its process is gone;
- the same client on a 2025-11-25 connection (where the SDK does not advertise the
  extension) gets the plain tool result.

Usage: python tasks.py
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Literal

import anyio
import mcp_types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import CallToolResult, RequestParams, Result

from herd_client import HOME, agent, check, require, run, stage

TASKS = "io.modelcontextprotocol/tasks"
TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL = ("completed", "failed", "cancelled")


class _TaskFields(Result):
    """The task fields every SEP-2663 task result carries (camelCase on the wire)."""

    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class CreateTaskResult(_TaskFields):
    """A `tools/call` answered with a task handle."""

    result_type: Literal["task"]


class GetTaskResult(_TaskFields):
    """The `tasks/get` answer: the task plus its inlined outcome."""

    result_type: Literal["complete"] = "complete"
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None


class TaskIdParams(RequestParams):
    task_id: str


class GetTaskRequest(mcp_types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"


class CancelTaskRequest(mcp_types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


async def get_task(session: Any, task_id: str) -> GetTaskResult:
    return await session.send_request(GetTaskRequest(params=TaskIdParams(task_id=task_id)), GetTaskResult)


async def drive(session: Any, task_id: str, timeout: float, statuses: list[str]) -> GetTaskResult:
    """Polls `tasks/get` until the task is terminal (the server's pollIntervalMs,
    at most 200 ms apart so a short `working` phase is seen)."""
    end = time.monotonic() + timeout
    while True:
        task = await get_task(session, task_id)
        statuses.append(task.status)
        if task.status in TERMINAL:
            return task
        require(time.monotonic() < end, f"task {task_id} reached a terminal status within {timeout:.0f}s",
                statuses=statuses)
        await anyio.sleep(min((task.poll_interval_ms or 50) / 1000, 0.2))


async def _resolve(claimed: CreateTaskResult, ctx: ClaimContext) -> CallToolResult:
    final = await drive(ctx.session, claimed.task_id, 30, [])
    if final.status != "completed" or final.result is None:
        raise RuntimeError(f"task {claimed.task_id} ended {final.status}: {final.error}")
    return CallToolResult.model_validate(final.result)


class TasksExtension(ClientExtension):
    """The client half of `io.modelcontextprotocol/tasks`."""

    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=_resolve)]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def answer_json(result: dict[str, Any]) -> Any:
    texts = [c.get("text") for c in result.get("content", []) if c.get("type") == "text"]
    try:
        return json.loads(texts[0]) if texts else None
    except ValueError:
        return texts[0]


async def main() -> None:
    async with agent("A", extensions=[TasksExtension()]) as a:
        session = a.c.session
        caps = a.c.server_capabilities
        check(TASKS in (caps.extensions or {}), "the server advertises the tasks extension in server/discover",
              capabilities=caps)

        stage("a terminal call as a task")
        handle = await session.call_tool("terminal", {"command": "sleep 2; echo task-done", "background": True},
                                         allow_claimed=True)
        calls = [m for m in a.sent if m.get("method") == "tools/call"]
        advertised = (calls[-1].get("params", {}).get("_meta", {}).get(mcp_types.CLIENT_CAPABILITIES_META_KEY, {})
                      .get("extensions", {}) if calls else {})
        check(TASKS in advertised, "the SDK advertised the tasks extension on the tools/call", sent=calls[-1:])
        require(isinstance(handle, CreateTaskResult), "the tasked tools/call is answered with a task handle",
                answer=handle)
        check(handle.status == "working", "the handle's task is working", handle=handle)
        statuses: list[str] = [handle.status]
        final = await drive(session, handle.task_id, 20, statuses)
        check("working" in statuses[1:], "tasks/get reports working before the end", statuses=statuses)
        check(final.status == "completed", "tasks/get reports completed", statuses=statuses, final=final)
        result = final.result or {}
        shown = answer_json(result)
        check("task-done" in json.dumps(result), "the task result carries the output task-done", result=result)
        check(isinstance(shown, dict) and shown.get("exit_code") == 0, "the task result says exit code 0",
              result=result)
        check(result.get("isError") is not True, "the task result is not an error", result=result)

        stage("a tasked call resolved by the SDK")
        try:
            resolved = await a.c.call_tool("terminal", {"command": "echo transparent", "background": True})
            check("transparent" in json.dumps(resolved.model_dump(mode="json")),
                  "Client.call_tool resolves a tasked call to the tool's result", result=resolved)
        except Exception as e:  # noqa: BLE001 - reported
            check(False, "Client.call_tool resolves a tasked call to the tool's result",
                  error=f"{type(e).__name__}: {e}")

        stage("a task cancelled with tasks/cancel")
        pid_file = os.path.join(os.path.dirname(HOME), "task.pid")
        handle = await session.call_tool(
            "terminal", {"command": f"echo $$ > {pid_file}; exec sleep 60", "background": True}, allow_claimed=True)
        require(isinstance(handle, CreateTaskResult), "the second tasked call is answered with a task handle",
                answer=handle)
        end = time.monotonic() + 15
        pid = 0
        while pid == 0:
            require(time.monotonic() < end, "the task's command wrote its pid", pid_file=pid_file)
            try:
                with open(pid_file) as f:
                    pid = int(f.read().strip() or 0)
            except (OSError, ValueError):
                pass
            await anyio.sleep(0.05)
        require(alive(pid), "the task's process runs before the cancel", pid=pid)
        await session.send_request(CancelTaskRequest(params=TaskIdParams(task_id=handle.task_id)), Result)
        statuses = []
        final = await drive(session, handle.task_id, 15, statuses)
        check(final.status == "cancelled", "tasks/get reports cancelled", statuses=statuses, final=final)
        end = time.monotonic() + 10
        while alive(pid) and time.monotonic() < end:
            await anyio.sleep(0.05)
        check(not alive(pid), "the cancelled task's process is gone", pid=pid)
        if alive(pid):
            os.kill(pid, 9)

    stage("the extension on a 2025-11-25 connection")
    # The SDK advertises a claim-bearing extension only where its claim is active
    # (2026-07-28), so the handshake-era client is not task-capable: a background
    # terminal is answered as usual.
    async with agent("L", protocol="legacy", extensions=[TasksExtension()]) as legacy:
        answer = await legacy.c.session.call_tool("terminal", {"command": "echo plain", "background": True},
                                                  allow_claimed=True)
        check(isinstance(answer, CallToolResult) and "session_id" in json.dumps(answer.model_dump(mode="json")),
              "a 2025-11-25 client is answered with the tool result, not a task", answer=answer)


run("tasks", main)
