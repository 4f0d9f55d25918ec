"""Structured results: each tool declares an `outputSchema` and annotations, and every
tool result carries `structuredContent` equal to its first text block's JSON, plus
`notices` (the notice block) when notices ride the result; a client that reads only
`structuredContent` gets each completion once.

The Python SDK 2.x validates a non-error result's `structuredContent` against the
tool's `outputSchema` inside `call_tool` (`ClientSession.validate_tool_result`, with
`jsonschema`), raising `RuntimeError` on a mismatch, and refuses a result that has no
`structuredContent` when the tool declares a schema. The script shows that the
validation is live by handing the SDK a copy of a result without it.

Usage: python structured.py [--protocol 2026-07-28|legacy]
"""

from __future__ import annotations

from typing import Any

import anyio

from herd_client import Answer, agent, check, is_completion, notice_entries, protocol_arg, require, run, stage

PROTOCOL = protocol_arg()


async def main() -> None:
    async with agent("A", protocol=PROTOCOL) as a:
        stage("tools/list")
        tools = {t.name: t for t in (await a.c.list_tools()).tools}
        for name in ("terminal", "process"):
            tool = tools.get(name)
            require(tool is not None, f"tools/list has {name}")
            schema = tool.output_schema
            check(isinstance(schema, dict) and schema.get("type") == "object",
                  f"{name} declares an outputSchema of type object", output_schema=schema)
            ann = tool.annotations
            check(ann is not None, f"{name} has annotations")
            if ann is not None:
                check(ann.read_only_hint is False, f"{name} is marked not read-only (readOnlyHint false)",
                      annotations=ann)
                for hint in ("destructive_hint", "idempotent_hint", "open_world_hint"):
                    check(isinstance(getattr(ann, hint), bool), f"{name} states {hint}", annotations=ann)

        stage("calls of every shape")
        answers: list[Answer] = []

        async def call(tool: str, **args: Any) -> Answer:
            try:
                answer = await a.call(tool, **args)
            except RuntimeError as e:
                # The SDK's own outputSchema validation refused the result.
                require(False, f"the SDK accepts the result of {tool} {args}", error=str(e))
                raise
            answers.append(answer)
            return answer

        await call("terminal", command="echo fg; exit 4")
        started = await call("terminal", command="read line; echo got $line", background=True, notify=True)
        session_id = started.json.get("session_id", "")
        await call("process", action="list")
        await call("process", action="poll", session_id=session_id)
        await call("process", action="submit", session_id=session_id, data="x")
        await call("process", action="wait", session_id=session_id, timeout=10)
        await call("process", action="log", session_id=session_id)
        await call("process", action="read", session_id=session_id)
        await call("process", action="search", session_id=session_id, pattern="got")
        await call("process", action="kill", session_id=session_id)
        await call("process", action="explode")
        await call("terminal", command="make", notify=True)
        await call("process", action="poll", session_id="proc_ffffffffffff")
        check(any(x.is_error for x in answers) and any(not x.is_error for x in answers),
              "the calls include both results and errors", answers=[repr(x) for x in answers])

        missing = [f"{x.tool} {x.args}" for x in answers if x.result.structured_content is None]
        check(not missing, "every tool result has structuredContent", calls_without_it=missing)
        for x in answers:
            if x.result.structured_content is not None:
                structured = dict(x.result.structured_content)
                notices = structured.pop("notices", None)
                check(structured == x.json,
                      f"{x.tool} {x.args}: structuredContent equals the first text block's JSON (and notices)",
                      structured=x.result.structured_content, text=x.json)
                check(notices == (x.notices[0] if x.notices else None),
                      f"{x.tool} {x.args}: structuredContent's notices are the notice block",
                      structured=x.result.structured_content, notices=x.notices)

        stage("every field a result carries is declared in its tool's outputSchema")
        for x in answers:
            declared = set((tools[x.tool].output_schema or {}).get("properties", {}))
            undeclared = set(x.result.structured_content or {}) - declared
            check(not undeclared, f"{x.tool} {x.args}: every field is declared", undeclared=sorted(undeclared))

        stage("a client that reads only structuredContent gets each notice once")
        job = await call("terminal", command="sleep 0.5; echo structured-done", background=True)
        job_id = job.json.get("session_id", "")
        seen: list[str] = []
        end = anyio.current_time() + 20
        while not any(job_id in n for n in seen) and anyio.current_time() < end:
            result = await a.c.call_tool("process", {"action": "list"})
            seen.extend(notice_entries((result.structured_content or {}).get("notices", "")))
            await anyio.sleep(0.05)
        for _ in range(3):
            result = await a.c.call_tool("process", {"action": "list"})
            seen.extend(notice_entries((result.structured_content or {}).get("notices", "")))
        done = [e for e in seen if is_completion(e, job_id)]
        check(len(done) == 1 and "structured-done" in done[0],
              "a background job (notify by default) completes once in structuredContent.notices", seen=seen)

        stage("the SDK's validation is live")
        ok = next((x for x in answers if not x.is_error and x.tool == "terminal"), None)
        if ok is not None and tools["terminal"].output_schema is not None:
            stripped = ok.result.model_copy(update={"structured_content": None})
            try:
                await a.c.session.validate_tool_result("terminal", stripped)
                check(False, "the SDK refuses a terminal result without structuredContent")
            except RuntimeError as e:
                check("structured content" in str(e), "the SDK names the missing structured content", error=str(e))


run("structured --protocol " + PROTOCOL, main)
