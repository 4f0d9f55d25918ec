"""Log level: after the client asks for `error` and above, no notice-level log
message arrives, while the notices still ride in tool results.

On the handshake era (`--protocol legacy`) the level is set with `logging/setLevel`
(`Client.set_logging_level("error")`). On 2026-07-28, which removed that request,
the SDK's equivalent is the per-request opt-in: `Client(log_level="error")` stamps
`io.modelcontextprotocol/logLevel` on every request's `_meta`.

Usage: python set_level.py [--protocol legacy|2026-07-28]
"""

from __future__ import annotations

from herd_client import agent, check, protocol_arg, run, stage

PROTOCOL = protocol_arg()


async def main() -> None:
    kwargs = {} if PROTOCOL == "legacy" else {"log_level": "error"}
    async with agent("A", protocol=PROTOCOL, **kwargs) as a:
        if PROTOCOL == "legacy":
            stage("logging/setLevel error")
            answered = await a.c.set_logging_level("error")
            check(answered is not None, "logging/setLevel is answered")
        stage("a background job with notify=true")
        session_id = await a.start(command="sleep 0.5; echo quiet", background=True, notify=True)
        stage("the completion")
        await a.poll_until("the completion arrives in a tool result", lambda: bool(a.completions(session_id)))
        await a.settle()
        done = a.completions(session_id)
        check(len(done) == 1 and "quiet" in done[0], "exactly one completion, with the job's output, rides in results",
              completions=done)
        check(a.notice_logs() == [], "no notice-level log message after asking for error and above",
              logs=a.notice_logs())


run("set_level --protocol " + PROTOCOL, main)
