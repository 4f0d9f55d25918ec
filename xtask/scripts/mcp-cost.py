#!/usr/bin/env python3
"""What an agent spends, over MCP, to learn how a job ended or what it said.

Drives `herd mcp` with raw JSON-RPC over stdio (no SDK: every byte counted is a
byte the client receives) through its scenarios, and prints, per scenario, the
tool calls made and the characters of tool results received until the agent
knows what it wanted (a job's exit, a failing build's error, a REPL's reply), with
an approximate token count (characters / 4).

    python3 xtask/scripts/mcp-cost.py [HERD_BINARY]

Run it against two builds to compare them; each run uses a fresh HERD_HOME.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERD = sys.argv[1] if len(sys.argv) > 1 else "target/debug/herd"
DEADLINE = 60.0


class Server:
    def __init__(self, home, owner):
        env = dict(os.environ, HERD_HOME=home, HERD_LOG="warn")
        env.pop("HERD_OWNER", None)
        self.proc = subprocess.Popen(
            [HERD, "mcp", *(["--owner", owner] if owner else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        self.next_id = 0
        self.request("initialize", {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "mcp-cost", "version": "0"},
        })
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        wanted = self.next_id
        self.send({"jsonrpc": "2.0", "id": wanted, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"the server closed before answering {method}")
            message = json.loads(line)
            if message.get("id") == wanted:
                return line, message

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


class Agent:
    """Counts the calls and the characters of their results."""

    def __init__(self, server):
        self.server = server
        self.calls = 0
        self.chars = 0

    def tool(self, name, arguments):
        line, message = self.server.request("tools/call", {"name": name, "arguments": arguments})
        self.calls += 1
        result = message.get("result", {})
        # What reaches the model: the text blocks (structuredContent repeats the first).
        texts = [c.get("text", "") for c in result.get("content", [])]
        self.chars += sum(len(t) for t in texts)
        answer = json.loads(texts[0]) if texts else {}
        return answer, texts[1:]


def knows_exit(notices, session_id):
    return any(session_id in n and ("exit" in n or "finished" in n) for n in notices)


def scenario_wait(home):
    agent = Agent(Server(home, "cost-wait"))
    started, _ = agent.tool("terminal", {"command": "sleep 1; echo done", "background": True, "notify": True})
    waited, notices = agent.tool("process", {"action": "wait", "session_id": started["session_id"], "timeout": 30})
    assert waited.get("status") == "exited", waited
    # One more call of other work: does the same completion come again?
    _, later = agent.tool("process", {"action": "list"})
    again = sum(started["session_id"] in n for n in notices + later)
    agent.server.close()
    return agent, f"completion repeated as a notice {again}x after the wait answered it"


def scenario_notice(home):
    """The agent works on (list calls) until the completion notice arrives; ten
    finished jobs of its own are already there."""
    server = Server(home, "cost-notice")
    warm = Agent(server)
    for n in range(10):
        warm.tool("terminal", {"command": f"echo warm-{n}"})
    agent = Agent(server)
    started, notices = agent.tool("terminal", {"command": "sleep 1; echo done", "background": True, "notify": True})
    sid = started["session_id"]
    end = time.monotonic() + DEADLINE
    while not knows_exit(notices, sid) and time.monotonic() < end:
        time.sleep(0.5)
        _, more = agent.tool("process", {"action": "list"})
        notices += more
    server.close()
    return agent, "notice arrived" if knows_exit(notices, sid) else "no notice"


def scenario_foreground_timeout(home):
    """A foreground call outlives its window; the agent works on until it knows the exit."""
    agent = Agent(Server(home, "cost-fg"))
    answer, notices = agent.tool("terminal", {"command": "sleep 3; echo done", "timeout": 1})
    sid = answer.get("session_id")
    end = time.monotonic() + DEADLINE
    learned = "exit in the answer"
    while sid and not knows_exit(notices, sid) and time.monotonic() < end:
        time.sleep(0.5)
        _, more = agent.tool("process", {"action": "list"})
        notices += more
        learned = "notice arrived"
    if sid and not knows_exit(notices, sid):
        # Never told: the agent has to poll until it sees the exit.
        learned = "never notified; polled"
        while time.monotonic() < end:
            polled, _ = agent.tool("process", {"action": "poll", "session_id": sid})
            if polled.get("status") != "running":
                break
            time.sleep(0.5)
    agent.server.close()
    return agent, learned


BUILD = ("for i in $(seq 1 10000); do echo \"compiling unit $i of the build\"; "
         "if [ $i = 5000 ]; then echo 'error[E0308]: mismatched types in unit 5000'; fi; done; exit 101")
ERROR = "error[E0308]"


def scenario_failing_build(home):
    """A foreground 10,000-line build fails with its error in the middle; the agent
    reads until it has the error line (search where the server has it, else pages
    of the log from the start)."""
    agent = Agent(Server(home, "cost-build"))
    answer, _ = agent.tool("terminal", {"command": BUILD, "timeout": 60})
    sid = answer.get("session_id")
    first = len(json.dumps(answer))
    found = ERROR in answer.get("output", "")
    how = "in the result"
    if not found:
        searched, _ = agent.tool("process", {"action": "search", "session_id": sid, "pattern": "error\\["})
        found = ERROR in searched.get("output", "")
        how = "by search"
    offset = 0
    while not found and offset < 10_001:
        how = "by paging the log"
        page, _ = agent.tool("process", {"action": "log", "session_id": sid, "offset": offset, "limit": 2_000})
        found = ERROR in page.get("output", "")
        offset += 2_000
    agent.server.close()
    return agent, f"first result {first} chars; error found {how}" if found else "error never found"


def scenario_pty_exchange(home):
    """Three exchanges with a Python REPL under a PTY: submit a line, read the reply."""
    agent = Agent(Server(home, "cost-pty"))
    started, _ = agent.tool("terminal", {"command": "python3 -i -q", "background": True, "pty": True,
                                         "notify": False})
    sid = started["session_id"]
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        polled, _ = agent.tool("process", {"action": "poll", "session_id": sid})
        if ">>>" in polled.get("output_preview", ""):
            break
        time.sleep(0.2)
    warm = (agent.calls, agent.chars)
    agent.calls, agent.chars = 0, 0
    for n in range(3):
        reply = str(1000 + n * 7)
        answer, _ = agent.tool("process", {"action": "submit", "session_id": sid, "data": f"print(1000 + {n} * 7)"})
        seen = answer.get("output", "")
        while reply not in seen.splitlines() and time.monotonic() < end:
            time.sleep(0.2)
            polled, _ = agent.tool("process", {"action": "poll", "session_id": sid})
            seen = polled.get("output_preview", "")
            seen = "\n".join(line.strip() for line in seen.splitlines())
    agent.tool("process", {"action": "kill", "session_id": sid})
    agent.server.close()
    return agent, f"start and prompt {warm[0]} calls, {warm[1]} chars, not counted"


def scenario_server_per_call(home):
    """A host that starts a server per call, without --owner (LangChain's default):
    a background job, then list calls until the agent knows its exit."""
    agent = Agent(Server(home, None))
    started, notices = agent.tool("terminal", {"command": "sleep 1; echo done", "background": True, "notify": True})
    agent.server.close()
    sid = started["session_id"]
    end = time.monotonic() + 10
    while not knows_exit(notices, sid) and time.monotonic() < end:
        time.sleep(0.5)
        agent.server = Server(home, None)
        _, more = agent.tool("process", {"action": "list"})
        notices += more
        agent.server.close()
    return agent, "notice arrived" if knows_exit(notices, sid) else "never told (10 s)"


def main():
    with tempfile.TemporaryDirectory() as home:
        server = Server(home, "cost-list")
        line, _ = server.request("tools/list", {})
        server.close()
        print(f"tools/list: {len(line)} chars (~{len(line) // 4} tokens)")
        for name, run in [
            ("background job, then wait", scenario_wait),
            ("background job, notice while working (10 finished jobs)", scenario_notice),
            ("foreground past its timeout", scenario_foreground_timeout),
            ("failing 10,000-line build, find the error", scenario_failing_build),
            ("PTY exchange, 3 lines to a Python REPL", scenario_pty_exchange),
            ("a server per call (no --owner), learn the exit", scenario_server_per_call),
        ]:
            agent, detail = run(home)
            print(f"{name}: {agent.calls} calls, {agent.chars} chars (~{agent.chars // 4} tokens); {detail}")
        subprocess.run([HERD, "shutdown", "--yes"], env=dict(os.environ, HERD_HOME=home),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


main()
