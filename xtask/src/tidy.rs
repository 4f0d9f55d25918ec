//! Tidy checks, written as ordinary tests so `cargo test` enforces them too:
//! every `.rs` file opens with a `//!` doc, no test is ignored or expects a panic,
//! no trailing whitespace, no literal temp-dir path in production code, and every
//! crate uses the workspace lints.

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    crate::workspace_root().expect("xtask lives one level below the workspace root")
}

fn files_with_ext(ext: &str) -> Vec<PathBuf> {
    crate::walk::files_with_ext(&root(), ext)
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn rel(path: &Path) -> String {
    crate::walk::rel(&root(), path)
}

/// Fails listing every offender, so one run shows them all.
fn report(what: &str, offenders: &[String]) {
    assert!(
        offenders.is_empty(),
        "{what}:\n  {}",
        offenders.join("\n  ")
    );
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let offenders: Vec<String> = files_with_ext("rs")
        .into_iter()
        .filter(|p| {
            let text = read(p);
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            !first.starts_with("//!")
        })
        .map(|p| rel(&p))
        .collect();
    report("files that do not open with a `//!` paragraph", &offenders);
}

#[test]
fn no_test_is_ignored_or_expects_a_panic() {
    // Spelled in pieces so this file does not flag itself.
    let banned = [concat!("#[", "ignore"), concat!("#[", "should_panic")];
    let mut offenders = Vec::new();
    for p in files_with_ext("rs") {
        for (n, line) in read(&p).lines().enumerate() {
            if banned.iter().any(|b| line.contains(b)) {
                offenders.push(format!("{}:{}: {}", rel(&p), n + 1, line.trim()));
            }
        }
    }
    report(
        "ignored or should_panic tests (assert today's behaviour and add a FIXME; match on the Err)",
        &offenders,
    );
}

#[test]
fn no_trailing_whitespace() {
    let mut offenders = Vec::new();
    for ext in ["rs", "toml"] {
        for p in files_with_ext(ext) {
            for (n, line) in read(&p).lines().enumerate() {
                if line.ends_with(' ') || line.ends_with('\t') {
                    offenders.push(format!("{}:{}", rel(&p), n + 1));
                }
            }
        }
    }
    report("lines with trailing whitespace", &offenders);
}

/// Production code: `src/` of a crate, but not unit-test files, benches or xtask.
fn is_production(path: &Path) -> bool {
    let r = rel(path);
    let parts: Vec<&str> = r.split('/').collect();
    parts.contains(&"src")
        && !parts.contains(&"tests")
        && !parts.contains(&"benches")
        && !parts.contains(&"testdata")
        && parts.first() != Some(&"xtask")
        && parts.first() != Some(&"tests")
        && !r.ends_with("/tests.rs")
}

#[test]
fn no_literal_temp_dir_in_production_code() {
    let needle = concat!("\"/", "tmp");
    let mut offenders = Vec::new();
    for p in files_with_ext("rs")
        .into_iter()
        .filter(|p| is_production(p))
    {
        for (n, line) in read(&p).lines().enumerate() {
            if line.contains(needle) {
                offenders.push(format!("{}:{}: {}", rel(&p), n + 1, line.trim()));
            }
        }
    }
    report(
        "literal temp-dir paths in production code (use the home's scratch dir or std::env::temp_dir())",
        &offenders,
    );
}

#[test]
fn every_crate_uses_the_workspace_lints() {
    let offenders: Vec<String> = files_with_ext("toml")
        .into_iter()
        .filter(|p| {
            p.file_name().is_some_and(|n| n == "Cargo.toml") && *p != root().join("Cargo.toml")
        })
        .filter(|p| {
            let text = read(p);
            let compact: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            !compact.contains("[lints] workspace = true")
        })
        .map(|p| rel(&p))
        .collect();
    report("crates without `[lints] workspace = true`", &offenders);
}

#[test]
fn production_detection_matches_the_layout() {
    let r = root();
    assert!(is_production(&r.join("core/src/registry.rs")));
    assert!(!is_production(&r.join("core/src/registry/tests.rs")));
    assert!(!is_production(&r.join("core/tests/it/main.rs")));
    assert!(!is_production(&r.join("xtask/src/main.rs")));
}
