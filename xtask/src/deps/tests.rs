//! Tests for the dependency-direction check, including the real workspace.

use super::*;

fn pkg(name: &str, deps: &[&str]) -> Package {
    Package {
        name: name.into(),
        deps: deps.iter().map(|d| d.to_string()).collect(),
    }
}

#[test]
fn a_leaf_depending_on_the_registry_is_rejected_by_name() {
    let v = check(&[pkg("herd-pty", &["herd-core"])]);
    assert_eq!(
        v,
        vec![Violation::Forbidden {
            from: "herd-pty".into(),
            to: "herd-core".into()
        }]
    );
    let msg = v[0].to_string();
    assert!(msg.contains("herd-pty -> herd-core"), "{msg}");
}

#[test]
fn the_registry_depending_on_the_cli_is_rejected() {
    let v = check(&[pkg("herd-core", &["herd-pty", "herd-cli"])]);
    assert_eq!(v.len(), 1);
    assert!(v[0].to_string().contains("herd-core -> herd-cli"));
}

#[test]
fn an_unknown_package_is_rejected() {
    let v = check(&[pkg("herd-sneaky", &[])]);
    assert_eq!(
        v,
        vec![Violation::Unknown {
            name: "herd-sneaky".into()
        }]
    );
}

#[test]
fn allowed_edges_pass_and_test_plugins_see_only_the_abi() {
    let ok = [
        pkg(
            "herd-core",
            &["herd-pty", "herd-guards", "herd-persistence", "herd-hooks"],
        ),
        pkg("herd-hooks", &["herd-plugin-abi"]),
        pkg("herd-tests", &["herd-core", "herd-cli"]),
        pkg("herd-test-plugin-bad-abi", &["herd-plugin-abi"]),
    ];
    assert!(check(&ok).is_empty());
    let bad = check(&[pkg("herd-test-plugin-x", &["herd-hooks"])]);
    assert_eq!(bad.len(), 1);
}

#[test]
fn metadata_edges_are_extracted_for_workspace_members_only() {
    let meta = serde_json::json!({
        "packages": [
            {"name": "herd-pty", "dependencies": [{"name": "memchr"}, {"name": "herd-core"}]},
            {"name": "herd-core", "dependencies": [{"name": "herd-pty"}, {"name": "tokio"}]}
        ]
    });
    let pkgs = packages_from_metadata(&meta);
    assert_eq!(pkgs[0].deps, vec!["herd-core".to_string()]);
    assert_eq!(pkgs[1].deps, vec!["herd-pty".to_string()]);
    assert_eq!(check(&pkgs).len(), 1);
}

#[test]
fn the_test_support_crate_is_a_dev_dependency_only() {
    let meta = serde_json::json!({
        "packages": [
            {"name": "herd-test-support", "dependencies": [{"name": "tempfile"}]},
            {"name": "herd-pty", "dependencies": [{"name": "herd-test-support", "kind": "dev"}]},
            {"name": "herd-core", "dependencies": [{"name": "herd-test-support", "kind": null}]}
        ]
    });
    let pkgs = packages_from_metadata(&meta);
    assert!(
        pkgs[1].deps.is_empty(),
        "a dev edge to it is no edge: {pkgs:?}"
    );
    assert_eq!(
        check(&pkgs),
        vec![Violation::Forbidden {
            from: "herd-core".into(),
            to: "herd-test-support".into()
        }]
    );
}

#[test]
fn the_workspace_follows_the_dependency_direction() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = crate::shell::command(&cargo);
    cmd.args(["metadata", "--format-version", "1", "--no-deps"]);
    let out = crate::shell::output(&mut cmd).expect("cargo metadata runs");
    let meta: serde_json::Value = serde_json::from_str(&out).expect("metadata is JSON");
    let pkgs = packages_from_metadata(&meta);
    assert!(
        pkgs.len() >= 10,
        "expected the whole workspace, got {pkgs:?}"
    );
    let violations: Vec<String> = check(&pkgs).iter().map(|v| v.to_string()).collect();
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}
