//! A home nobody else can steer: every component of the home's path, the
//! config and a configured `shim_path` must be the user's or root's and not writable
//! by others (OpenSSH's StrictModes rule), a symbolic link of another user is never
//! followed, and a second real uid swapping a link between root's home and her own
//! directory never gets her program run.
//!
//! These need root (to own files as another uid and to run the attacker as one):
//! without root they are skipped with a note, and under `HERD_REQUIRE_ROOT=1`
//! (`.ci/run` sets it; CI runs as root) they fail instead.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{Env, raw_command, stderr};

/// The other user: `nobody`.
const OTHER_UID: u32 = 65_534;

/// Whether the test can run: root. A failure under `HERD_REQUIRE_ROOT=1`.
#[expect(
    clippy::print_stderr,
    reason = "a skipped root test says so and what it needs"
)]
fn root_or_skip(test: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(
        std::env::var("HERD_REQUIRE_ROOT").as_deref() != Ok("1"),
        "HERD_REQUIRE_ROOT=1 but {test} runs as uid {}, not root",
        nix::unistd::geteuid()
    );
    eprintln!("skipping {test}: it needs root (to act as a second uid)");
    false
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

fn give_to_other(path: &Path) {
    std::os::unix::fs::lchown(path, Some(OTHER_UID), Some(OTHER_UID))
        .unwrap_or_else(|e| panic!("lchown {}: {e}", path.display()));
}

/// The layout of the attack: `<scratch>/shared` is a sticky directory anyone can
/// write (as `/tmp`), holding root's real home and the other user's directory,
/// whose `config.toml` names her script as `shim_path`; the script would leave
/// `<scratch>/marker` if it ever ran.
struct Shared {
    env: Env,
    shared: PathBuf,
    roots: PathBuf,
    hers: PathBuf,
    marker: PathBuf,
}

impl Shared {
    fn new() -> Shared {
        let env = Env::new();
        chmod(env.scratch(), 0o755);
        let shared = env.scratch().join("shared");
        std::fs::create_dir(&shared).expect("mkdir");
        chmod(&shared, 0o1777);
        let roots = shared.join("roots-home");
        std::fs::create_dir(&roots).expect("mkdir");
        chmod(&roots, 0o700);
        let hers = shared.join("hers");
        std::fs::create_dir(&hers).expect("mkdir");
        let marker = env.scratch().join("marker");
        let script = hers.join("shim.sh");
        std::fs::write(&script, format!("#!/bin/sh\ntouch {}\n", marker.display())).expect("write");
        chmod(&script, 0o755);
        std::fs::write(
            hers.join("config.toml"),
            format!("shim_path = \"{}\"\n", script.display()),
        )
        .expect("write");
        for path in [&hers, &script, &hers.join("config.toml")] {
            give_to_other(path);
        }
        Shared {
            env,
            shared,
            roots,
            hers,
            marker,
        }
    }

    /// `herd ARGS` with `HERD_HOME=home`.
    fn herd(&self, home: &Path, args: &[&str]) -> Output {
        self.env
            .cmd(args)
            .env("HERD_HOME", home)
            .output()
            .expect("herd runs")
    }
}

/// Asserts `out` is the refusal of `path` (exit 2) and its text holds `words`.
fn assert_refused(out: &Output, path: &Path, words: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "not refused: {err}");
    assert!(
        err.contains(&format!("refusing {} (", path.display())),
        "the refusal names {}: {err}",
        path.display()
    );
    for word in words {
        assert!(err.contains(word), "the refusal says {word:?}: {err}");
    }
}

#[test]
fn b4_a_foreign_symlink_or_a_component_others_can_write_in_the_home_path_is_refused() {
    if !root_or_skip("the home path test") {
        return;
    }
    let s = Shared::new();
    // Her link in the shared directory, pointing at root's own home: refused, and
    // nothing is written into root's home through it.
    let link = s.shared.join("link");
    std::os::unix::fs::symlink(&s.roots, &link).expect("symlink");
    give_to_other(&link);
    let out = s.herd(&link, &["ps"]);
    assert_refused(
        &out,
        &link,
        &[
            "symbolic link owned by another user",
            "owner uid 65534",
            "remove it",
        ],
    );
    assert_eq!(
        std::fs::read_dir(&s.roots).expect("readable").count(),
        0,
        "nothing was written into root's home"
    );
    // The same link owned by root is followed: the exception is for the user's own
    // entries in a sticky root directory, and herd works in the real home.
    std::os::unix::fs::lchown(&link, Some(0), Some(0)).expect("lchown");
    let home = s.herd(&link, &["ps", "--json"]);
    assert!(home.status.success(), "{}", stderr(&home));
    assert!(
        s.roots.join("run/herd.sock").exists(),
        "served from the real home"
    );
    let _ = s.herd(&link, &["shutdown", "--yes"]);
    // A component writable by everyone (not sticky), and one writable by a group
    // with other members (nobody's primary group), are refused with the fix.
    let open = s.env.scratch().join("open");
    std::fs::create_dir_all(open.join("home")).expect("mkdir");
    chmod(&open, 0o777);
    let out = s.herd(&open.join("home"), &["ps"]);
    assert_refused(
        &out,
        &open,
        &["writable by everyone", "mode 777", "chmod go-w"],
    );
    chmod(&open, 0o775);
    std::os::unix::fs::chown(&open, Some(0), Some(OTHER_UID)).expect("chown");
    let out = s.herd(&open.join("home"), &["ps"]);
    assert_refused(&out, &open, &["writable by its group", "chmod go-w"]);
    // A shim_path in a directory others can write is refused before any daemon
    // starts, and her script never runs.
    chmod(&open, 0o777);
    let script = open.join("shim.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ntouch {}\n", s.marker.display()),
    )
    .expect("write");
    chmod(&script, 0o755);
    std::fs::write(
        s.env.home().join("config.toml"),
        format!("shim_path = \"{}\"\n", script.display()),
    )
    .expect("write");
    let out = s.herd(s.env.home(), &["run", "--", "true"]);
    assert_refused(&out, &open, &["writable by everyone"]);
    assert!(!s.marker.exists(), "her shim never ran");
    let _ = s.hers;
}

#[test]
fn b4_a_second_uid_swapping_the_home_link_never_gets_her_shim_run() {
    if !root_or_skip("the home link race") {
        return;
    }
    let s = Shared::new();
    let link = s.shared.join("link");
    // She flips her link between root's real home and her own directory as fast as
    // she can, with rename(2), so the link always exists.
    let flip = format!(
        "while :; do ln -sfn {roots} {shared}/next && mv -Tf {shared}/next {link}; \
         ln -sfn {hers} {shared}/next && mv -Tf {shared}/next {link}; done",
        roots = s.roots.display(),
        hers = s.hers.display(),
        shared = s.shared.display(),
        link = link.display()
    );
    let mut attacker = raw_command(Path::new("sh"))
        .args(["-c", &flip])
        .uid(OTHER_UID)
        .gid(OTHER_UID)
        .spawn()
        .expect("the attacker runs as uid 65534");
    crate::support::wait_until(std::time::Duration::from_secs(10), || link.exists())
        .expect("her link exists");
    let tries = 300;
    let mut refused = 0;
    for _ in 0..tries {
        let out = s.herd(&link, &["run", "--", "true"]);
        if out.status.code() == Some(2)
            && stderr(&out).contains("symbolic link owned by another user")
        {
            refused += 1;
        }
    }
    let _ = attacker.kill();
    let _ = attacker.wait();
    let _ = s.herd(&s.roots, &["shutdown", "--yes"]);
    assert!(!s.marker.exists(), "her shim ran as root");
    assert_eq!(
        refused, tries,
        "every try is refused at her link, whichever way it points"
    );
}

#[test]
fn b4_a_configured_shim_is_run_through_the_descriptor_the_daemon_checked() {
    let env = Env::new();
    // shim_path is a link of the user's own to the real herd-shim; once the daemon
    // has checked and opened it, the link is pointed at a script that would leave a
    // marker. Jobs still run under the real shim, through the daemon's descriptor.
    let bin = env.scratch().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let link = bin.join("herd-shim");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_herd-shim"), &link).expect("symlink");
    let marker = env.scratch().join("marker");
    let script = bin.join("evil.sh");
    std::fs::write(&script, format!("#!/bin/sh\ntouch {}\n", marker.display())).expect("write");
    chmod(&script, 0o755);
    std::fs::write(
        env.home().join("config.toml"),
        format!("shim_path = \"{}\"\n", link.display()),
    )
    .expect("write");
    env.json(&["ps", "--json"]);
    let daemon = env.daemon_pid().expect("the daemon wrote its pid file");
    std::fs::remove_file(&link).expect("unlink");
    std::os::unix::fs::symlink(&script, &link).expect("symlink");
    let info = env.json(&["run", "--json", "--", "echo through-the-fd"]);
    let id = info["session_id"].as_str().expect("session_id").to_owned();
    env.ok(&["wait", &id, "--timeout", "10"]);
    assert_eq!(env.ok(&["logs", &id]), "through-the-fd\n");
    assert!(!marker.exists(), "the swapped-in script ran");
    // The launcher (it lives as long as the daemon) was executed through the
    // daemon's descriptor, not the path.
    let prefix = format!("/proc/{daemon}/fd/");
    let launchers = herd_test_support::procs::pids()
        .filter_map(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).ok())
        .map(|cmdline| String::from_utf8_lossy(&cmdline).into_owned())
        .filter(|cmdline| cmdline.starts_with(&prefix) && cmdline.contains("--launcher"))
        .count();
    assert!(launchers > 0, "no launcher runs as {prefix}N");
}

#[test]
fn b4_a_plugin_file_others_can_write_is_refused_before_any_daemon_starts() {
    let env = Env::new();
    let plugin = env.home().join("plugins").join("p");
    std::fs::create_dir_all(&plugin).expect("mkdir");
    let manifest = plugin.join("plugin.toml");
    std::fs::write(&manifest, "name = \"p\"\n").expect("write");
    chmod(&manifest, 0o666);
    let out = env.run(&["ps"]);
    assert_refused(&out, &manifest, &["writable by everyone", "chmod go-w"]);
    assert!(env.daemon_pid().is_none(), "no daemon started");
    chmod(&manifest, 0o644);
    env.ok(&["ps"]);
}
