//! The config loader: `Config::parse` on arbitrary text, compiled from
//! `cli/src/config.rs` itself (with `cli/src/exit.rs`, `sizes.rs` and `sys.rs`,
//! which it uses) by `#[path]`,
//! since `herd-cli` is a binary crate and has no library to link. These files
//! depend only on libraries (`herd-core`'s limits, `herd-hooks`' redactor,
//! `herd-persistence`'s `Home`, serde, toml), so they compile here unchanged; a
//! change that makes them use another module of the binary breaks this build, on
//! purpose, rather than fuzzing a stale copy.
//!
//! Property: no panic; an error is a usage error (exit 2) that says which file is
//! invalid; a config that parses has every number in its documented range and
//! extra redaction patterns the redactor accepts.

#![no_main]

#[allow(dead_code, unreachable_pub)]
#[path = "../../cli/src/exit.rs"]
mod exit;

#[allow(dead_code, unreachable_pub)]
#[path = "../../cli/src/config.rs"]
mod config;

#[allow(dead_code, unreachable_pub)]
#[path = "../../cli/src/sizes.rs"]
mod sizes;

// `sys` has a module of its own (`sys/proctitle.rs`): it is found as the binary
// finds it, from a module standing for `cli/src`.
#[allow(dead_code, unreachable_pub)]
#[path = "../../cli/src"]
mod binary {
    pub(crate) mod sys;
}
use binary::sys;

use std::path::Path;

use herd_core::limits;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match config::Config::parse(text, Path::new("fuzz/config.toml")) {
        Ok(c) => {
            assert!(
                limits::HEARTBEAT_SECONDS.contains(&c.heartbeat_floor_seconds),
                "{c:?}"
            );
            assert!(
                limits::KILL_GRACE_SECONDS.contains(&c.kill_grace_seconds),
                "{c:?}"
            );
            assert!(
                limits::WAIT_CAP_SECONDS.contains(&c.wait_cap_seconds),
                "{c:?}"
            );
            if let Some(cap) = c.finished_cap {
                assert!(limits::FINISHED_CAP.contains(&cap), "{c:?}");
            }
            assert!(limits::QUEUE_CAP.contains(&c.queue_cap), "{c:?}");
            assert!(limits::LOG_CAP_BYTES.contains(&c.log_cap_bytes), "{c:?}");
            assert!(
                limits::LOG_BUDGET_BYTES.contains(&c.log_budget_bytes),
                "{c:?}"
            );
            assert!((1..=65_536).contains(&c.max_connections), "{c:?}");
            assert!(
                herd_hooks::Redactor::new(&c.redactor_config()).is_ok(),
                "a parsed config's patterns are refused: {c:?}"
            );
        }
        Err(err) => {
            assert_eq!(
                exit::code_of(&err),
                exit::Code::Usage,
                "a bad config is a usage error: {err:#}"
            );
            let message = format!("{err:#}");
            assert!(
                message.contains("fuzz/config.toml"),
                "the error names the file: {message}"
            );
        }
    }
});
