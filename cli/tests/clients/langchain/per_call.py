"""LangChain's MCP adapters with their default, stateless pattern (issue 28): every tool
call starts a new `herd mcp` (no `--owner`) for that call alone. The agent keeps its
job across those servers: a background job started by one call is listed and polled
by the next ones, and its completion is delivered exactly once, in a later call's
result (as a text block after the first and in the structured content's `notices`).

Run by cli/tests/it/clients.rs with `$HERD_TEST_LANGCHAIN_PYTHON` (a venv with
requirements.txt here, pinned by constraints.txt; .ci/run installs it) and `HERD`,
`HERD_HOME` set. Exits 0 when every check held; otherwise prints one JSON line naming
the checks that did not hold, and exits 1. Waits are on conditions with deadlines.

Usage: python per_call.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import traceback
from typing import Any

from langchain_mcp_adapters.client import MultiServerMCPClient

HERD = os.environ["HERD"]
HOME = os.environ["HERD_HOME"]
DEADLINE_S = float(os.environ.get("HERD_CLIENT_DEADLINE", "60"))
WAIT_S = 20.0
STARTS = os.path.join(os.getcwd(), "servers-started")

failed: list[dict[str, Any]] = []


def check(cond: bool, reason: str, **details: Any) -> bool:
    if not cond:
        failed.append({"check": reason, **details})
    return cond


class Failure(Exception):
    pass


def require(cond: bool, reason: str, **details: Any) -> None:
    if not check(cond, reason, **details):
        raise Failure(reason)


class Calls:
    """The tools, each call on a server of its own, and the notices seen."""

    def __init__(self, tools: dict[str, Any]) -> None:
        self.tools = tools
        self.notices: list[str] = []
        self.structured_notices: list[str] = []
        self.n_calls = 0

    async def call(self, tool: str, **args: Any) -> dict[str, Any]:
        self.n_calls += 1
        message = await self.tools[tool].ainvoke(
            {"type": "tool_call", "id": f"call-{self.n_calls}", "name": tool, "args": args}
        )
        blocks = message.content if isinstance(message.content, list) else [message.content]
        texts = [b["text"] if isinstance(b, dict) else str(b) for b in blocks]
        require(len(texts) >= 1, "a result has a first text block", tool=tool, content=message.content)
        answer = json.loads(texts[0])
        self.notices.extend(texts[1:])
        structured = (message.artifact or {}).get("structured_content") or {}
        notices = structured.get("notices") or []
        self.structured_notices.extend([notices] if isinstance(notices, str) else notices)
        return answer

    def completions(self, session_id: str, notices: list[str]) -> list[str]:
        entries = [e for n in notices for e in n.split("\n\n[") if e.strip()]
        return [e for e in entries if session_id in e.split("\n")[0] and "(exit code" in e.split("\n")[0]]


async def main() -> None:
    client = MultiServerMCPClient(
        {
            "herd": {
                "transport": "stdio",
                # Through `sh`, which counts the servers started and then is the server.
                "command": "sh",
                "args": ["-c", f'echo started >>"{STARTS}"; exec "{HERD}" mcp'],
                "env": {"HERD_HOME": HOME, "HERD_LOG": "warn", "PATH": os.environ.get("PATH", "")},
            }
        }
    )
    tools = {t.name: t for t in await client.get_tools()}
    require({"terminal", "process"} <= set(tools), "the adapter loads terminal and process", tools=list(tools))
    calls = Calls(tools)

    started = await calls.call("terminal", command="sleep 2; echo lc-done", background=True)
    session_id = started.get("session_id")
    require(isinstance(session_id, str), "a background terminal call names its session", answer=started)

    listed = await calls.call("process", action="list")
    check(session_id in json.dumps(listed), "the next call's server lists the job", listed=listed)
    polled = await calls.call("process", action="poll", session_id=session_id)
    check(polled.get("status") in ("running", "exited"), "the next call's server polls the job", polled=polled)

    loop = asyncio.get_running_loop()
    end = loop.time() + WAIT_S
    while not calls.completions(session_id, calls.notices) and loop.time() < end:
        await calls.call("process", action="list")
    for _ in range(3):
        await calls.call("process", action="list")
    done = calls.completions(session_id, calls.notices)
    check(len(done) == 1 and "lc-done" in done[0],
          "the completion (notify by default) comes exactly once across per-call servers",
          completions=done, notices=calls.notices)
    check(len(calls.completions(session_id, calls.structured_notices)) == 1,
          "the completion is in the structured content's notices too (the artifact)",
          structured=calls.structured_notices)
    with open(STARTS, encoding="utf-8") as starts:
        n_servers = len(starts.read().splitlines())
    check(calls.n_calls >= 4 and n_servers >= calls.n_calls,
          "every call had a server of its own", calls=calls.n_calls, servers=n_servers)


async def guarded() -> None:
    try:
        await asyncio.wait_for(main(), DEADLINE_S)
    except Failure:
        pass
    except Exception:  # noqa: BLE001 - reported as a failed check
        failed.append({"check": "the script ran without an exception", "exception": traceback.format_exc()})


asyncio.run(guarded())
if failed:
    print(json.dumps({"check": "langchain per_call", "failed": failed}))
    sys.exit(1)
print(json.dumps({"check": "langchain per_call", "passed": True}))
