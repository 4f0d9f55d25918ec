//! Integration tests for herd-guards: the B33 table of must-block and must-allow command
//! lines (one named test per row), script reading through the real file system, and the
//! robustness property.

mod robustness;
mod scripts;
mod table;

use herd_guards::{Host, Rule, Verdict, judge};

/// The host most rows are judged against: a python agent supervised by herd.
pub(crate) fn host() -> Host {
    Host::new(
        vec!["herd".to_owned(), "python".to_owned()],
        "python -m agent.main --serve",
    )
    .with_units(["herd.service", "ai.herd.daemon", "agent-gateway"])
}

/// Asserts that `command` is blocked, naming the command on failure.
pub(crate) fn check_block(command: &str) -> Rule {
    match judge(command, &host()) {
        Verdict::Block(block) => {
            assert!(!block.reason.is_empty(), "empty reason for {command:?}");
            assert!(
                block.remedy.contains("herd kill proc_") || block.remedy.contains("PID"),
                "remedy names neither a session id nor a PID: {}",
                block.remedy
            );
            block.rule
        }
        Verdict::Allow => panic!("expected a block for {command:?}"),
    }
}

/// Asserts that `command` is allowed, naming the command and the block on failure.
pub(crate) fn check_allow(command: &str) {
    if let Verdict::Block(block) = judge(command, &host()) {
        panic!("expected {command:?} to be allowed, got {block}");
    }
}
