// logging/setLevel through the TypeScript SDK (`client.setLoggingLevel("error")`): it is
// answered, and afterwards no notice-level log message arrives while the notices still
// ride in tool results.
//
// Usage: node set_level.mjs

import { agent, check, run, stage } from './herd_client.mjs';

await run('node set_level', async () => {
  const a = await agent('A');
  stage('logging/setLevel error');
  try {
    await a.client.setLoggingLevel('error');
  } catch (e) {
    check(false, 'logging/setLevel is answered', { error: String(e) });
  }
  stage('a background job with notify=true');
  const id = await a.start({ command: 'sleep 0.5; echo quiet', background: true, notify: true });
  stage('the completion');
  await a.pollUntil('the completion arrives in a tool result', () => a.completions(id).length > 0);
  await a.settle();
  const done = a.completions(id);
  check(done.length === 1 && done[0].includes('quiet'),
    "exactly one completion, with the job's output, rides in results", { completions: done });
  check(a.noticeLogs().length === 0, 'no notice-level log message after setLevel(error)', { logs: a.noticeLogs() });
  await a.close();
});
