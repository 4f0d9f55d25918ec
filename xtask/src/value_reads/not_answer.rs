//! The reads by field name in herd-cli that read no daemon answer, per file, and why.
//!
//! A row here is a count the untyped-read ratchet allows on top of `ALLOWED`
//! (`../value_reads.rs`): lower it when a file sheds one, remove it at 0, and add
//! one only for a read of JSON that is no answer the CLI reads from a daemon (the
//! daemon's own rows and params, another program's output, an MCP client's
//! messages and the MCP server's own schemas and results).

/// `(file, how many reads by field name, why they read no daemon answer)`.
pub(crate) const NOT_ANSWER: &[(&str, usize, &str)] = &[
    (
        "cli/src/client/liveness.rs",
        1,
        "reads the call's own params (an `id` of any method) to give a far call more time",
    ),
    (
        "cli/src/daemon/hosts.rs",
        2,
        "the daemon sets a far call's `id` in its params and clears `host` on its own list rows",
    ),
    (
        "cli/src/daemon/hosts/events.rs",
        1,
        "the daemon marks the list row it keeps for a far job exited when its completion arrives",
    ),
    (
        "cli/src/daemon/hosts/jobs.rs",
        10,
        "the daemon builds and edits the list rows it keeps for far jobs (status, host, stale, \
         as_of), copying a far poll answer's fields into them as JSON, unread",
    ),
    (
        "cli/src/daemon/methods.rs",
        1,
        "the daemon reads the session id of the poll answer it built itself, to await its receipt",
    ),
    (
        "cli/src/daemon/methods/control.rs",
        1,
        "the daemon reads the status of the wait answer it built itself (a timeout waits again)",
    ),
    (
        "cli/src/daemon/methods/query.rs",
        1,
        "the daemon takes the rows of the list answer it built itself, to merge far hosts' rows",
    ),
    (
        "cli/src/mcp/schema.rs",
        5,
        "the MCP server reads the tools' own input schemas (made from args.rs's argument types) \
         for a property's types and the argument names they know",
    ),
    (
        "cli/src/mcp/tasks_2025.rs",
        12,
        "the 2025-11-25 tasks revision by hand: an MCP client's JSON-RPC line read before rmcp \
         (`params.protocolVersion`, `params.task`) and renamed (`method`), the server's own \
         initialize and tools/list results rewritten for that revision, the error of its own \
         refusal, and the related-task `_meta` set on its own task result",
    ),
    (
        "cli/src/plugins/scaffold.rs",
        4,
        "cargo's `--message-format=json` build messages (reason, target kind, filenames), no daemon's",
    ),
];
