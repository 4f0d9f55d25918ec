"""Client cancellation (B24, interrupted): a foreground `terminal` whose request the
client cancels (an anyio cancel scope around `call_tool`; the SDK then sends
`notifications/cancelled`) leaves the job running in the background, and later tool
results carry exactly one completion for it.

Usage: python cancel.py [--protocol 2026-07-28|legacy]
"""

from __future__ import annotations

import anyio

from herd_client import agent, check, protocol_arg, require, run, stage

PROTOCOL = protocol_arg()
COMMAND = "sleep 3; echo done"


async def main() -> None:
    async with agent("A", protocol=PROTOCOL) as a:
        scope = anyio.CancelScope()
        outcome: dict[str, object] = {}

        async def foreground() -> None:
            with scope:
                outcome["answer"] = await a.c.call_tool("terminal", {"command": COMMAND, "timeout": 60})
            outcome["cancelled"] = scope.cancelled_caught

        session_id = ""
        async with anyio.create_task_group() as tg:
            stage("start a foreground command")
            tg.start_soon(foreground)

            def running() -> bool:
                return bool(session_ids)

            session_ids: list[str] = []

            async def find() -> bool:
                listed = await a.call("process", action="list")
                for row in listed.json.get("processes", []):
                    if row.get("command") == COMMAND and row.get("status") == "running":
                        session_ids.append(row["session_id"])
                return bool(session_ids)

            stage("find the running job with process list")
            with anyio.move_on_after(15):
                while not await find():
                    await anyio.sleep(0.05)
            require(running(), "the foreground job shows in process list while its call is pending")
            session_id = session_ids[0]
            stage("cancel the request")
            scope.cancel()
        check(outcome.get("cancelled") is True, "the call was cancelled on the client side, not answered",
              outcome=outcome)
        cancels = [m for m in a.sent if m.get("method") == "notifications/cancelled"]
        check(len(cancels) == 1, "the SDK sent one notifications/cancelled", sent=[m.get("method") for m in a.sent])

        stage("the completion")
        await a.poll_until(f"the completion of {session_id} arrives in a tool result",
                           lambda: bool(a.completions(session_id)), timeout=15)
        await a.settle()
        done = a.completions(session_id)
        check(len(done) == 1, "exactly one completion for the cancelled call's job", completions=done)
        check(all("done" in c for c in done), "the job ran to its end (the completion carries `done`)",
              completions=done)


run("cancel --protocol " + PROTOCOL, main)
