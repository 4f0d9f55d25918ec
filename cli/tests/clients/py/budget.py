"""Budgets and reads through the Python SDK (issue 28): a foreground 10,000-line
failing build answers its head and tail within 8,000 characters in whole lines, with
the omitted range and the calls that read it, and `search` finds the error in the
middle; a `log` page asking for every line is capped at 40,000 characters and says
so; `submit` to a Python REPL under a PTY answers the reply in the same call; `read`
answers only what is new; the foreground and `wait` defaults are under the clients'
60 s request timeout.

Usage: python budget.py [--protocol 2026-07-28|legacy]
"""

from __future__ import annotations

import anyio

from herd_client import agent, check, protocol_arg, require, run, stage

PROTOCOL = protocol_arg()
BUILD = ("for i in $(seq 1 10000); do echo \"compiling unit $i of the build\"; "
         "if [ $i = 5000 ]; then echo 'error[E0308]: mismatched types in unit 5000'; fi; done; exit 101")


async def main() -> None:
    async with agent("A", protocol=PROTOCOL) as a:
        stage("a 10,000-line failing build in the foreground")
        done = await a.call("terminal", command=BUILD, timeout=50)
        output = done.json.get("output", "")
        check(done.json.get("exit_code") == 101, "the build's exit code", answer=done.json)
        check(len(output) <= 8_000, "the output fits 8,000 characters", chars=len(output))
        check(output.startswith("compiling unit 1 of") and output.endswith("compiling unit 10000 of the build"),
              "head and tail, whole lines", head=output[:80], tail=output[-80:])
        marker = [line for line in output.splitlines() if "lines omitted (lines " in line]
        check(len(marker) == 1 and 'action="search"' in marker[0] and 'action="log"' in marker[0],
              "one line says what was omitted and how to read it", marker=marker)
        session_id = done.json.get("session_id", "")
        found = await a.call("process", action="search", session_id=session_id, pattern=r"error\[E\d+\]")
        check("5001: error[E0308]" in found.json.get("output", ""), "search finds the error on line 5001",
              answer=found.json)
        page = await a.call("process", action="log", session_id=session_id, limit=10_001)
        check(len(page.json.get("output", "")) <= 40_000 and page.json.get("page_cut") is True
              and "40000 characters" in page.json.get("note", ""),
              "a page asking for every line is capped and says so",
              chars=len(page.json.get("output", "")), note=page.json.get("note"))

        stage("write and read in one call")
        started = await a.call("terminal", command="python3 -i -q", background=True, pty=True)
        repl = started.json.get("session_id", "")
        require(repl != "", "the REPL starts", answer=started.json)
        seen = ""
        with anyio.fail_after(20):
            while ">>>" not in seen:
                seen += (await a.call("process", action="read", session_id=repl)).json.get("output", "")
        replied = await a.call("process", action="submit", session_id=repl, data="print(6 * 7)", yield_ms=3000)
        reply_lines = [line.strip() for line in replied.json.get("output", "").splitlines()]
        check("42" in reply_lines, "submit answers the reply in the same call", answer=replied.json)
        again = await a.call("process", action="read", session_id=repl)
        check("42" not in [line.strip() for line in again.json.get("output", "").splitlines()],
              "read answers only what is new", answer=again.json)

        stage("the defaults stay under the clients' 60 s request timeout")
        tools = {t.name: t for t in (await a.c.list_tools()).tools}
        wait_doc = tools["process"].input_schema["properties"]["timeout"]["description"]
        fg_doc = tools["terminal"].input_schema["properties"]["timeout"]["description"]
        check("default 30" in wait_doc and "at most 50" in wait_doc, "wait: default 30 s, at most 50 s", doc=wait_doc)
        check("default 45" in fg_doc, "foreground: default 45 s", doc=fg_doc)
        await a.call("process", action="kill", session_id=repl)


run("budget --protocol " + PROTOCOL, main)
