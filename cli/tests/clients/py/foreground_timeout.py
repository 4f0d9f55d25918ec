"""Foreground yield (B24): a foreground `terminal` still running when its `timeout`
passes is answered at once, not as an error, with `status: "running"`, its
`session_id` and a note saying it moved to the background and that the agent will be
notified; later tool results then carry exactly one completion for it.

Usage: python foreground_timeout.py [--protocol 2026-07-28|legacy]
"""

from __future__ import annotations

import re

from herd_client import agent, check, protocol_arg, require, run, stage

PROTOCOL = protocol_arg()


async def main() -> None:
    async with agent("A", protocol=PROTOCOL) as a:
        stage("a foreground command past its timeout")
        answer = await a.call("terminal", command="sleep 4; echo done", timeout=1)
        check(not answer.is_error, "the answer is not an error", answer=answer.json)
        check(answer.json.get("status") == "running", 'the answer says status "running"', answer=answer.json)
        session_id = answer.json.get("session_id")
        require(isinstance(session_id, str) and session_id != "", "the answer names the session_id",
                answer=answer.json)
        note = str(answer.json.get("note", ""))
        check(re.search(r"background", note, re.I) is not None, "the note says the command moved to the background",
              note=note)
        check(re.search(r"notif|be told|tell you", note, re.I) is not None, "the note says the agent will be notified",
              note=note)
        stage("the completion")
        await a.poll_until(f"the completion of {session_id} arrives in a tool result",
                           lambda: bool(a.completions(session_id)), timeout=15)
        await a.settle()
        done = a.completions(session_id)
        check(len(done) == 1, "exactly one completion for the session", completions=done)
        check(all("done" in c for c in done), "the completion carries the output", completions=done)


run("foreground_timeout --protocol " + PROTOCOL, main)
