//! Tests for the publish-metadata check and the publish order, including the real
//! workspace.

use super::*;

/// A published crate with every field a crates.io page needs.
fn good(name: &str, internal: &[&str]) -> Crate {
    Crate {
        name: name.into(),
        version: "0.1.0".into(),
        publishable: true,
        description: Some("does one thing".into()),
        license: Some("MIT OR Apache-2.0".into()),
        repository: Some("https://github.com/herd-supervisor/herd".into()),
        readme: Some(("README.md".into(), true)),
        keywords: vec!["herd".into()],
        categories: vec!["development-tools".into()],
        rust_version: Some("1.95".into()),
        has_docs_rs: true,
        internal: internal
            .iter()
            .map(|d| ((*d).to_string(), "^0.1.0".to_string()))
            .collect(),
    }
}

fn unpublished(name: &str) -> Crate {
    Crate {
        name: name.into(),
        version: "0.1.0".into(),
        ..Crate::default()
    }
}

#[test]
fn complete_published_crates_and_unpublished_tests_pass() {
    let crates = [
        good("herd-pty", &[]),
        good("herd-core", &["herd-pty"]),
        unpublished("herd-tests"),
    ];
    assert_eq!(check(&crates), vec![]);
}

#[test]
fn each_missing_field_is_named() {
    let bare = Crate {
        name: "herd-pty".into(),
        version: "0.1.0".into(),
        publishable: true,
        ..Crate::default()
    };
    let fields: Vec<&str> = check(&[bare])
        .into_iter()
        .filter_map(|p| match p {
            Problem::Missing { field, .. } => Some(field),
            _ => None,
        })
        .collect();
    assert_eq!(
        fields,
        [
            "description",
            "license",
            "repository",
            "rust-version",
            "readme",
            "package.metadata.docs.rs",
            "keywords",
            "categories"
        ]
    );
}

#[test]
fn an_absent_readme_file_is_a_problem() {
    let mut c = good("herd-pty", &[]);
    c.readme = Some(("README.md".into(), false));
    assert_eq!(
        check(&[c]),
        vec![Problem::ReadmeAbsent {
            name: "herd-pty".into(),
            path: "README.md".into()
        }]
    );
}

#[test]
fn keywords_and_categories_are_held_to_the_registry_rules() {
    let mut c = good("herd-pty", &[]);
    c.keywords = ["a", "b", "c", "d", "e", "f"].map(String::from).to_vec();
    c.categories = vec!["terminal".into(), "os::unix-apis".into()];
    let problems = check(&[c.clone()]);
    assert!(
        matches!(&problems[0], Problem::BadKeywords { why, .. } if why.contains("6 given")),
        "{problems:?}"
    );
    assert!(
        matches!(&problems[1], Problem::BadCategories { why, .. } if why.contains("`terminal`")),
        "{problems:?}"
    );
    assert_eq!(problems.len(), 2, "{problems:?}");
    c.keywords = vec!["escape sequences".into(), "9lives".into(), "ok-word".into()];
    c.categories = vec!["os::unix-apis".into()];
    let problems = check(&[c]);
    assert_eq!(problems.len(), 2, "{problems:?}");
}

#[test]
fn an_internal_dependency_without_the_workspace_version_is_rejected() {
    let mut core = good("herd-core", &["herd-pty"]);
    core.internal = vec![("herd-pty".into(), "*".into())];
    let problems = check(&[good("herd-pty", &[]), core]);
    assert_eq!(
        problems,
        vec![Problem::InternalVersion {
            from: "herd-core".into(),
            to: "herd-pty".into(),
            req: "*".into(),
            expected: "^0.1.0".into()
        }]
    );
    let msg = problems[0].to_string();
    assert!(msg.contains("version = \"0.1.0\""), "{msg}");
}

#[test]
fn classification_follows_the_published_list() {
    let mut core = good("herd-core", &[]);
    core.publishable = false;
    let stray = good("herd-tests", &[]);
    assert_eq!(
        check(&[core, stray]),
        vec![
            Problem::ShouldPublish {
                name: "herd-core".into()
            },
            Problem::ShouldNotPublish {
                name: "herd-tests".into()
            }
        ]
    );
}

#[test]
fn a_published_crate_may_not_need_an_unpublished_one() {
    let problems = check(&[
        good("herd-hooks", &["herd-plugin-example"]),
        unpublished("herd-plugin-example"),
    ]);
    assert_eq!(
        problems,
        vec![Problem::OnUnpublished {
            from: "herd-hooks".into(),
            to: "herd-plugin-example".into()
        }]
    );
}

#[test]
fn order_puts_every_crate_after_its_dependencies() {
    let crates = [
        good("herd-cli", &["herd-core", "herd-pty"]),
        good("herd-core", &["herd-hooks", "herd-pty"]),
        good("herd-hooks", &["herd-plugin-abi"]),
        good("herd-plugin-abi", &[]),
        good("herd-pty", &[]),
        unpublished("herd-tests"),
    ];
    let names: Vec<String> = order(&crates)
        .expect("no cycle")
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(
        names,
        [
            "herd-plugin-abi",
            "herd-pty",
            "herd-hooks",
            "herd-core",
            "herd-cli"
        ]
    );
}

#[test]
fn metadata_fields_are_read_as_cargo_reports_them() {
    let meta = serde_json::json!({
        "packages": [
            {
                "name": "herd-pty", "version": "0.1.0", "publish": null,
                "description": "d", "license": "MIT", "repository": "r",
                "readme": "NO-SUCH-README.md", "keywords": ["pty"],
                "categories": ["parsing"], "rust_version": "1.95",
                "manifest_path": "/nonexistent/pty/Cargo.toml",
                "metadata": {"docs": {"rs": {"all-features": true}}},
                "dependencies": [{"name": "memchr", "req": "^2", "kind": null}]
            },
            {
                "name": "herd-tests", "version": "0.1.0", "publish": [],
                "manifest_path": "/nonexistent/tests/Cargo.toml", "metadata": null,
                "dependencies": [
                    {"name": "herd-pty", "req": "*", "kind": "dev"},
                    {"name": "herd-pty", "req": "^0.1.0", "kind": null}
                ]
            }
        ]
    });
    let crates = crates_from_metadata(&meta);
    assert!(crates[0].publishable);
    assert!(crates[0].has_docs_rs);
    assert_eq!(
        crates[0].readme,
        Some(("NO-SUCH-README.md".to_string(), false))
    );
    assert!(crates[0].internal.is_empty());
    assert!(!crates[1].publishable);
    assert!(!crates[1].has_docs_rs);
    assert_eq!(
        crates[1].internal,
        vec![("herd-pty".to_string(), "^0.1.0".to_string())]
    );
}

#[test]
fn the_workspace_publish_metadata_is_complete() {
    let crates = workspace_crates().expect("cargo metadata runs");
    let problems = check(&crates);
    let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert!(problems.is_empty(), "{}", lines.join("\n"));
    let names: Vec<String> = order(&crates)
        .expect("no cycle")
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names.len(), PUBLISHED.len(), "{names:?}");
}
