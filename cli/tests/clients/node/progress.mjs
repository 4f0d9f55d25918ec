// Progress through the TypeScript SDK: a foreground `terminal` called with an
// `onprogress` callback (the SDK sends a progressToken) receives at least one
// notifications/progress before its result.
//
// Usage: node progress.mjs

import { Answer, CALL_OPTIONS, agent, check, run, stage } from './herd_client.mjs';

await run('node progress', async () => {
  const a = await agent('A');
  const seen = [];
  stage('a foreground command with a progress callback');
  const result = await a.client.callTool(
    { name: 'terminal', arguments: { command: 'for i in 1 2 3 4; do echo line $i; sleep 1; done', timeout: 60 } },
    undefined,
    { ...CALL_OPTIONS, onprogress: (p) => seen.push(p) },
  );
  const atResult = [...seen];
  const answer = new Answer('terminal', {}, result);
  check(!answer.isError && answer.json.exit_code === 0, 'the command ran to exit code 0', { answer: answer.json });
  check(String(answer.json.output ?? '').includes('line 4'), 'the result carries the output', { answer: answer.json });
  check(atResult.length >= 1, 'at least one notifications/progress arrived before the result', { progress: atResult });
  const calls = a.sent.filter((m) => m.method === 'tools/call');
  check(calls.some((m) => m.params?._meta?.progressToken !== undefined), 'the SDK sent a progressToken', { sent: calls });
  await a.close();
});
