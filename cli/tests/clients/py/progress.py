"""Progress: a foreground `terminal` called with a progress callback (the SDK sends a
`progressToken`) receives at least one `notifications/progress` before its result.

Usage: python progress.py [--protocol 2026-07-28|legacy]
"""

from __future__ import annotations

from herd_client import Answer, agent, check, protocol_arg, run, stage

PROTOCOL = protocol_arg()


async def main() -> None:
    async with agent("A", protocol=PROTOCOL) as a:
        seen: list[dict[str, object]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append({"progress": progress, "total": total, "message": message})

        stage("a foreground command with a progress callback")
        result = await a.c.call_tool("terminal",
                                     {"command": "for i in 1 2 3 4; do echo line $i; sleep 1; done", "timeout": 60},
                                     progress_callback=on_progress)
        at_result = list(seen)
        answer = Answer("terminal", {}, result)
        check(not answer.is_error and answer.json.get("exit_code") == 0, "the command ran to exit code 0",
              answer=answer.json)
        check("line 4" in str(answer.json.get("output", "")), "the result carries the output", answer=answer.json)
        check(len(at_result) >= 1, "at least one notifications/progress arrived before the result",
              progress=at_result)
        token = [m for m in a.sent if m.get("method") == "tools/call"]
        check(any("progressToken" in (m.get("params", {}).get("_meta") or {}) for m in token),
              "the SDK sent a progressToken", sent=token)


run("progress --protocol " + PROTOCOL, main)
