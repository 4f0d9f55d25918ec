//! Unit tests for session ids.

use super::*;

#[test]
fn b37_generated_ids_have_the_pinned_shape() {
    for _ in 0..1000 {
        let id = SessionId::generate();
        let hex = id
            .as_str()
            .strip_prefix(ID_PREFIX)
            .expect("ids start with proc_");
        assert_eq!(hex.len(), 12, "{id}");
        assert!(
            hex.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
            "{id}"
        );
    }
}

#[test]
fn b37_bare_suffix_is_normalised() {
    assert_eq!(normalise_prefix("abcd"), "proc_abcd");
    assert_eq!(normalise_prefix("proc_abcd"), "proc_abcd");
}
