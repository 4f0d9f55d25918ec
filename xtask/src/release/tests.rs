//! Tests for release checks.

use super::*;

#[test]
fn changelog_entry_is_found_only_for_its_version() {
    let log = "# Changelog\n\n## [0.1.0] - 2026-11-29\n- first\n";
    assert!(has_entry(log, "0.1.0"));
    assert!(!has_entry(log, "0.2.0"));
    assert!(has_entry("## 0.3.0\n", "0.3.0"));
    assert!(!has_entry("- mentions 0.3.0 in passing\n", "0.3.0"));
}
