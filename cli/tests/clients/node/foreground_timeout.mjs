// Foreground yield (B24) through the TypeScript SDK: a foreground `terminal` still
// running when its `timeout` passes is answered at once, not as an error, with status
// "running", its session_id and a note saying it moved to the background and that the
// agent will be notified; later tool results then carry exactly one completion for it.
//
// Usage: node foreground_timeout.mjs

import { agent, check, require, run, stage } from './herd_client.mjs';

await run('node foreground_timeout', async () => {
  const a = await agent('A');
  stage('a foreground command past its timeout');
  const answer = await a.call('terminal', { command: 'sleep 4; echo done', timeout: 1 });
  check(!answer.isError, 'the answer is not an error', { answer: answer.json });
  check(answer.json.status === 'running', 'the answer says status "running"', { answer: answer.json });
  const id = answer.json.session_id;
  require(typeof id === 'string' && id !== '', 'the answer names the session_id', { answer: answer.json });
  const note = String(answer.json.note ?? '');
  check(/background/i.test(note), 'the note says the command moved to the background', { note });
  check(/notif|be told|tell you/i.test(note), 'the note says the agent will be notified', { note });
  stage('the completion');
  await a.pollUntil(`the completion of ${id} arrives in a tool result`, () => a.completions(id).length > 0, 15_000);
  await a.settle();
  const done = a.completions(id);
  check(done.length === 1, 'exactly one completion for the session', { completions: done });
  check(done.every((c) => c.includes('done')), 'the completion carries the output', { completions: done });
  await a.close();
});
