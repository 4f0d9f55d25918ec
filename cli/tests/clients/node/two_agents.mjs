// Two agents on one home (B31) through the TypeScript SDK (2025-11-25): two `herd mcp`
// servers started the same way (no --owner), each with its own client. Each is told
// only of its own completion (in tool results and as notice-level log messages), lists
// only its own job, and cannot kill the other's.
//
// Usage: node two_agents.mjs

import { agent, check, require, run, stage } from './herd_client.mjs';

function ownerOf(instructions) {
  return /`(mcp-[0-9a-f]{12})`/.exec(instructions ?? '')?.[1] ?? '';
}

await run('node two_agents', async () => {
  const a = await agent('A');
  const b = await agent('B');
  stage('tools/list');
  for (const x of [a, b]) {
    const { tools } = await x.client.listTools();
    require(JSON.stringify(tools.map((t) => t.name)) === '["terminal","process"]',
      `${x.name}: tools/list names terminal and process`, { tools: tools.map((t) => t.name) });
  }
  const [ownerA, ownerB] = [ownerOf(a.client.getInstructions()), ownerOf(b.client.getInstructions())];
  check(ownerA !== '' && ownerB !== '' && ownerA !== ownerB,
    'each server names its own mcp-<12 hex> owner in its instructions', { a: ownerA, b: ownerB });

  stage('both start a background job with notify=true');
  const idA = await a.start({ command: 'sleep 2; echo from-a', background: true, notify: true });
  const idB = await b.start({ command: 'sleep 2; echo from-b', background: true, notify: true });

  stage('process list');
  for (const [x, mine, theirs] of [[a, idA, idB], [b, idB, idA]]) {
    const listed = await x.call('process', { action: 'list' });
    const text = JSON.stringify(listed.json);
    check(text.includes(mine), `${x.name}: process list shows its own job`, { listed: listed.json });
    check(!text.includes(theirs), `${x.name}: process list does not show the other agent's job`, { listed: listed.json });
  }

  stage("kill the other agent's job");
  for (const [x, theirs] of [[a, idB], [b, idA]]) {
    const killed = await x.call('process', { action: 'kill', session_id: theirs });
    check(killed.isError, `${x.name}: process kill of the other agent's session is an error`, { answer: killed.json });
  }

  stage('completions');
  for (const [x, mine] of [[a, idA], [b, idB]]) {
    await x.pollUntil(`its completion of ${mine} arrives in a tool result`, () => x.completions(mine).length > 0);
    await x.pollUntil(`its completion of ${mine} arrives as a notice-level log message`,
      () => x.noticeLogs().some((l) => l.includes(mine)));
  }
  for (const x of [a, b]) await x.settle();
  for (const [x, mine, theirs, word] of [[a, idA, idB, 'from-a'], [b, idB, idA, 'from-b']]) {
    const done = x.completions(mine);
    check(done.length === 1, `${x.name}: exactly one completion of its job`, { completions: done });
    check(done.some((c) => c.includes('exit code 0') && c.includes(word)),
      `${x.name}: its job completed normally (exit code 0, its output): the other agent's kill did not reach it`,
      { completions: done });
    check(!x.notices.some((n) => n.includes(theirs)), `${x.name}: no tool result carries the other agent's job`,
      { notices: x.notices });
    check(!x.noticeLogs().some((l) => l.includes(theirs)), `${x.name}: no log message carries the other agent's job`,
      { logs: x.noticeLogs() });
  }
  await a.close();
  await b.close();
});
