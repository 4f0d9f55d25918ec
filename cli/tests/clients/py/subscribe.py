"""Pushed wake-ups through the Python SDK on 2026-07-28: the client listens
(`subscriptions/listen`) for herd://notifications, is sent
`notifications/resources/updated` when a completion is queued (without making a
tool call), reads the resource to collect it, and the completion never comes again.

Usage: python subscribe.py
"""

from __future__ import annotations

import anyio

from herd_client import WAIT_S, agent, check, is_completion, notice_entries, require, run, stage

URI = "herd://notifications"


def text_of(read) -> str:
    return "\n".join(getattr(c, "text", "") for c in read.contents)


async def main() -> None:
    async with agent("A") as a:
        stage("the resource is listed")
        listed = await a.c.list_resources()
        require(any(str(r.uri) == URI for r in listed.resources), "herd lists herd://notifications",
                listed=str(listed))
        stage("listen")
        async with a.c.listen(resource_subscriptions=[URI]) as sub:
            stage("a job that finishes on its own")
            session_id = await a.start(command="sleep 1; echo pushed", background=True, notify=True)
            already = len(a.completions(session_id))
            if already == 0:
                stage("the pushed wake-up, without a tool call")
                event = None
                with anyio.move_on_after(WAIT_S):
                    async for event in sub:
                        break
                require(event is not None, "a resources/updated event arrives")
                check(URI in str(event), "the event names herd://notifications", event=str(event))
                stage("read the resource")
                text = text_of(await a.c.read_resource(URI))
                done = [e for e in notice_entries(text) if is_completion(e, session_id)]
                check(len(done) == 1, "the read carries the completion once", text=text)
        stage("never again")
        await a.settle()
        later = text_of(await a.c.read_resource(URI))
        check(session_id not in later, "a second read does not carry it", later=later)
        check(len(a.completions(session_id)) == already, "later tool results do not carry it", notices=a.notices)


run("subscribe", main)
