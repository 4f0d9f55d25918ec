//! The wire-JSON ratchet: what it counts and how it judges the counts.

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
fn counts_json_in_code_and_nested_but_not_in_tests() {
    let f = file(
        r#"
        fn a() { let v = json!({"a": json!(1)}); let w = vec![json!(2)]; }
        #[cfg(test)]
        mod tests { fn t() { json!(3); } }
        #[test]
        fn t() { json!(4); }
        "#,
    );
    assert_eq!(count(&f), 3);
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
fn json_allowed_as_no_wire_message_adds_to_a_files_count() {
    let mut found = BTreeMap::new();
    found.insert("cli/src/a.rs".to_owned(), 3);
    found.insert("cli/src/b.rs".to_owned(), 2);
    let limits = with_not_wire(
        &[("cli/src/a.rs", 2)],
        &[
            ("cli/src/a.rs", 1, "prints a --json line"),
            ("cli/src/b.rs", 1, "prints a --json line"),
        ],
    );
    let (failures, notes) = judge(&found, &limits);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains("cli/src/b.rs: 2"), "{failures:?}");
    assert!(notes.is_empty(), "{notes:?}");
}

#[test]
fn every_json_allowed_as_no_wire_message_says_why() {
    for (rel, n, why) in NOT_WIRE {
        assert!(*n > 0, "{rel}: a NOT_WIRE row of 0 is to be removed");
        assert!(
            why.split_whitespace().count() >= 3,
            "{rel}: say why ({why:?})"
        );
    }
}
