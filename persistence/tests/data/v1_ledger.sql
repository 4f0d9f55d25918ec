-- A version-1 completion ledger (herd-persistence), as SQL.
-- The test builds state.db from it and opens it with Ledger::open.
BEGIN;
CREATE TABLE completions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    completion_id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    owner_task_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    event TEXT NOT NULL,
    created_at REAL NOT NULL,
    delivered_at REAL
);
CREATE INDEX completions_undelivered ON completions (seq) WHERE delivered_at IS NULL;
INSERT INTO completions VALUES (1, 'cmp_0001', 'proc_00000000000a', 'task-1', 'task-1', 'agent:main', '{"type":"completion","session_id":"proc_00000000000a","exit_code":0,"output":"ok\n"}', 1790000000.0, 4102444800.0);
INSERT INTO completions VALUES (2, 'cmp_0002', 'proc_00000000000b', 'sa-child-1', 'task-1', '', '{"type":"completion","session_id":"proc_00000000000b","exit_code":1,"output":"boom\n"}', 1790000100.5, NULL);
INSERT INTO completions VALUES (3, 'cmp_0003', 'proc_00000000000c', 'task-2', 'task-2', 'agent:other', '{"type":"completion","session_id":"proc_00000000000c","exit_code":null,"completion_reason":"lost"}', 1790000200.0, NULL);
PRAGMA user_version = 1;
COMMIT;
