//! Tests for the boundary checks, on small files written here, and on the workspace.

use super::*;

fn file(rel: &str, text: &str) -> SourceFile {
    SourceFile {
        rel: rel.to_string(),
        module: Vec::new(),
        text: text.to_string(),
        ast: syn::parse_file(text).expect("the fixture parses"),
    }
}

fn found(rel: &str, text: &str) -> Vec<String> {
    findings(&file(rel, text))
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn linux_mechanisms_outside_sys_are_found_in_uses_code_macros_and_literals() {
    let text = "use nix::sys::signalfd::{SfdFlags, SignalFd};\nuse nix::poll::{PollFd, ppoll};\nfn f(pid: i32) {\n    let _ = unsafe { libc::syscall(libc::SYS_close_range, 3, 4, 0) };\n    let _ = std::fs::read(format!(\"/proc/{pid}/stat\"));\n    let _ = std::fs::read(\"/sys/fs/cgroup/unified\");\n    nix::sys::prctl::set_child_subreaper(true);\n}\n";
    let found = found("core/src/shim/x.rs", text);
    let expect = [
        "core/src/shim/x.rs:1: nix::sys::signalfd::SfdFlags (platform boundary)",
        "core/src/shim/x.rs:1: nix::sys::signalfd::SignalFd (platform boundary)",
        "core/src/shim/x.rs:2: nix::poll::ppoll (platform boundary)",
        "core/src/shim/x.rs:4: libc::SYS_close_range (platform boundary)",
        "core/src/shim/x.rs:4: libc::syscall (platform boundary)",
        "core/src/shim/x.rs:5: /proc/{pid}/stat (platform boundary)",
        "core/src/shim/x.rs:6: /sys/fs/cgroup/unified (platform boundary)",
        "core/src/shim/x.rs:7: nix::sys::prctl::set_child_subreaper (platform boundary)",
    ];
    assert_eq!(found, expect);
    // The same inside the crate's sys module, in test code, or in comments: none.
    assert!(found_in("core/src/sys.rs", text).is_empty());
    assert!(found_in("pty/src/sys/linux.rs", text).is_empty());
    let test_only = format!("#[cfg(test)]\nmod t {{\n{text}}}\n// read /proc/self/stat\n");
    assert!(found_in("core/src/shim/x.rs", &test_only).is_empty());
}

fn found_in(rel: &str, text: &str) -> Vec<String> {
    found(rel, text)
}

#[test]
fn std_mutex_in_core_is_refused_outside_lock_order() {
    let text =
        "use std::sync::{Arc, Mutex};\nfn f() -> std::sync::MutexGuard<'static, u8> { todo!() }\n";
    assert_eq!(
        found("core/src/registry/x.rs", text),
        [
            "core/src/registry/x.rs:1: std::sync::Mutex (ranked mutex)",
            "core/src/registry/x.rs:2: std::sync::MutexGuard (ranked mutex)",
        ]
    );
    assert!(found("cli/src/x.rs", text).is_empty());
    assert!(found("core/src/lock_order.rs", text).is_empty());
    // The daemon's mutexes are ranked too.
    assert_eq!(
        found("cli/src/daemon/hosts/x.rs", text),
        [
            "cli/src/daemon/hosts/x.rs:1: std::sync::Mutex (ranked mutex)",
            "cli/src/daemon/hosts/x.rs:2: std::sync::MutexGuard (ranked mutex)",
        ]
    );
}

#[test]
fn an_env_name_spelled_in_two_files_is_refused() {
    let krate = |files: Vec<SourceFile>| CrateSources { name: "c", files };
    let crates = [
        krate(vec![
            file(
                "guards/src/host.rs",
                "pub const SUPERVISED_CHILD_ENV: &str = \"HERD_SUPERVISED_CHILD\";",
            ),
            file(
                "guards/src/x.rs",
                "#[derive(clap::Args)]\nstruct A {\n    #[arg(env = \"HERD_OWNER\")]\n    o: String,\n}",
            ),
        ]),
        krate(vec![file(
            "core/src/spawn.rs",
            "fn f(env: &mut Vec<(String, String)>) {\n    env.push((\"HERD_SUPERVISED_CHILD\".into(), \"1\".into()));\n    let _ = std::env::var(\"HERD_OWNER\");\n}",
        )]),
    ];
    assert_eq!(
        env_names_spelled_twice(&crates),
        [
            "HERD_SUPERVISED_CHILD is spelled in core/src/spawn.rs, guards/src/host.rs (own env name): define one constant beside the code that reads it and use it everywhere"
        ]
    );
}

#[test]
fn the_workspace_passes_the_boundary_checks() {
    let root = crate::workspace_root().expect("xtask lives one level below the workspace root");
    let crates = crate::source::load_workspace(&root).expect("the crates parse");
    if let Err(e) = check(&crates) {
        panic!("{e:#}");
    }
}
