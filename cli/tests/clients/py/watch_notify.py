"""Watch and notify combine (B20): `notify=["ready"]` wakes the agent when a line
contains `ready`, and the exit still sends exactly one completion, with its code.

Usage: python watch_notify.py [--protocol 2026-07-28|legacy]
"""

from __future__ import annotations

from herd_client import agent, check, protocol_arg, run, stage

PROTOCOL = protocol_arg()


async def main() -> None:
    async with agent("A", protocol=PROTOCOL) as a:
        stage("start with notify=[ready]")
        session_id = await a.start(command="echo booting; echo ready; sleep 2; exit 3", background=True,
                                   notify=["ready"])
        stage("the watch wake")
        await a.poll_until("a watch wake naming the session", lambda: bool(a.watch_wakes(session_id)))
        wakes = a.watch_wakes(session_id)
        check(any("ready" in w for w in wakes), "the watch wake mentions the matched line `ready`", wakes=wakes)
        stage("the completion")
        await a.poll_until("the completion arrives", lambda: bool(a.completions(session_id)))
        await a.settle()
        done = a.completions(session_id)
        check(len(done) == 1, "exactly one completion", completions=done)
        check(all("exit code 3" in c for c in done), "the completion says exit code 3", completions=done)
        entries = a.entries()
        if wakes and done:
            check(entries.index(wakes[0]) < entries.index(done[0]), "the watch wake comes before the completion",
                  entries=entries)


run("watch_notify --protocol " + PROTOCOL, main)
