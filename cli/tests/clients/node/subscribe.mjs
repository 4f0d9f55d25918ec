// Pushed wake-ups through the TypeScript SDK (2025-11-25): the client subscribes to
// herd://notifications, is sent notifications/resources/updated when a completion is
// queued (without making a tool call), reads the resource to collect it, and the
// completion never comes again in later tool results; a completion is pushed once,
// also when a foreground job's exit follows it before it is collected.
//
// Usage: node subscribe.mjs

import { agent, check, pause, require, run, stage, types, WAIT_MS, isCompletion, noticeEntries } from './herd_client.mjs';

const URI = 'herd://notifications';

await run('node subscribe', async () => {
  const a = await agent('A');
  const updates = [];
  a.client.setNotificationHandler(types.ResourceUpdatedNotificationSchema, (n) => {
    updates.push(n.params.uri);
  });
  stage('the resource is listed');
  const listed = await a.client.listResources();
  require(listed.resources.some((r) => r.uri === URI), 'herd lists herd://notifications', { listed });
  stage('subscribe');
  await a.client.subscribeResource({ uri: URI });
  stage('a job that finishes on its own');
  const id = await a.start({ command: 'sleep 1; echo pushed', background: true, notify: true });
  const already = a.completions(id).length;
  stage('the pushed wake-up, without a tool call');
  const end = Date.now() + WAIT_MS;
  while (updates.length === 0 && already === 0 && Date.now() < end) await pause();
  if (already === 0) {
    require(updates.includes(URI), 'resources/updated names herd://notifications', { updates });
    stage('read the resource');
    const read = await a.client.readResource({ uri: URI });
    const text = read.contents.map((c) => c.text ?? '').join('\n');
    const entries = noticeEntries(text);
    check(entries.filter((e) => isCompletion(e, id)).length === 1, 'the read carries the completion once', { text });
  }
  stage('never again');
  await a.settle();
  const again = await a.client.readResource({ uri: URI });
  const later = again.contents.map((c) => c.text ?? '').join('\n');
  check(!later.includes(id), 'a second read does not carry it', { later });
  check(a.completions(id).length === already, 'later tool results do not carry it', { notices: a.notices });

  stage('one push per completion, also when a foreground result carries it');
  const before = updates.length;
  const second = await a.start({ command: 'sleep 0.5; echo second', background: true });
  const until = Date.now() + WAIT_MS;
  while (updates.length === before && Date.now() < until) await pause();
  require(updates.length === before + 1, 'the background completion is pushed', { updates: updates.length, before });
  // The foreground job's own exit is another event of the owner while the completion waits.
  const fg = await a.call('terminal', { command: 'echo fg' });
  check(fg.notices.some((n) => n.includes(second)), 'the foreground result carries the waiting completion', { fg: fg.notices });
  await a.settle();
  check(updates.length === before + 1, 'no second push for the same completion', { updates: updates.length, before });
  await a.close();
});
