"""Two agents on one home (B31): two `herd mcp` servers started the same way (no
`--owner`), each with its own SDK client. Each is told only of its own completion (in
tool results and as notice-level log messages), lists only its own job, and cannot
kill the other's.

Usage: python two_agents.py [--protocol 2026-07-28|legacy]
"""

from __future__ import annotations

import re

from herd_client import agent, check, protocol_arg, require, run, stage

PROTOCOL = protocol_arg()
# On 2026-07-28 log messages are opt-in per request (`_meta` logLevel); the SDK stamps
# the level given here on every request. The handshake era gets them by default.
LOG_LEVEL = {"log_level": "notice"} if PROTOCOL != "legacy" else {}


def owner_of(instructions: str | None) -> str:
    match = re.search(r"`(mcp-[0-9a-f]{12})`", instructions or "")
    return match.group(1) if match else ""


async def main() -> None:
    async with agent("A", protocol=PROTOCOL, **LOG_LEVEL) as a, agent("B", protocol=PROTOCOL, **LOG_LEVEL) as b:
        stage("tools/list")
        for x in (a, b):
            tools = await x.c.list_tools()
            require([t.name for t in tools.tools] == ["terminal", "process"], f"{x.name}: tools/list names terminal and process",
                    tools=[t.name for t in tools.tools])
        owner_a, owner_b = owner_of(a.c.instructions), owner_of(b.c.instructions)
        check(owner_a != "" and owner_b != "" and owner_a != owner_b,
              "each server names its own mcp-<12 hex> owner in its instructions", a=owner_a, b=owner_b)

        stage("both start a background job with notify=true")
        id_a = await a.start(command="sleep 2; echo from-a", background=True, notify=True)
        id_b = await b.start(command="sleep 2; echo from-b", background=True, notify=True)

        stage("process list")
        for x, mine, theirs in ((a, id_a, id_b), (b, id_b, id_a)):
            listed = await x.call("process", action="list")
            text = str(listed.json)
            check(mine in text, f"{x.name}: process list shows its own job", listed=listed.json)
            check(theirs not in text, f"{x.name}: process list does not show the other agent's job", listed=listed.json)

        stage("kill the other agent's job")
        for x, theirs in ((a, id_b), (b, id_a)):
            killed = await x.call("process", action="kill", session_id=theirs)
            check(killed.is_error, f"{x.name}: process kill of the other agent's session is an error", answer=killed.json)

        stage("completions")
        for x, mine in ((a, id_a), (b, id_b)):
            await x.poll_until(f"its completion of {mine} arrives in a tool result", lambda x=x, mine=mine: bool(x.completions(mine)))
            await x.poll_until(f"its completion of {mine} arrives as a notice-level log message",
                               lambda x=x, mine=mine: any(mine in log for log in x.notice_logs()))
        for x in (a, b):
            await x.settle()
        for x, mine, theirs, word in ((a, id_a, id_b, "from-a"), (b, id_b, id_a, "from-b")):
            done = x.completions(mine)
            check(len(done) == 1, f"{x.name}: exactly one completion of its job", completions=done)
            check(any("exit code 0" in c and word in c for c in done),
                  f"{x.name}: its job completed normally (exit code 0, its output): the other agent's kill did not reach it",
                  completions=done)
            check(not any(theirs in n for n in x.notices), f"{x.name}: no tool result carries the other agent's job",
                  notices=x.notices)
            check(not any(theirs in log for log in x.notice_logs()),
                  f"{x.name}: no log message carries the other agent's job", logs=x.notice_logs())


run("two_agents --protocol " + PROTOCOL, main)
