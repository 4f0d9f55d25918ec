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

#[test]
fn linux_names_are_found_behind_globs_renames_and_other_types() {
    let text = "use nix::sys::*;\nuse nix::sys::signalfd as sfd;\nuse libc::*;\nfn f(fd: i32) {\n    let _ = signalfd::SignalFd::new(&mask);\n    let _ = fcntl(fd, FcntlArg::F_SETPIPE_SZ(1));\n    let _ = OFlag::O_PATH;\n    let _ = unsafe { syscall(SYS_pidfd_open, 1, 0) };\n    let _ = crate::sys::pidfd_open(1);\n    let _ = unsafe { *__errno_location() };\n    let _ = dir.join(\"cgroup.procs\");\n    let _ = dir.join(\"cgroup.kill\");\n}\n";
    assert_eq!(
        found("core/src/x.rs", text),
        [
            "core/src/x.rs:2: nix::sys::signalfd (platform boundary)",
            "core/src/x.rs:5: signalfd::SignalFd::new (platform boundary)",
            "core/src/x.rs:6: FcntlArg::F_SETPIPE_SZ (platform boundary)",
            "core/src/x.rs:7: OFlag::O_PATH (platform boundary)",
            "core/src/x.rs:8: SYS_pidfd_open (platform boundary)",
            "core/src/x.rs:9: crate::sys::pidfd_open (platform boundary)",
            "core/src/x.rs:10: __errno_location (platform boundary)",
            "core/src/x.rs:11: cgroup.procs (platform boundary)",
            "core/src/x.rs:12: cgroup.kill (platform boundary)",
        ]
    );
    // Ordinary names and messages are not mechanisms.
    let plain = "use nix::poll::{PollFd, poll};\nfn f() {\n    let _ = \"cgroup.procs refused the job\";\n    let _ = \"/procedure\";\n    let _ = crate::sys::poll::wait_ready(&mut [], None);\n}\n";
    assert!(found("core/src/x.rs", plain).is_empty());
}

#[test]
fn a_sockets_peer_credentials_outside_sys_are_found() {
    // `SO_PEERCRED` is Linux's; tokio's portable `peer_cred` is not a mechanism.
    let text = "use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};\nfn f(s: &std::os::unix::net::UnixStream) {\n    let _ = nix::sys::socket::getsockopt(s, nix::sys::socket::sockopt::PeerCredentials);\n    let _ = libc::SO_PEERCRED;\n    let _ = s.peer_cred();\n}\n";
    assert_eq!(
        found("core/src/shim/x.rs", text),
        [
            "core/src/shim/x.rs:1: nix::sys::socket::sockopt::PeerCredentials (platform boundary)",
            "core/src/shim/x.rs:3: nix::sys::socket::sockopt::PeerCredentials (platform boundary)",
            "core/src/shim/x.rs:4: libc::SO_PEERCRED (platform boundary)",
        ]
    );
    assert!(found_in("core/src/sys/peer.rs", text).is_empty());
}

#[test]
fn a_new_file_naming_a_linux_mechanism_outside_sys_fails_the_check() {
    let krate = |files: Vec<SourceFile>| CrateSources { name: "c", files };
    let uses = "fn f() -> Option<String> { std::fs::read_to_string(\"/proc/self/stat\").ok() }";
    for rel in [
        "cli/src/commands/new.rs",
        "hooks/src/new.rs",
        "core/src/shim/new.rs",
    ] {
        let Err(error) = check(&[krate(vec![file(rel, uses)])]) else {
            panic!("{rel} names /proc outside sys and passed");
        };
        let error = format!("{error:#}");
        assert!(
            error.contains(&format!("{rel}:1: /proc/self/stat (platform boundary)")),
            "{error}"
        );
    }
    // The same in a sys module passes.
    for rel in [
        "cli/src/sys.rs",
        "hooks/src/sys/proc.rs",
        "core/src/sys/new.rs",
    ] {
        if let Err(error) = check(&[krate(vec![file(rel, uses)])]) {
            panic!("{rel} is inside sys and failed: {error:#}");
        }
    }
}

#[test]
fn no_file_is_known_outside_the_platform_boundary() {
    assert!(KNOWN.is_empty(), "{KNOWN:?}");
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
fn an_unranked_mutex_of_the_daemon_fails_the_lint_blocking_or_async() {
    // The daemon's files outside `cli/src/daemon/` are the daemon's too.
    let blocking = "use std::sync::{Mutex, OnceLock};\nstruct Log { state: Mutex<u8> }\n";
    assert_eq!(
        found("cli/src/daemon_log.rs", blocking),
        ["cli/src/daemon_log.rs:1: std::sync::Mutex (ranked mutex)"]
    );
    let awaited = "struct Link {\n    control: tokio::sync::Mutex<Option<u8>>,\n}\nfn f() -> Link {\n    Link { control: tokio::sync::Mutex::new(None) }\n}\n";
    assert_eq!(
        found("cli/src/daemon/hosts.rs", awaited),
        [
            "cli/src/daemon/hosts.rs:2: tokio::sync::Mutex (ranked mutex)",
            "cli/src/daemon/hosts.rs:5: tokio::sync::Mutex::new (ranked mutex)",
        ]
    );
    assert_eq!(
        found("core/src/shim/link/x.rs", "use tokio::sync::RwLock;\n"),
        ["core/src/shim/link/x.rs:1: tokio::sync::RwLock (ranked mutex)"]
    );
    // Ranked ones pass, and so do the client's (not the daemon's) plain mutexes.
    let ranked = "use herd_core::lock_order::{AsyncMutex, Mutex, rank};\nstruct Link { control: AsyncMutex<u8, { rank::DAEMON_HOST_CONTROL }>, book: Mutex<u8, { rank::DAEMON_HOST_BOOK }> }\n";
    assert!(found("cli/src/daemon/hosts.rs", ranked).is_empty());
    assert!(found("cli/src/mcp/x.rs", blocking).is_empty());
}

#[test]
fn a_leaf_crates_mutex_must_be_listed_as_innermost() {
    let text = "use std::sync::{Arc, Mutex};\n";
    assert_eq!(
        found("persistence/src/new_store.rs", text),
        ["persistence/src/new_store.rs:1: std::sync::Mutex (innermost mutex)"]
    );
    assert_eq!(
        found("hooks/src/x.rs", text),
        ["hooks/src/x.rs:1: std::sync::Mutex (innermost mutex)"]
    );
    assert!(found("persistence/src/receipts.rs", text).is_empty());
    assert!(found("hooks/src/loader/start.rs", text).is_empty());
}

#[test]
fn the_innermost_list_names_only_files_that_hold_a_mutex() {
    let root = crate::workspace_root().expect("xtask lives one level below the workspace root");
    for rel in INNERMOST {
        let text = std::fs::read_to_string(root.join(rel))
            .unwrap_or_else(|e| panic!("{rel} is listed in INNERMOST but cannot be read: {e}"));
        assert!(
            text.contains("Mutex"),
            "{rel} holds no mutex any more: remove it from INNERMOST and from lock_order.rs's doc"
        );
    }
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
