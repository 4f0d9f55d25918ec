// Structured results through the TypeScript SDK: each tool declares an outputSchema and
// annotations, and every tool result carries structuredContent equal to its first text
// block's JSON. After listTools the SDK compiles each outputSchema (ajv) and callTool
// validates every non-error result against it, throwing McpError on a mismatch or
// when structuredContent is missing.
//
// Usage: node structured.mjs

import { agent, check, require, run, stage } from './herd_client.mjs';

function sameJson(a, b) {
  const canon = (v) => JSON.stringify(v, (_, x) => (x && typeof x === 'object' && !Array.isArray(x)
    ? Object.fromEntries(Object.entries(x).sort(([p], [q]) => (p < q ? -1 : p > q ? 1 : 0))) : x));
  return canon(a) === canon(b);
}

await run('node structured', async () => {
  const a = await agent('A');
  stage('tools/list');
  const { tools } = await a.client.listTools();
  for (const name of ['terminal', 'process']) {
    const tool = tools.find((t) => t.name === name);
    require(tool !== undefined, `tools/list has ${name}`);
    check(tool.outputSchema?.type === 'object', `${name} declares an outputSchema of type object`,
      { outputSchema: tool.outputSchema ?? null });
    const ann = tool.annotations;
    check(ann !== undefined, `${name} has annotations`);
    if (ann !== undefined) {
      check(ann.readOnlyHint === false, `${name} is marked not read-only (readOnlyHint false)`, { annotations: ann });
      for (const hint of ['destructiveHint', 'idempotentHint', 'openWorldHint']) {
        check(typeof ann[hint] === 'boolean', `${name} states ${hint}`, { annotations: ann });
      }
    }
  }

  stage('calls of every shape');
  const answers = [];
  const call = async (tool, args) => {
    try {
      const answer = await a.call(tool, args);
      answers.push(answer);
      return answer;
    } catch (e) {
      require(false, `the SDK accepts the result of ${tool} ${JSON.stringify(args)}`, { error: String(e) });
    }
  };
  await call('terminal', { command: 'echo fg; exit 4' });
  const started = await call('terminal', { command: 'read line; echo got $line', background: true, notify: true });
  const id = started.json.session_id ?? '';
  await call('process', { action: 'list' });
  await call('process', { action: 'poll', session_id: id });
  await call('process', { action: 'submit', session_id: id, data: 'x' });
  await call('process', { action: 'wait', session_id: id, timeout: 10 });
  await call('process', { action: 'log', session_id: id });
  await call('process', { action: 'kill', session_id: id });
  await call('process', { action: 'explode' });
  await call('terminal', { command: 'make', notify: true });
  await call('process', { action: 'poll', session_id: 'proc_ffffffffffff' });
  check(answers.some((x) => x.isError) && answers.some((x) => !x.isError), 'the calls include both results and errors');

  const missing = answers.filter((x) => x.result.structuredContent === undefined)
    .map((x) => `${x.tool} ${JSON.stringify(x.args)}`);
  check(missing.length === 0, 'every tool result has structuredContent', { callsWithoutIt: missing });
  for (const x of answers) {
    if (x.result.structuredContent !== undefined) {
      const { notices, ...structured } = x.result.structuredContent;
      check(notices === undefined || notices === x.notices?.[0],
        `${x.tool} ${JSON.stringify(x.args)}: structuredContent's notices are the notice block`,
        { structured: x.result.structuredContent, notices: x.notices });
      check(sameJson(structured, x.json),
        `${x.tool} ${JSON.stringify(x.args)}: structuredContent equals the first text block's JSON`,
        { structured: x.result.structuredContent, text: x.json });
    }
  }
  await a.close();
});
