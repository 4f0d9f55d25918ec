//! `herd-shim`: the per-session supervisor the herd daemon starts for every job.
//!
//! Not meant to be run by hand: the daemon writes a launch spec on its stdin and
//! reads one ready answer from its stdout. All the logic lives in `herd_core::shim`;
//! this binary is kept apart from `herd` so each supervisor is a small process
//! (no async runtime, no MCP or CLI code).

fn main() {
    std::process::exit(herd_core::shim::main());
}
