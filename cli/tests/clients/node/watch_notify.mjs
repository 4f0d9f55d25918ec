// Watch and notify combine (B20) through the TypeScript SDK: notify=["ready"] wakes the
// agent when a line contains `ready`, and the exit still sends exactly one completion,
// with its code.
//
// Usage: node watch_notify.mjs

import { agent, check, run, stage } from './herd_client.mjs';

await run('node watch_notify', async () => {
  const a = await agent('A');
  stage('start with notify=[ready]');
  const id = await a.start({ command: 'echo booting; echo ready; sleep 2; exit 3', background: true, notify: ['ready'] });
  stage('the watch wake');
  await a.pollUntil('a watch wake naming the session', () => a.watchWakes(id).length > 0);
  const wakes = a.watchWakes(id);
  check(wakes.some((w) => w.includes('ready')), 'the watch wake mentions the matched line `ready`', { wakes });
  stage('the completion');
  await a.pollUntil('the completion arrives', () => a.completions(id).length > 0);
  await a.settle();
  const done = a.completions(id);
  check(done.length === 1, 'exactly one completion', { completions: done });
  check(done.every((c) => c.includes('exit code 3')), 'the completion says exit code 3', { completions: done });
  const entries = a.entries();
  if (wakes.length > 0 && done.length > 0) {
    check(entries.indexOf(wakes[0]) < entries.indexOf(done[0]), 'the watch wake comes before the completion', { entries });
  }
  await a.close();
});
