//! Unit tests for the `verdict` module: rule names and the block's display.

use std::collections::HashSet;

use super::{Block, Rule, Verdict};

#[test]
fn rule_names_are_unique_kebab_case() {
    let names: HashSet<&str> = Rule::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(names.len(), Rule::ALL.len());
    for rule in Rule::ALL {
        assert!(
            rule.as_str()
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '-'),
            "{rule}"
        );
        assert_eq!(rule.to_string(), rule.as_str());
        assert!(rule == rule.as_str());
    }
}

#[test]
fn b33_every_remedy_names_a_session_id_or_a_pid() {
    for rule in Rule::ALL {
        assert!(rule.remedy().contains("herd kill proc_"), "{rule}");
        assert!(rule.remedy().contains("PID"), "{rule}");
    }
}

#[test]
fn block_display_names_rule_reason_and_remedy() {
    let block = Block::new(Rule::KillByName, "python", "`pkill` would kill the host");
    let shown = block.to_string();
    assert!(
        shown.contains("kill-by-name") && shown.contains("would kill the host"),
        "{shown}"
    );
    assert!(shown.contains("herd kill proc_"), "{shown}");
    let verdict = Verdict::Block(block.clone());
    assert!(verdict.is_block());
    assert_eq!(verdict.block(), Some(&block));
    assert_eq!(Verdict::Allow.block(), None);
}
