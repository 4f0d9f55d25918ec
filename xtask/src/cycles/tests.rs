//! Tests for the module-cycle check, on small crates written here, and on the workspace.

use super::*;

/// A crate from `(module path, source)` pairs.
fn files(modules: &[(&str, &str)]) -> Vec<SourceFile> {
    modules
        .iter()
        .map(|(module, text)| SourceFile {
            rel: if module.is_empty() {
                "src/lib.rs".to_string()
            } else {
                format!("src/{}.rs", module.replace("::", "/"))
            },
            module: module
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            text: (*text).to_string(),
            ast: syn::parse_file(text).expect("the fixture parses"),
        })
        .collect()
}

fn shown(krate: &str, modules: &[(&str, &str)]) -> Vec<String> {
    cycles(krate, &files(modules))
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn two_siblings_using_each_other_are_a_cycle_with_their_sites() {
    let found = shown(
        "herd-core",
        &[
            ("", "mod notify; mod registry;"),
            ("registry", "use crate::notify::Notifier;\nfn f() {}"),
            ("notify", "fn g() {\n    crate::registry::f();\n}"),
        ],
    );
    assert_eq!(
        found,
        [
            "herd-core: notify -> registry -> notify\n      notify -> registry: src/notify.rs:2: crate::registry::f\n      registry -> notify: src/registry.rs:1: crate::notify::Notifier"
        ]
    );
}

#[test]
fn uses_are_collapsed_to_siblings_at_each_level() {
    // registry::durable -> notify::queue and notify -> registry: a cycle between the
    // crate root's children, found through their grandchildren.
    let found = cycles(
        "c",
        &files(&[
            ("registry::durable", "use crate::notify::queue::Queue;"),
            ("notify::queue", "pub struct Queue;"),
            ("notify", "use super::registry::{self, durable};"),
        ]),
    );
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].key(), "c: {notify, registry}");
    // Inside registry: durable -> restore -> durable, through super:: and a macro.
    let found = cycles(
        "c",
        &files(&[
            ("registry", "fn root() {}"),
            (
                "registry::durable",
                "fn f() { let _ = format!(\"{}\", super::restore::X); }",
            ),
            (
                "registry::restore",
                "use super::super::registry::durable::*;",
            ),
        ]),
    );
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].path,
        [
            vec!["registry".to_string(), "durable".to_string()],
            vec!["registry".to_string(), "restore".to_string()],
            vec!["registry".to_string(), "durable".to_string()],
        ]
    );
}

#[test]
fn parents_children_tests_visibility_and_one_way_uses_are_no_cycle() {
    let found = shown(
        "c",
        &[
            ("", "mod a; mod b; use crate::a::X;"),
            // A child using its parent's items, and the parent using the child.
            (
                "a",
                "pub struct X; use self::inner::Y; mod inner { use super::X; pub struct Y; }",
            ),
            // One-way: b uses a.
            ("b", "use crate::a::X; pub(in crate::b) fn f() {}"),
            // a uses b only in test code and in a visibility path.
            (
                "a::more",
                "#[cfg(test)]\nmod tests { use crate::b::f; }\n#[cfg(test)]\nfn t() { crate::b::f(); }\npub(in crate::a) struct Z;",
            ),
        ],
    );
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn inline_modules_are_modules_and_a_knot_names_every_member() {
    // a <-> b and b <-> c: one knot of three, whose shortest circle through a is a, b.
    let found = shown(
        "c",
        &[(
            "",
            "mod a { pub fn f() { crate::b::g() } }\nmod b { pub fn g() { crate::a::f(); crate::c::h() } }\nmod c { pub fn h() { crate::b::g(); } }",
        )],
    );
    assert_eq!(found.len(), 1);
    assert!(
        found[0].starts_with("c: a -> b -> a (within a knot of a, b, c)\n"),
        "{}",
        found[0]
    );
}

#[test]
fn paths_inside_attributes_are_uses() {
    // args -> complete only through a clap attribute, complete -> args by a use.
    let found = shown(
        "herd-cli",
        &[
            ("", "mod args; mod complete;"),
            (
                "args",
                "struct A {\n    #[arg(add = ArgValueCandidates::new(crate::complete::sessions))]\n    id: String,\n}",
            ),
            ("complete", "use crate::args::Shell;\npub fn sessions() {}"),
        ],
    );
    assert_eq!(
        found,
        [
            "herd-cli: args -> complete -> args\n      args -> complete: src/args.rs:2: crate::complete::sessions\n      complete -> args: src/complete.rs:1: crate::args::Shell"
        ]
    );
    // A string that is a whole path, and items under a non-test cfg, count too; doc
    // text does not.
    let found = cycles(
        "c",
        &files(&[
            (
                "a",
                "#[derive(Deserialize)]\nstruct S {\n    #[serde(with = \"crate::b::hex\")]\n    x: u8,\n}",
            ),
            ("b", "#[cfg(target_os = \"linux\")]\nuse crate::a::S;"),
        ]),
    );
    assert_eq!(found.len(), 1, "{found:?}");
    let found = shown(
        "c",
        &[
            ("a", "/// See [`crate::b::f`].\npub fn g() {}"),
            ("b", "use crate::a::g;\npub fn f() {}"),
        ],
    );
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_production_module_with_a_path_attribute_is_refused() {
    let ast: syn::File = syn::parse_str("#[path = \"x.rs\"]\nmod y;").expect("parses");
    assert_eq!(
        crate::source::path_attributed_module(&ast.items).as_deref(),
        Some("y")
    );
    let ast: syn::File =
        syn::parse_str("#[cfg(test)]\n#[path = \"x.rs\"]\nmod y;\nmod z { mod w; }")
            .expect("parses");
    assert_eq!(crate::source::path_attributed_module(&ast.items), None);
}

#[test]
fn the_workspace_passes_the_cycle_check() {
    let root = crate::workspace_root().expect("xtask lives one level below the workspace root");
    let crates = crate::source::load_workspace(&root).expect("the crates parse");
    if let Err(e) = check(&crates) {
        panic!("{e:#}");
    }
}
