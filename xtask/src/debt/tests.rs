//! Tests for sorting findings against the debt lists.

use super::*;

fn finding(key: &str) -> Finding {
    Finding {
        key: key.into(),
        message: format!("{key} is too long"),
    }
}

#[test]
fn listed_findings_warn_new_ones_fail_and_stale_entries_fail() {
    let listed = vec![
        ("a.rs: file".to_string(), "the split".to_string()),
        ("b.rs: fn f".to_string(), "the split".to_string()),
    ];
    let settled = settle(&[finding("a.rs: file"), finding("c.rs: fn g")], &listed);
    assert_eq!(
        settled.known,
        [(
            "a.rs: file is too long".to_string(),
            "the split".to_string()
        )]
    );
    assert_eq!(settled.new, ["c.rs: fn g is too long"]);
    assert_eq!(
        settled.stale,
        [("b.rs: fn f".to_string(), "the split".to_string())]
    );
    let failure = settled.failure("sizes", "split it").expect("fails");
    assert!(failure.contains("c.rs: fn g is too long"), "{failure}");
    assert!(
        failure.contains("b.rs: fn f (the split) no longer violates: remove it from the list"),
        "{failure}"
    );
}

#[test]
fn only_known_findings_pass() {
    let listed = vec![("a.rs: file".to_string(), "the split".to_string())];
    let settled = settle(&[finding("a.rs: file")], &listed);
    assert_eq!(settled.failure("sizes", "split it"), None);
}

#[test]
fn the_lists_are_sorted_and_say_what_removes_each() {
    for (path, what, plan) in SIZES {
        assert!(
            !plan.is_empty() && (*what == "file" || what.starts_with("fn ")),
            "{path}"
        );
    }
    for (krate, members, _) in CYCLES {
        assert!(
            members.len() >= 2,
            "{krate}: a cycle has two modules or more"
        );
        assert!(members.is_sorted(), "{krate}: list the modules sorted");
    }
}
