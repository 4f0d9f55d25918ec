//! Tests for reading the crates' production sources: module paths and test-only code.

use super::*;

#[test]
fn module_paths_follow_the_layout_and_test_files_are_left_out() {
    let roots = crate_roots("[[bin]]\nname = \"herd-shim\"\npath = \"src/shim_main.rs\"\n");
    let m = |p: &str| module_of(p, &roots);
    assert_eq!(m("lib.rs"), Some(vec![]));
    assert_eq!(m("shim_main.rs"), Some(vec![]));
    assert_eq!(m("registry.rs"), Some(vec!["registry".to_string()]));
    assert_eq!(
        m("registry/durable.rs"),
        Some(vec!["registry".to_string(), "durable".to_string()])
    );
    assert_eq!(m("sys/mod.rs"), Some(vec!["sys".to_string()]));
    assert_eq!(m("registry/tests.rs"), None);
    assert_eq!(m("registry/tests/spawn.rs"), None);
}

#[test]
fn test_only_attributes_are_recognised() {
    let attrs = |src: &str| syn::parse_str::<syn::ItemFn>(src).map(|f| f.attrs);
    for yes in [
        "#[cfg(test)] fn f() {}",
        "#[test] fn f() {}",
        "#[tokio::test] async fn f() {}",
        "#[cfg(all(unix, test))] fn f() {}",
    ] {
        assert!(is_test_only(&attrs(yes).expect("parses")), "{yes}");
    }
    for no in [
        "#[cfg(unix)] fn f() {}",
        "#[cfg(not(test))] fn f() {}",
        "#[cfg(any(test, unix))] fn f() {}",
        "fn f() {}",
    ] {
        assert!(!is_test_only(&attrs(no).expect("parses")), "{no}");
    }
}
