"""Shared plumbing for the checks that drive `herd mcp` through the official MCP Python SDK.

cli/tests/it/clients.rs runs each check script with `HERD` (the binary under test)
and `HERD_HOME` (a fresh home) set. A script exits 0 when every check held. Otherwise
it prints one JSON line, `{"check": ..., "failed": [...]}`, naming each check that did
not hold with what was seen, and exits 1. A check is soft (recorded, the script goes
on, so one run reports every broken point) unless the rest cannot run without it.

Waiting is always on a condition with a deadline: the helpers poll with cheap tool
calls (`process list`) until the condition holds or the deadline passes, and a
missed deadline is a failure that says what was awaited and what was seen.

Notices are read the way an agent reads them: herd attaches its pending
notifications to a tool result as text blocks after the first (JSON) block. Each
notice entry starts with `[`; a completion entry's first line names the session and
its exit (`(exit code N)`, `(signal …)`, `(exit status unknown)`), a watch wake's
first line names the session and the watch.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback
import warnings
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

HERD = os.environ["HERD"]
HOME = os.environ["HERD_HOME"]
# The whole script's deadline; the Rust side kills the script a little after it.
DEADLINE_S = float(os.environ.get("HERD_CLIENT_DEADLINE", "60"))
# How long one awaited condition may take.
WAIT_S = 20.0
# The pause between two polls of a condition (a poll is a tool call).
POLL_INTERVAL_S = 0.05

# The SDK marks the logging feature deprecated (SEP-2577); herd still uses it.
warnings.simplefilter("ignore")


class Failure(Exception):
    """A check that cannot be recovered from: the script stops here."""

    def __init__(self, reason: str, **details: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.details = details


class Report:
    """The checks that did not hold, and where the script was."""

    def __init__(self) -> None:
        self.failed: list[dict[str, Any]] = []
        self.stage = "starting"

    def add(self, reason: str, details: dict[str, Any]) -> None:
        self.failed.append({"check": reason, "stage": self.stage, **_jsonable(details)})


REPORT = Report()


def stage(name: str) -> None:
    """Names what the script does next (shown with any failure after it)."""
    REPORT.stage = name


def check(cond: bool, reason: str, **details: Any) -> bool:
    """A soft check: recorded when it fails, and the script goes on."""
    if not cond:
        REPORT.add(reason, details)
    return cond


def require(cond: bool, reason: str, **details: Any) -> None:
    """A hard check: the script stops when it fails."""
    if not cond:
        raise Failure(reason, **details)


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        if isinstance(value, dict):
            return {str(k): _jsonable(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [_jsonable(v) for v in value]
        if hasattr(value, "model_dump"):
            return value.model_dump(by_alias=True, mode="json", exclude_none=True)
        return repr(value)


def notice_entries(text: str) -> list[str]:
    """The entries of one notice block (herd joins entries with a blank line)."""
    return [e for e in re.split(r"\n\n(?=\[)", text) if e.strip()]


def is_completion(entry: str, session_id: str) -> bool:
    """Whether a notice entry is the completion of `session_id`."""
    first = entry.splitlines()[0] if entry else ""
    return session_id in first and re.search(r"\((?:exit code|signal|exit status)", first) is not None


def is_watch_wake(entry: str, session_id: str) -> bool:
    """Whether a notice entry is a watch wake of `session_id`."""
    first = entry.splitlines()[0] if entry else ""
    return session_id in first and "watch" in first.lower() and not is_completion(entry, session_id)


class Answer:
    """One tool result: the first block's JSON, the notice blocks after it, isError."""

    def __init__(self, tool: str, args: dict[str, Any], result: Any) -> None:
        self.tool = tool
        self.args = args
        self.result = result
        texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
        require(len(texts) >= 1, "a tool result has a first text block", tool=tool, args=args, result=result)
        try:
            self.json: Any = json.loads(texts[0])
        except ValueError as e:
            raise Failure("the first text block is JSON", tool=tool, args=args, text=texts[0], error=str(e)) from e
        self.notices = texts[1:]
        self.is_error = bool(result.is_error)

    def __repr__(self) -> str:
        return json.dumps({"tool": self.tool, "args": self.args, "answer": self.json, "notices": self.notices,
                           "is_error": self.is_error})


class _RecordingWrite:
    """The client's write stream, recording every JSON-RPC message the SDK sends."""

    def __init__(self, inner: Any, sent: list[dict[str, Any]]) -> None:
        self._inner = inner
        self._sent = sent

    async def send(self, item: Any) -> None:
        message = item.message
        dump = getattr(message, "model_dump", None)
        self._sent.append(dump(by_alias=True, mode="json", exclude_none=True) if dump else {"raw": repr(message)})
        await self._inner.send(item)

    async def __aenter__(self) -> _RecordingWrite:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@asynccontextmanager
async def _recording_stdio(params: StdioServerParameters, sent: list[dict[str, Any]]):
    async with stdio_client(params) as (read, write):
        yield read, _RecordingWrite(write, sent)


class Agent:
    """One `herd mcp` server and the SDK client talking to it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.client: Client | None = None
        # Every notice block seen in a tool result, in arrival order.
        self.notices: list[str] = []
        # Every logging message received.
        self.logs: list[Any] = []
        # Every JSON-RPC message the SDK sent.
        self.sent: list[dict[str, Any]] = []

    async def on_log(self, params: Any) -> None:
        self.logs.append(params)

    @property
    def c(self) -> Client:
        assert self.client is not None, "the agent is connected inside its context"
        return self.client

    async def call(self, tool: str, **args: Any) -> Answer:
        result = await self.c.call_tool(tool, args)
        answer = Answer(tool, args, result)
        self.notices.extend(answer.notices)
        return answer

    async def start(self, **args: Any) -> str:
        """Starts a `terminal` job and returns its session id (hard check)."""
        answer = await self.call("terminal", **args)
        require(not answer.is_error and isinstance(answer.json.get("session_id"), str),
                f"{self.name}: terminal starts the job and names its session_id", answer=answer.json)
        return answer.json["session_id"]

    def entries(self) -> list[str]:
        return [e for block in self.notices for e in notice_entries(block)]

    def completions(self, session_id: str) -> list[str]:
        return [e for e in self.entries() if is_completion(e, session_id)]

    def watch_wakes(self, session_id: str) -> list[str]:
        return [e for e in self.entries() if is_watch_wake(e, session_id)]

    def notice_logs(self) -> list[str]:
        """The text of each notice-level logging message."""
        return [json.dumps(_jsonable(log.data)) for log in self.logs if log.level == "notice"]

    async def poll_until(self, what: str, cond: Callable[[], bool], timeout: float = WAIT_S) -> bool:
        """Calls `process list` until `cond()` holds; a soft failure after `timeout`."""
        end = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > end:
                REPORT.add(f"{self.name}: {what} within {timeout:.0f}s",
                           {"notices": self.notices, "logs": self.notice_logs()})
                return False
            await self.call("process", action="list")
            await anyio.sleep(POLL_INTERVAL_S)
        return True

    async def settle(self, n_calls: int = 3) -> None:
        """A few more cheap calls, so a duplicate notice would have a result to ride."""
        for _ in range(n_calls):
            await self.call("process", action="list")


def server_params(*args: str) -> StdioServerParameters:
    """`herd mcp ARGS…` for the test's home; no `HERD_OWNER` (the SDK passes a safe
    subset of the environment plus what is named here)."""
    return StdioServerParameters(command=HERD, args=["mcp", *args], env={"HERD_HOME": HOME, "HERD_LOG": "warn"})


@asynccontextmanager
async def agent(name: str, *, protocol: str = "2026-07-28", args: tuple[str, ...] = (),
                params: StdioServerParameters | None = None, into: Agent | None = None, **client_kwargs: Any):
    """A connected agent. `protocol` is `2026-07-28` (negotiated with `server/discover`,
    the SDK's default `mode="auto"`) or `legacy` (the 2025-11-25 initialize handshake).
    `params` starts the server another way (through a wrapper); `into` reuses an
    agent's records (its notices) for a new server, as a host that starts one per call."""
    a = into or Agent(name)
    mode = "legacy" if protocol == "legacy" else "auto"
    async with Client(_recording_stdio(params or server_params(*args), a.sent), mode=mode, logging_callback=a.on_log,
                      **client_kwargs) as client:
        a.client = client
        expected = "2025-11-25" if protocol == "legacy" else protocol
        require(client.protocol_version == expected, f"{name}: the connection speaks {expected}",
                negotiated=client.protocol_version)
        if protocol != "legacy":
            require(client.session.discover_result is not None,
                    f"{name}: {protocol} was negotiated with server/discover (no initialize)")
        yield a


def protocol_arg() -> str:
    """`--protocol legacy|2026-07-28` from the command line (default 2026-07-28)."""
    argv = sys.argv[1:]
    if "--protocol" in argv:
        return argv[argv.index("--protocol") + 1]
    return "2026-07-28"


def _first_failure(exc: BaseException) -> BaseException:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _first_failure(inner)
            if isinstance(found, Failure):
                return found
        return _first_failure(exc.exceptions[0])
    return exc


def run(name: str, main: Callable[[], Awaitable[None]]) -> None:
    """Runs `main` under the script's deadline and reports: exit 0 when every check held."""

    async def guarded() -> None:
        with anyio.fail_after(DEADLINE_S):
            await main()

    try:
        anyio.run(guarded)
    except BaseException as exc:  # noqa: BLE001 - every way out is reported
        err = _first_failure(exc)
        if isinstance(err, Failure):
            REPORT.add(err.reason, err.details)
        elif isinstance(err, TimeoutError):
            REPORT.add(f"the script finished within its {DEADLINE_S:.0f}s deadline", {})
        else:
            traceback.print_exception(exc, file=sys.stderr)
            REPORT.add("the script ran without an exception", {"exception": f"{type(err).__name__}: {err}"})
    if REPORT.failed:
        print(json.dumps({"check": name, "failed": REPORT.failed}, indent=1), flush=True)
        sys.exit(1)
    print(json.dumps({"check": name, "passed": True}), flush=True)
