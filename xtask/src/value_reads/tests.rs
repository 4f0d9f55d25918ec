//! The untyped-read ratchet: what it counts and how it judges the counts.

use super::*;

fn file(text: &str) -> SourceFile {
    SourceFile {
        rel: "cli/src/x.rs".into(),
        module: vec!["x".into()],
        text: text.into(),
        ast: syn::parse_file(text).expect("the test source parses"),
    }
}

#[test]
fn counts_reads_by_field_name_in_code_and_macros_but_not_in_tests() {
    let f = file(
        r#"
        fn a(v: Value) {
            let id = v["session_id"].as_str();
            let kind = v["target"]["kind"].clone();
            let n = v[0].clone();
            let key = "k";
            let w = v[key].clone();
            line(&format!("{} {}", v["pid"], f(x)["y"]));
            for k in ["pty_note", "note"] {}
            let words = vec!["a"];
            let arr = ["one"];
            g(&["run"]);
        }
        #[cfg(test)]
        mod tests { fn t(v: Value) { v["a"].clone(); } }
        #[test]
        fn t(v: Value) { v["b"].clone(); }
        "#,
    );
    assert_eq!(count(&f), 5);
}

#[test]
fn a_file_over_its_count_fails_and_one_under_is_a_note() {
    let mut found = BTreeMap::new();
    found.insert("cli/src/a.rs".to_owned(), 3);
    found.insert("cli/src/b.rs".to_owned(), 1);
    let (failures, notes) = judge(&found, &[("cli/src/a.rs", 2), ("cli/src/c.rs", 4)]);
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(failures[0].contains("cli/src/a.rs: 3"), "{failures:?}");
    assert!(failures[1].contains("cli/src/b.rs: 1"), "{failures:?}");
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("cli/src/c.rs holds 0"), "{notes:?}");
}

#[test]
fn every_allowed_count_is_above_zero() {
    let rows = ALLOWED
        .iter()
        .copied()
        .chain(NOT_ANSWER.iter().map(|(rel, n, _)| (*rel, *n)));
    for (rel, n) in rows {
        assert!(n > 0, "{rel}: a row of 0 is to be removed");
    }
}

#[test]
fn reads_allowed_as_no_answer_add_to_a_files_count() {
    let mut found = BTreeMap::new();
    found.insert("cli/src/a.rs".to_owned(), 3);
    found.insert("cli/src/b.rs".to_owned(), 2);
    let limits = with_not_answer(
        &[("cli/src/a.rs", 2)],
        &[
            ("cli/src/a.rs", 1, "reads its own params"),
            ("cli/src/b.rs", 1, "reads cargo's messages"),
        ],
    );
    let (failures, notes) = judge(&found, &limits);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains("cli/src/b.rs: 2"), "{failures:?}");
    assert!(notes.is_empty(), "{notes:?}");
}

#[test]
fn every_read_allowed_as_no_answer_says_why() {
    for (rel, _, why) in NOT_ANSWER {
        assert!(
            why.split_whitespace().count() >= 3,
            "{rel}: say why ({why:?})"
        );
    }
}
