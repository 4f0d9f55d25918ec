#!/usr/bin/env python3
"""What an agent spends, over MCP, to learn how a background job ended.

Drives `herd mcp` with raw JSON-RPC over stdio (no SDK: every byte counted is a
byte the client receives) through four scenarios, and prints, per scenario, the
tool calls made and the characters of tool results received until the agent
knows the job's exit, with an approximate token count (characters / 4).

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
            [HERD, "mcp", "--owner", owner],
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
        ]:
            agent, detail = run(home)
            print(f"{name}: {agent.calls} calls, {agent.chars} chars (~{agent.chars // 4} tokens); {detail}")
        subprocess.run([HERD, "shutdown"], env=dict(os.environ, HERD_HOME=home),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


main()
