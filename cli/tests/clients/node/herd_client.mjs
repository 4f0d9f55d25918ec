// Shared plumbing for the checks that drive `herd mcp` through the official MCP
// TypeScript SDK (@modelcontextprotocol/sdk 1.x, the 2025-11-25 handshake era).
//
// cli/tests/it/clients.rs runs each check script with HERD (the binary under test),
// HERD_HOME (a fresh home) and HERD_TEST_NODE_MODULES (the node_modules directory
// .ci/run installed from this folder's package-lock.json) set. A script exits 0 when
// every check held; otherwise it prints one JSON object naming each check that did not
// hold with what was seen, and exits 1. Checks are soft (recorded, the script goes on)
// unless the rest cannot run without them (`require`).
//
// The SDK is loaded with createRequire from HERD_TEST_NODE_MODULES because ES module
// resolution ignores NODE_PATH and the installed packages live outside the clone.
//
// Waiting is always on a condition with a deadline: the helpers poll with cheap tool
// calls (`process list`) until it holds or the deadline passes.
//
// Notices are read the way an agent reads them: herd attaches its pending
// notifications to a tool result as text blocks after the first (JSON) block. Each
// entry starts with `[`; a completion entry's first line names the session and its exit
// (`(exit code N)`, `(signal …)`, `(exit status unknown)`), a watch wake's first line
// names the session and the watch.

import { createRequire } from 'node:module';
import path from 'node:path';

const modules = process.env.HERD_TEST_NODE_MODULES;
if (!modules) {
  console.error('HERD_TEST_NODE_MODULES is not set: run `npm ci` in cli/tests/clients/node and point it at node_modules');
  process.exit(2);
}
const load = createRequire(path.join(path.resolve(modules), '..', 'herd-clients.cjs'));

export const { Client } = load('@modelcontextprotocol/sdk/client/index.js');
export const { StdioClientTransport, getDefaultEnvironment } = load('@modelcontextprotocol/sdk/client/stdio.js');
export const types = load('@modelcontextprotocol/sdk/types.js');

const HERD = process.env.HERD;
const HOME = process.env.HERD_HOME;
// The whole script's deadline; the Rust side kills the script a little after it.
const DEADLINE_MS = Number(process.env.HERD_CLIENT_DEADLINE ?? '60') * 1000;
// How long one awaited condition may take.
export const WAIT_MS = 20_000;
const POLL_INTERVAL_MS = 50;
// Long enough for every foreground call here; the SDK's default is 60 s.
export const CALL_OPTIONS = { timeout: 90_000 };

const failed = [];
let currentStage = 'starting';

class Failure extends Error {
  constructor(reason, details) {
    super(reason);
    this.reason = reason;
    this.details = details;
  }
}

/** Names what the script does next (shown with any failure after it). */
export function stage(name) {
  currentStage = name;
}

/** A soft check: recorded when it fails, and the script goes on. */
export function check(cond, reason, details = {}) {
  if (!cond) failed.push({ check: reason, stage: currentStage, ...details });
  return cond;
}

/** A hard check: the script stops when it fails. */
export function require(cond, reason, details = {}) {
  if (!cond) throw new Failure(reason, details);
}

/** A pause between two polls of a condition (a poll is a tool call). */
export function pause(ms = POLL_INTERVAL_MS) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The entries of one notice block (herd joins entries with a blank line). */
export function noticeEntries(text) {
  return text.split(/\n\n(?=\[)/).filter((e) => e.trim() !== '');
}

function firstLine(entry) {
  return entry.split('\n')[0] ?? '';
}

export function isCompletion(entry, sessionId) {
  const first = firstLine(entry);
  return first.includes(sessionId) && /\((?:exit code|signal|exit status)/.test(first);
}

export function isWatchWake(entry, sessionId) {
  const first = firstLine(entry);
  return first.includes(sessionId) && first.toLowerCase().includes('watch') && !isCompletion(entry, sessionId);
}

/** One tool result: the first block's JSON, the notice blocks after it, isError. */
export class Answer {
  constructor(tool, args, result) {
    this.tool = tool;
    this.args = args;
    this.result = result;
    const texts = (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text);
    require(texts.length >= 1, 'a tool result has a first text block', { tool, args, result });
    try {
      this.json = JSON.parse(texts[0]);
    } catch (e) {
      throw new Failure('the first text block is JSON', { tool, args, text: texts[0], error: String(e) });
    }
    this.notices = texts.slice(1);
    this.isError = result.isError === true;
  }
}

/** One `herd mcp` server and the SDK client talking to it. */
export class Agent {
  constructor(name) {
    this.name = name;
    this.notices = [];
    this.logs = [];
    this.sent = [];
    this.protocolVersion = undefined;
  }

  async connect(args = []) {
    this.client = new Client({ name: `herd-check-${this.name}`, version: '1.0.0' });
    this.client.setNotificationHandler(types.LoggingMessageNotificationSchema, (n) => {
      this.logs.push(n.params);
    });
    const transport = new StdioClientTransport({
      command: HERD,
      args: ['mcp', ...args],
      // The SDK's safe subset of the environment plus the home; no HERD_OWNER.
      env: { ...getDefaultEnvironment(), HERD_HOME: HOME, HERD_LOG: 'warn' },
      stderr: 'inherit',
    });
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
      this.sent.push(message);
      return send(message, options);
    };
    // The client reports the negotiated version to transports that take it.
    transport.setProtocolVersion = (version) => {
      this.protocolVersion = version;
    };
    await this.client.connect(transport);
    require(this.protocolVersion === '2025-11-25', `${this.name}: the handshake settles on 2025-11-25`, {
      negotiated: this.protocolVersion,
    });
    return this;
  }

  async close() {
    await this.client?.close();
  }

  async call(tool, args = {}, options = CALL_OPTIONS) {
    const result = await this.client.callTool({ name: tool, arguments: args }, undefined, options);
    const answer = new Answer(tool, args, result);
    this.notices.push(...answer.notices);
    return answer;
  }

  /** Starts a `terminal` job and returns its session id (hard check). */
  async start(args) {
    const answer = await this.call('terminal', args);
    require(!answer.isError && typeof answer.json.session_id === 'string',
      `${this.name}: terminal starts the job and names its session_id`, { answer: answer.json });
    return answer.json.session_id;
  }

  entries() {
    return this.notices.flatMap(noticeEntries);
  }

  completions(sessionId) {
    return this.entries().filter((e) => isCompletion(e, sessionId));
  }

  watchWakes(sessionId) {
    return this.entries().filter((e) => isWatchWake(e, sessionId));
  }

  /** The text of each notice-level logging message. */
  noticeLogs() {
    return this.logs.filter((l) => l.level === 'notice').map((l) => JSON.stringify(l.data));
  }

  /** Calls `process list` until `cond()` holds; a soft failure after `timeoutMs`. */
  async pollUntil(what, cond, timeoutMs = WAIT_MS) {
    const end = Date.now() + timeoutMs;
    while (!cond()) {
      if (Date.now() > end) {
        check(false, `${this.name}: ${what} within ${timeoutMs / 1000}s`, {
          notices: this.notices,
          logs: this.noticeLogs(),
        });
        return false;
      }
      await this.call('process', { action: 'list' });
      await pause();
    }
    return true;
  }

  /** A few more cheap calls, so a duplicate notice would have a result to ride. */
  async settle(nCalls = 3) {
    for (let i = 0; i < nCalls; i += 1) await this.call('process', { action: 'list' });
  }
}

export async function agent(name, args = []) {
  return new Agent(name).connect(args);
}

/** Runs `main` under the script's deadline and reports: exit 0 when every check held. */
export async function run(name, main) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Failure(`the script finished within its ${DEADLINE_MS / 1000}s deadline`, {})),
      DEADLINE_MS);
  });
  try {
    await Promise.race([main(), deadline]);
  } catch (e) {
    if (e instanceof Failure) {
      failed.push({ check: e.reason, stage: currentStage, ...e.details });
    } else {
      console.error(e);
      failed.push({ check: 'the script ran without an exception', stage: currentStage, exception: String(e?.stack ?? e) });
    }
  } finally {
    clearTimeout(timer);
  }
  if (failed.length > 0) {
    console.log(JSON.stringify({ check: name, failed }, null, 1));
    process.exit(1);
  }
  console.log(JSON.stringify({ check: name, passed: true }));
  process.exit(0);
}
