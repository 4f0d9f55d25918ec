// Client cancellation (B24, interrupted) through the TypeScript SDK: a foreground
// `terminal` whose request is aborted (an AbortController signal in the request
// options; the SDK then sends notifications/cancelled) leaves the job running in the
// background, and later tool results carry exactly one completion for it.
//
// Usage: node cancel.mjs

import { CALL_OPTIONS, agent, check, pause, require, run, stage } from './herd_client.mjs';

const COMMAND = 'sleep 3; echo done';

await run('node cancel', async () => {
  const a = await agent('A');
  stage('start a foreground command');
  const abort = new AbortController();
  const pending = a.client
    .callTool({ name: 'terminal', arguments: { command: COMMAND, timeout: 60 } }, undefined,
      { ...CALL_OPTIONS, signal: abort.signal })
    .then((result) => ({ answered: result }), (error) => ({ rejected: String(error) }));

  stage('find the running job with process list');
  let id;
  const end = Date.now() + 15_000;
  while (id === undefined && Date.now() < end) {
    const listed = await a.call('process', { action: 'list' });
    id = (listed.json.processes ?? []).find((r) => r.command === COMMAND && r.status === 'running')?.session_id;
    if (id === undefined) await pause();
  }
  require(id !== undefined, 'the foreground job shows in process list while its call is pending');

  stage('abort the request');
  abort.abort('the user pressed escape');
  const outcome = await pending;
  check(outcome.rejected !== undefined, 'the aborted call rejects on the client side', { outcome });
  const cancels = a.sent.filter((m) => m.method === 'notifications/cancelled');
  check(cancels.length === 1, 'the SDK sent one notifications/cancelled', { sent: a.sent.map((m) => m.method) });

  stage('the completion');
  await a.pollUntil(`the completion of ${id} arrives in a tool result`, () => a.completions(id).length > 0, 15_000);
  await a.settle();
  const done = a.completions(id);
  check(done.length === 1, "exactly one completion for the aborted call's job", { completions: done });
  check(done.every((c) => c.includes('done')), 'the job ran to its end (the completion carries `done`)', { completions: done });
  await a.close();
});
