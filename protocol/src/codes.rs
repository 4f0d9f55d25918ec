//! The error codes of the wire: JSON-RPC's and herd's own. [`ALL`] lists them with
//! their names and meanings for the schema and the method table.

/// JSON-RPC: invalid JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: unknown method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: bad parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: the daemon failed internally.
pub const INTERNAL_ERROR: i64 = -32603;
/// herd: the session id matched nothing, several sessions, or was too short.
pub const NOT_FOUND: i64 = -32004;
/// herd: the self-kill guard refused the command.
pub const GUARDED: i64 = -32010;
/// herd: client and daemon speak different protocol versions.
pub const VERSION_MISMATCH: i64 = -32011;
/// herd: the request line exceeded [`crate::MAX_REQUEST_BYTES`].
pub const TOO_LARGE: i64 = -32012;
/// herd: the first request was not `hello`.
pub const HANDSHAKE_REQUIRED: i64 = -32013;
/// herd: the operation is not supported by this daemon.
pub const UNSUPPORTED: i64 = -32014;
/// herd: the peer is another user; the connection is closed.
pub const PEER_REFUSED: i64 = -32015;
/// herd: the registry refused the operation (e.g. a handoff over the cap); `data`
/// names the reason.
pub const REFUSED: i64 = -32016;
/// herd: restart-safe dispatch (a job in its own systemd scope) refused the spawn; `data` carries
/// `infrastructure` (true when the host, not the job, is at fault).
pub const DISPATCH_FAILED: i64 = -32017;
/// The daemon serves as many connections as it may (`max_connections`); the
/// message names the limit.
pub const TOO_MANY_CONNECTIONS: i64 = -32018;
/// The daemon is shutting down: no new job starts.
pub const SHUTTING_DOWN: i64 = -32019;
/// herd: the far host of a qualified id (`NAME:proc_…`) does not answer; the
/// message says since when and the door's last words, `data.host` names it
/// (capability `hosts`; the CLI exits 3).
pub const HOST_UNREACHABLE: i64 = -32020;
/// The disk holding the home is full: the spawn started nothing (the message
/// names the free space and the path). The CLI exits 1.
pub const DISK_FULL: i64 = -32021;

/// Every code: value, name, meaning.
pub const ALL: &[(i64, &str, &str)] = &[
    (PARSE_ERROR, "PARSE_ERROR", "invalid JSON"),
    (
        INVALID_REQUEST,
        "INVALID_REQUEST",
        "not a valid request object",
    ),
    (METHOD_NOT_FOUND, "METHOD_NOT_FOUND", "unknown method"),
    (
        INVALID_PARAMS,
        "INVALID_PARAMS",
        "bad parameters; the message says which and why",
    ),
    (
        INTERNAL_ERROR,
        "INTERNAL_ERROR",
        "the daemon failed internally",
    ),
    (
        NOT_FOUND,
        "NOT_FOUND",
        "the session id matched nothing, several sessions (`data.matches`), or was too short",
    ),
    (
        GUARDED,
        "GUARDED",
        "the self-kill guard refused the command; `data` is the verdict",
    ),
    (
        VERSION_MISMATCH,
        "VERSION_MISMATCH",
        "client and daemon speak different protocol versions",
    ),
    (
        TOO_LARGE,
        "TOO_LARGE",
        "the request line exceeded 1 MiB; the connection is kept",
    ),
    (
        HANDSHAKE_REQUIRED,
        "HANDSHAKE_REQUIRED",
        "the first request was not `hello`",
    ),
    (
        UNSUPPORTED,
        "UNSUPPORTED",
        "the operation is not supported by this daemon",
    ),
    (
        PEER_REFUSED,
        "PEER_REFUSED",
        "the peer is another user; the connection is closed",
    ),
    (
        REFUSED,
        "REFUSED",
        "the registry refused the operation; `data.reason` names why",
    ),
    (
        DISPATCH_FAILED,
        "DISPATCH_FAILED",
        "restart-safe dispatch refused the spawn; `data.infrastructure` is true when the host is at fault",
    ),
    (
        TOO_MANY_CONNECTIONS,
        "TOO_MANY_CONNECTIONS",
        "the daemon serves as many connections as it may",
    ),
    (
        SHUTTING_DOWN,
        "SHUTTING_DOWN",
        "the daemon is shutting down: no new job starts",
    ),
    (
        HOST_UNREACHABLE,
        "HOST_UNREACHABLE",
        "the far host of a qualified id does not answer; `data.host` names it",
    ),
    (
        DISK_FULL,
        "DISK_FULL",
        "the disk holding the home is full: the spawn started nothing",
    ),
];
