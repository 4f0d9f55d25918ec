//! The `json!` of herd-cli that build no wire message, per file, and why.
//!
//! A row here is a count the wire-JSON ratchet allows on top of `ALLOWED`
//! (`../wire_json.rs`): lower it when a file sheds one, remove it at 0, and add one
//! only for JSON that never goes to the daemon nor to an MCP client.

/// `(file, how many json!, why they are no wire message)`.
pub(crate) const NOT_WIRE: &[(&str, usize, &str)] = &[
    (
        "cli/src/commands/shutdown.rs",
        2,
        "the `herd shutdown --json` lines printed for the user (not_running, stopped)",
    ),
    (
        "cli/src/doctor.rs",
        2,
        "the `herd doctor --json` report printed for the user (its checks and their rows)",
    ),
];
