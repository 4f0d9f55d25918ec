// Tasks of the 2025-11-25 revision through the TypeScript SDK (issue 28): herd declares
// capabilities.tasks and terminal's execution.taskSupport to this era's clients; a
// task-augmented terminal call answers a task, tasks/get reports it, tasks/result
// answers the run's CallToolResult (validated by the SDK against terminal's
// outputSchema) tied to its task, tasks/list lists it, and tasks/cancel kills the job.
//
// Usage: node tasks.mjs

import { WAIT_MS, agent, check, pause, require, run, stage, types } from './herd_client.mjs';

await run('node tasks', async () => {
  const a = await agent('A');

  stage('declarations');
  const caps = a.client.getServerCapabilities();
  check(caps?.tasks?.requests?.tools?.call !== undefined, 'initialize declares tasks.requests.tools.call',
    { capabilities: caps });
  check(caps?.tasks?.list !== undefined && caps?.tasks?.cancel !== undefined, 'initialize declares tasks list and cancel',
    { capabilities: caps });
  const { tools } = await a.client.listTools();
  const terminal = tools.find((t) => t.name === 'terminal');
  check(terminal?.execution?.taskSupport === 'optional', 'terminal says execution.taskSupport optional',
    { execution: terminal?.execution ?? null });

  stage('a task run to completion through callToolStream');
  const seen = [];
  let result;
  const stream = a.client.experimental.tasks.callToolStream(
    { name: 'terminal', arguments: { command: 'echo task-out; exit 3' } },
    types.CallToolResultSchema,
    { timeout: WAIT_MS },
  );
  for await (const message of stream) {
    seen.push(message.type);
    if (message.type === 'result') result = message.result;
    if (message.type === 'error') require(false, 'the task stream ends without an error', { error: String(message.error) });
  }
  check(seen[0] === 'taskCreated', 'the call answers a task first (the SDK chose it from taskSupport)', { seen });
  require(result !== undefined, 'the stream yields the result', { seen });
  check(result.structuredContent?.exit_code === 3, 'the result carries the exit code 3', { result });
  check(String(result.structuredContent?.output ?? '').includes('task-out'), 'the result carries the output', { result });

  stage('get, result and list of a finished task');
  const created = await a.client.request(
    { method: 'tools/call', params: { name: 'terminal', arguments: { command: 'echo second' } } },
    types.CreateTaskResultSchema,
    { task: { ttl: 60_000 } },
  );
  const taskId = created.task.taskId;
  check(created.task.status === 'working', 'a created task is working', { created });
  check(created.task.ttl === 60_000, 'the ttl asked for is kept', { created });
  const payload = await a.client.experimental.tasks.getTaskResult(taskId, types.CallToolResultSchema);
  check(String(payload.structuredContent?.output ?? '').includes('second'), 'tasks/result waits for the run and answers it',
    { payload });
  check(payload._meta?.['io.modelcontextprotocol/related-task']?.taskId === taskId,
    'the result names its task in _meta', { meta: payload._meta ?? null });
  const got = await a.client.experimental.tasks.getTask(taskId);
  check(got.status === 'completed', 'tasks/get reports it completed', { got });
  const listed = await a.client.experimental.tasks.listTasks();
  check(listed.tasks.some((t) => t.taskId === taskId), 'tasks/list lists it', { listed });

  stage('cancel kills the job');
  const long = await a.client.request(
    { method: 'tools/call', params: { name: 'terminal', arguments: { command: 'sleep 60' } } },
    types.CreateTaskResultSchema,
    { task: {} },
  );
  const longId = long.task.taskId;
  const sessionId = (long.task.statusMessage ?? '').match(/proc_[0-9a-f]+/)?.[0];
  require(sessionId !== undefined, 'the task names its session in statusMessage', { task: long.task });
  const cancelled = await a.client.experimental.tasks.cancelTask(longId);
  check(cancelled.status === 'cancelled', 'tasks/cancel answers the task cancelled', { cancelled });
  const end = Date.now() + WAIT_MS;
  let status;
  while (Date.now() < end) {
    status = (await a.call('process', { action: 'poll', session_id: sessionId })).json.status;
    if (status !== 'running') break;
    await pause();
  }
  check(status !== undefined && status !== 'running', 'the cancelled task\'s job is killed', { status });
  let refused;
  try {
    await a.client.experimental.tasks.getTaskResult(longId, types.CallToolResultSchema);
  } catch (e) {
    refused = String(e);
  }
  check(refused !== undefined && refused.includes('cancelled'), 'a cancelled task has no result and says why', { refused });
  await a.close();
});
