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

#[test]
fn verification_uses_the_root_manifests_dev_profile() {
    let root = crate::workspace_root().expect("xtask lives one level below the root");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("root manifest");
    let compact: String = manifest.split_whitespace().collect();
    for setting in VERIFY_PROFILE {
        // `profile.dev.package."*".debug=false` is `[profile.dev.package."*"]` then
        // `debug = false` in the manifest.
        let (table, key_value) = setting
            .rsplit_once('.')
            .expect("every setting names a table and a key");
        let expected = format!("[{table}]{key_value}");
        assert!(
            compact.contains(&expected),
            "the root Cargo.toml no longer has `{setting}`: update VERIFY_PROFILE in release.rs"
        );
    }
}
