"""Owner continuity (B31, issue 28): a host that starts a new `herd mcp` per tool call
(LangChain's default, the Inspector CLI, any host restarting its servers), with no
`--owner`, is one agent. The job a first server started is listed, polled and
completed through the servers started after it, and its completion is delivered
exactly once across them; a server started through wrappers (`sh -c`, `env`) is the
same agent; another host (a child process) is another agent, whose call on the job
says it belongs to another agent and names `--owner`.

Usage: python per_call.py [--protocol 2026-07-28|legacy]
       python per_call.py --child SESSION_ID   (the other host: prints what it saw)
"""

from __future__ import annotations

import json
import re
import sys

import anyio
from mcp import StdioServerParameters

from herd_client import HERD, HOME, Agent, agent, check, protocol_arg, require, run, stage

PROTOCOL = "2026-07-28" if "--child" in sys.argv else protocol_arg()


def owner_of(instructions: str | None) -> str:
    match = re.search(r"`(mcp-[0-9a-f]{12})`", instructions or "")
    return match.group(1) if match else ""


async def one_call(records: Agent, tool: str, params: StdioServerParameters | None = None, **args):
    """One tool call on a server started for it alone; the answer and the server's owner."""
    async with agent(records.name, protocol=PROTOCOL, params=params, into=records) as a:
        answer = await a.call(tool, **args)
        return answer, owner_of(a.c.instructions)


async def child(session_id: str) -> None:
    records = Agent("other-host")
    answer, owner = await one_call(records, "process", action="poll", session_id=session_id)
    listed, _ = await one_call(records, "process", action="list", state="all")
    print(json.dumps({"owner": owner, "poll": answer.json, "poll_is_error": answer.is_error,
                      "lists_it": session_id in json.dumps(listed.json)}), flush=True)


async def main() -> None:
    host = Agent("host")
    stage("the first server starts a background job")
    started, owner = await one_call(host, "terminal", command="sleep 3; echo per-call-done", background=True,
                                    notify=True)
    require(not started.is_error and isinstance(started.json.get("session_id"), str),
            "terminal starts the job", answer=started.json)
    session_id = started.json["session_id"]
    require(owner != "", "the server names its mcp-<12 hex> owner", owner=owner)

    stage("a second server lists and polls it")
    listed, owner2 = await one_call(host, "process", action="list")
    check(owner2 == owner, "a server started after the first acts for the same owner", first=owner, second=owner2)
    check(session_id in json.dumps(listed.json), "the second server lists the job", listed=listed.json)
    polled, _ = await one_call(host, "process", action="poll", session_id=session_id)
    check(not polled.is_error and polled.json.get("status") == "running", "the job polls as running",
          answer=polled.json)

    stage("a server started through wrappers (sh -c, env)")
    wrapped = StdioServerParameters(command="sh", args=["-c", f'env HERD_LOG=warn "{HERD}" mcp; true'],
                                    env={"HERD_HOME": HOME})
    _, owner3 = await one_call(host, "process", action="list", params=wrapped)
    check(owner3 == owner, "a server behind sh and env acts for the same owner", first=owner, wrapped=owner3)

    stage("another host")
    with anyio.fail_after(30):
        seen = await anyio.run_process([sys.executable, __file__, "--child", session_id], check=False)
    require(seen.returncode == 0, "the other host's script ran", stderr=seen.stderr.decode()[-2000:])
    other = json.loads(seen.stdout.decode().strip().splitlines()[-1])
    check(other["owner"] not in ("", owner), "another host is another owner", mine=owner, other=other)
    check(not other["lists_it"], "another host does not list the job", other=other)
    error = str(other["poll"].get("error", ""))
    check(other["poll_is_error"] and "belongs to another agent" in error and "--owner" in error,
          "another host's poll says the job belongs to another agent and names --owner", other=other)

    stage("the completion, one server per call")
    with anyio.fail_after(20):
        while not host.completions(session_id):
            await one_call(host, "process", action="list")
            await anyio.sleep(0.1)
    for _ in range(3):
        await one_call(host, "process", action="list")
    done = host.completions(session_id)
    check(len(done) == 1 and "per-call-done" in done[0], "its completion is delivered exactly once", completions=done)


if "--child" in sys.argv:
    anyio.run(child, sys.argv[sys.argv.index("--child") + 1])
else:
    run("per_call --protocol " + PROTOCOL, main)
