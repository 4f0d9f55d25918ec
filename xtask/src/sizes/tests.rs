//! Tests for the size check, on small sources written here, and on the workspace.

use super::*;

fn parse(src: &str) -> syn::File {
    syn::parse_file(src).expect("the fixture parses")
}

/// A function `name` whose body has `n_body` lines, so it is `n_body + 2` lines long.
fn function(name: &str, n_body: usize) -> String {
    let mut s = format!("fn {name}() {{\n");
    for i in 0..n_body {
        s.push_str(&format!("    let _x{i} = {i};\n"));
    }
    s.push_str("}\n");
    s
}

#[test]
fn a_function_over_the_limit_is_named_with_its_line_and_length() {
    let src = format!(
        "//! Doc.\n\n{}{}",
        function("short", 98),
        function("long", 99)
    );
    let found = oversizes("core/src/a.rs", &src, &parse(&src));
    assert_eq!(
        found.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["core/src/a.rs:103: fn long is 101 lines (limit 100)"]
    );
}

#[test]
fn methods_and_trait_defaults_are_named_by_their_owner_and_closures_count_in_their_fn() {
    let body: String = (0..100)
        .map(|i| format!("        let _x{i} = {i};\n"))
        .collect();
    let src = format!(
        "//! Doc.\nstruct S;\nimpl S {{\n    /// Doc lines do not count.\n    #[inline]\n    fn m(&self) {{\n        let c = || {{\n{body}        }};\n        c();\n    }}\n}}\ntrait T {{\n    fn d(&self) {{\n{body}    }}\n    fn required(&self);\n}}\n"
    );
    let m = measure(&src, &parse(&src));
    let names: Vec<(&str, usize, usize)> = m
        .fns
        .iter()
        .map(|(n, l, len)| (n.as_str(), *l, *len))
        .collect();
    assert_eq!(names, [("S::m", 6, 105), ("T::d", 113, 102)]);
}

#[test]
fn test_modules_count_toward_neither_limit() {
    let prod: String = (0..700)
        .map(|i| format!("const C{i}: u32 = {i};\n"))
        .collect();
    let test_body: String = (0..300)
        .map(|i| format!("    let _x{i} = {i};\n"))
        .collect();
    let src = format!(
        "//! Doc.\n{prod}#[cfg(test)]\nmod tests {{\n    #[test]\n    fn long() {{\n{test_body}    }}\n}}\n#[test]\nfn also_a_test() {{\n{test_body}}}\n"
    );
    let m = measure(&src, &parse(&src));
    assert_eq!(m.lines, 701);
    assert!(m.fns.is_empty(), "{:?}", m.fns);
    assert!(oversizes("core/src/a.rs", &src, &parse(&src)).is_empty());
}

#[test]
fn a_long_file_fails_unless_it_says_why_in_its_opening_doc() {
    let body: String = (0..801)
        .map(|i| format!("const C{i}: u32 = {i};\n"))
        .collect();
    let plain = format!("//! Doc.\n{body}");
    assert_eq!(
        oversizes("guards/src/t.rs", &plain, &parse(&plain)),
        [Oversize::File {
            path: "guards/src/t.rs".into(),
            lines: 802
        }]
    );
    let exempt = format!("//! Doc.\n//!\n//! Long by design: one row per tool.\n{body}");
    assert_eq!(
        measure(&exempt, &parse(&exempt)).long_by_design.as_deref(),
        Some("one row per tool.")
    );
    assert!(oversizes("guards/src/t.rs", &exempt, &parse(&exempt)).is_empty());
    // The line must be in the opening doc, and give a reason.
    for not_exempt in [
        format!("//! Doc.\n#![allow(dead_code)]\n//! Long by design: late.\n{body}"),
        format!("//! Doc.\n//! Long by design:\n{body}"),
    ] {
        assert_eq!(oversizes("a.rs", &not_exempt, &parse(&not_exempt)).len(), 1);
    }
}

#[test]
fn the_workspace_passes_the_size_check() {
    let root = crate::workspace_root().expect("xtask lives one level below the workspace root");
    let crates = crate::source::load_workspace(&root).expect("the crates parse");
    assert!(crates.iter().all(|c| !c.files.is_empty()));
    if let Err(e) = check(&crates) {
        panic!("{e:#}");
    }
}
