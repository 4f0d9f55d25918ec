"""Strict mode: the OpenAI Agents SDK's `ensure_strict_json_schema` converts each tool's
`inputSchema` (as an OpenAI strict-mode function tool would), and calls shaped the
way a strict model shapes them work.

A strict schema makes every property required, so a model passes every property on
every call, `null` for the ones it means to leave out. The converted `process` schema
must therefore let `offset` (and every property but `action`) be null, and herd must
read a null as "not given": `process(action="log", offset=null, limit=3, ...)` on a
finished job of 10 lines pages the last 3. An unknown property (`sessionid`) is
refused with an error that names `session_id`.

Usage: python strict.py [--protocol 2026-07-28|legacy]
"""

from __future__ import annotations

import copy

import jsonschema
from agents.strict_schema import ensure_strict_json_schema

from herd_client import agent, check, protocol_arg, require, run, stage

PROTOCOL = protocol_arg()


def accepts(schema: dict, value: object) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


async def main() -> None:
    async with agent("A", protocol=PROTOCOL) as a:
        stage("convert every inputSchema")
        strict: dict[str, dict] = {}
        for tool in (await a.c.list_tools()).tools:
            try:
                strict[tool.name] = ensure_strict_json_schema(copy.deepcopy(tool.input_schema))
            except Exception as e:  # noqa: BLE001 - reported
                check(False, f"ensure_strict_json_schema converts {tool.name}'s inputSchema",
                      error=f"{type(e).__name__}: {e}", input_schema=tool.input_schema)
        process = strict.get("process")
        require(process is not None, "the process schema converts")
        props = process.get("properties", {})
        check(sorted(process.get("required", [])) == sorted(props), "every process property is required", schema=process)
        check("offset" in props and accepts(props["offset"], None), "the converted process schema lets offset be null",
              offset=props.get("offset"))

        stage("a finished job of 10 lines")
        session_id = await a.start(command="for i in $(seq 1 10); do echo line $i; done", background=True)
        waited = await a.call("process", action="wait", session_id=session_id, timeout=10)
        require(waited.json.get("status") == "exited", "the job finishes", answer=waited.json)

        stage("process log the strict way")
        args = {key: None for key in props}
        args.update(action="log", session_id=session_id, offset=None, limit=3)
        check(accepts(process, args), "the strict call's arguments are valid under the converted schema",
              args=args, errors=[f"{e.json_path}: {e.message}" for e in jsonschema.Draft202012Validator(process).iter_errors(args)])
        log = await a.call("process", **args)
        check(not log.is_error, "process log with nulls for the unused properties is answered", answer=log.json)
        lines = str(log.json.get("output", "")).strip().splitlines()
        check(lines == ["line 8", "line 9", "line 10"], "offset=null, limit=3 pages the last 3 lines",
              answer=log.json)

        stage("an unknown property")
        bad = await a.call("process", action="log", sessionid=session_id)
        check(bad.is_error, "a misspelt property (sessionid) is refused", answer=bad.json)
        check("session_id" in str(bad.json.get("error", "")), "the refusal names session_id", answer=bad.json)


run("strict --protocol " + PROTOCOL, main)
