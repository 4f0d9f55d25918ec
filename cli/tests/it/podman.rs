//! A container door tested for real: podman driven through the same
//! `exec -i` argv as a Docker door (`docker exec -i ctr herd proxy`).
//!
//! [`image`] builds a small local image with no registry, once per test binary
//! run and cached by content hash (`herd-it:<hash>`): `podman import` of a root
//! filesystem holding the `herd` and `herd-shim` under test (in
//! `/usr/local/bin`), the libraries `ldd` names for them and for `getconf` (the
//! install probe asks it for the far glibc) and for `bash` (herd's default
//! shell for jobs), a static busybox (Debian's
//! `busybox-static`) as `/bin/sh` and every other tool, and an empty `/opt/herd`
//! for `herd hosts install` to fill. [`Container`] runs one with `--init`
//! (catatonit as pid 1 reaps a SIGKILLed far daemon) and a host scratch dir
//! bound at `/scratch` (the tests' markers).
//!
//! The runtime is runc, named on every podman command (`--runtime runc`): crun
//! fails on this machine's hybrid cgroup layout (cgroup v2 at
//! /sys/fs/cgroup/unified, v1 controllers beside it). `--cgroup-manager
//! cgroupfs` because no systemd runs here to manage scopes. Resource limits are
//! given explicitly ([`ulimits`]): podman's defaults raise RLIMIT_NOFILE and
//! RLIMIT_NPROC, which a root without CAP_SYS_RESOURCE (this machine's) may not,
//! and runc then fails with `error setting rlimit type 7: operation not
//! permitted` (type 6 for nproc). Even nproc at this process's own hard limit was
//! refused here (65536 and up refused, 32768 taken), so both are capped at 4096
//! and at the hard limit, whichever is lower. No `--cgroups=disabled` was needed.
//!
//! `.ci/run` installs `podman`, `runc`, `catatonit` and `busybox-static` and sets
//! `HERD_REQUIRE_PODMAN=1`; without podman a test says why on stderr and passes,
//! and under `HERD_REQUIRE_PODMAN=1` it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::hosts::{completions_of, processes, sigkill};
use crate::sshd::configure;
use crate::support::{Env, HERD, raw_command, stderr, stdout, wait_until};

/// Generous: CI runs on two busy cores and a door opens in about half a second.
const DEADLINE: Duration = Duration::from_secs(60);

/// The image's repository; its tag is the content hash.
const REPOSITORY: &str = "herd-it";

/// Changes when the layout below changes (it is part of the hash).
const LAYOUT: &str = "herd-it image layout 2";

/// The static busybox Debian's `busybox-static` installs.
const BUSYBOX: &str = "/bin/busybox";

/// Where the install probe's `getconf` comes from.
const GETCONF: &str = "/usr/bin/getconf";

/// herd's default shell (`bash -c`) for the jobs, with the libraries it needs.
const BASH: &str = "/bin/bash";

/// The global podman options every command here starts with.
fn podman() -> Command {
    let mut command = raw_command(Path::new("podman"));
    command.args(["--runtime", "runc", "--cgroup-manager", "cgroupfs"]);
    command.stdin(Stdio::null());
    command
}

/// The argv prefix of a door into container `name`: `podman … exec -i NAME`,
/// the shape of `docker exec -i NAME`.
fn exec_i(name: &str) -> Vec<String> {
    [
        "podman",
        "--runtime",
        "runc",
        "--cgroup-manager",
        "cgroupfs",
        "exec",
        "-i",
        name,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

#[expect(
    clippy::print_stderr,
    reason = "a skipped podman test says so and what to install"
)]
fn skipped(why: &str) {
    if std::env::var("HERD_REQUIRE_PODMAN").as_deref() == Ok("1") {
        panic!("HERD_REQUIRE_PODMAN=1 but {why}");
    }
    eprintln!("skipped: {why}");
}

/// Runs `command`, its stdout on success, its words on failure.
fn output(mut command: Command) -> Result<String, String> {
    let out = command
        .output()
        .map_err(|e| format!("{command:?} did not start: {e}"))?;
    if out.status.success() {
        Ok(stdout(&out))
    } else {
        Err(format!(
            "{command:?} failed ({}): {}",
            out.status,
            stderr(&out).trim()
        ))
    }
}

/// The shared libraries (and the loader) `ldd` names for `binary`.
fn libraries(binary: &Path) -> Result<Vec<PathBuf>, String> {
    let mut ldd = raw_command(Path::new("ldd"));
    ldd.arg(binary);
    let text = output(ldd)?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let path = match line.split_once("=>") {
                Some((_, right)) => right.split_whitespace().next()?,
                None => line.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect())
}

/// Copies `from` to the same absolute path under `root` (symlinks followed).
fn place(root: &Path, from: &Path, to: &str) -> Result<(), String> {
    let target = root.join(to.trim_start_matches('/'));
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("mkdir {parent:?}: {e}"))?;
    }
    std::fs::copy(from, &target).map_err(|e| format!("copy {from:?} to {target:?}: {e}"))?;
    Ok(())
}

/// Every file the image holds: (source here, path in the image).
fn contents() -> Result<Vec<(PathBuf, String)>, String> {
    let shim = Path::new(HERD).with_file_name("herd-shim");
    let mut files = vec![
        (PathBuf::from(HERD), "/usr/local/bin/herd".to_owned()),
        (shim.clone(), "/usr/local/bin/herd-shim".to_owned()),
        (PathBuf::from(BUSYBOX), "/bin/busybox".to_owned()),
        (PathBuf::from(GETCONF), "/usr/bin/getconf".to_owned()),
        (PathBuf::from(BASH), "/bin/bash".to_owned()),
    ];
    for binary in [Path::new(HERD), &shim, Path::new(GETCONF), Path::new(BASH)] {
        for library in libraries(binary)? {
            let inside = library.display().to_string();
            if !files.iter().any(|(_, at)| *at == inside) {
                files.push((library, inside));
            }
        }
    }
    Ok(files)
}

/// The content hash of `files` and the layout: `sha256sum` of each, then of
/// that listing.
fn content_hash(files: &[(PathBuf, String)]) -> Result<String, String> {
    let mut each = raw_command(Path::new("sha256sum"));
    each.args(files.iter().map(|(from, _)| from));
    let sums: Vec<String> = output(each)?
        .lines()
        .zip(files)
        .map(|(line, (_, at))| format!("{} {at}", line.split(' ').next().unwrap_or("")))
        .collect();
    let listing = format!("{LAYOUT}\n{}\n", sums.join("\n"));
    let mut all = raw_command(Path::new("sha256sum"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("sha256sum: {e}"))?;
    use std::io::Write;
    all.stdin
        .take()
        .ok_or("sha256sum's stdin")?
        .write_all(listing.as_bytes())
        .map_err(|e| format!("sha256sum: {e}"))?;
    let out = all
        .wait_with_output()
        .map_err(|e| format!("sha256sum: {e}"))?;
    Ok(stdout(&out).chars().take(16).collect())
}

/// Builds the root filesystem of `files` in `root`.
fn root_filesystem(root: &Path, files: &[(PathBuf, String)]) -> Result<(), String> {
    for (from, to) in files {
        place(root, from, to)?;
    }
    let mut applets = raw_command(Path::new(BUSYBOX));
    applets.arg("--list");
    for applet in output(applets)?.lines().filter(|a| *a != "busybox") {
        let link = root.join("bin").join(applet);
        if !link.exists() {
            std::os::unix::fs::symlink("busybox", &link)
                .map_err(|e| format!("symlink {link:?}: {e}"))?;
        }
    }
    for dir in [
        "opt/herd", "root", "tmp", "scratch", "proc", "sys", "dev", "etc",
    ] {
        std::fs::create_dir_all(root.join(dir)).map_err(|e| format!("mkdir {dir}: {e}"))?;
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(root.join("tmp"), std::fs::Permissions::from_mode(0o1777))
        .map_err(|e| format!("chmod tmp: {e}"))?;
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n",
    )
    .map_err(|e| format!("etc/passwd: {e}"))?;
    std::fs::write(root.join("etc/group"), "root:x:0:\nnogroup:x:65534:\n")
        .map_err(|e| format!("etc/group: {e}"))?;
    Ok(())
}

/// `herd-it:<hash>`, imported now unless an image of that hash exists; older
/// `herd-it` images are removed (one in use by a running container stays).
fn build_image() -> Result<String, String> {
    let mut version = podman();
    version.arg("--version");
    output(version)
        .map_err(|e| format!("podman is not usable ({e}); apt-get install podman runc"))?;
    for needed in [BUSYBOX, GETCONF, BASH] {
        if !Path::new(needed).is_file() {
            return Err(format!(
                "{needed} is missing (apt-get install busybox-static libc-bin)"
            ));
        }
    }
    let files = contents()?;
    let tag = format!("{REPOSITORY}:{}", content_hash(&files)?);
    let mut exists = podman();
    exists.args(["image", "exists", &tag]);
    if output(exists).is_err() {
        let dir = tempfile::Builder::new()
            .prefix("herd-it-rootfs")
            .tempdir()
            .map_err(|e| format!("a temp dir: {e}"))?;
        root_filesystem(dir.path(), &files)?;
        let mut tar = raw_command(Path::new("tar"))
            .arg("-C")
            .arg(dir.path())
            .args(["-c", "."])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("tar: {e}"))?;
        let mut import = podman();
        import
            .args(["import", "-q", "-", &tag])
            .stdin(tar.stdout.take().ok_or("tar's stdout")?);
        let imported = output(import);
        let _ = tar.wait();
        imported?;
    }
    let mut images = podman();
    images.args(["images", "--format", "{{.Repository}}:{{.Tag}}"]);
    let stale: Vec<String> = output(images)?
        .lines()
        .filter(|t| t.contains(&format!("/{REPOSITORY}:")))
        .filter(|t| !t.ends_with(&tag))
        .map(str::to_owned)
        .collect();
    if !stale.is_empty() {
        let mut remove = podman();
        remove
            .arg("rmi")
            .args(&stale)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _ = remove.status();
    }
    Ok(tag)
}

/// The image, built once per test binary run.
fn image() -> Result<String, String> {
    static IMAGE: OnceLock<Result<String, String>> = OnceLock::new();
    IMAGE.get_or_init(build_image).clone()
}

/// `--ulimit` values at or below this process's own hard limits.
fn ulimits() -> [String; 2] {
    use nix::sys::resource::{Resource, getrlimit};
    let at_most = |resource, cap: u64| {
        let hard = getrlimit(resource).map(|(_, hard)| hard).unwrap_or(cap);
        hard.min(cap)
    };
    let files = at_most(Resource::RLIMIT_NOFILE, 4096);
    let procs = at_most(Resource::RLIMIT_NPROC, 4096);
    [
        format!("nofile={files}:{files}"),
        format!("nproc={procs}:{procs}"),
    ]
}

/// A running container of [`image`], removed when dropped.
pub(crate) struct Container {
    name: String,
    scratch: tempfile::TempDir,
}

impl Container {
    /// Starts one, or says why not: `None` (with a note on stderr) when podman is
    /// not usable, a panic under `HERD_REQUIRE_PODMAN=1`.
    pub(crate) fn start() -> Option<Container> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let tag = match image() {
            Ok(tag) => tag,
            Err(why) => {
                skipped(&why);
                return None;
            }
        };
        remove_orphans();
        let scratch = tempfile::Builder::new()
            .prefix("herd-it-scratch")
            .tempdir()
            .expect("the temp dir is writable");
        let name = format!(
            "herd-it-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let [files, procs] = ulimits();
        let mut run = podman();
        run.args(["run", "-d", "--init", "--name", &name])
            .args(["--ulimit", &files, "--ulimit", &procs, "-v"])
            .arg(format!("{}:/scratch", scratch.path().display()))
            .args([&tag, "/bin/sleep", "100000"]);
        if let Err(why) = output(run) {
            skipped(&format!("a container of {tag} did not start: {why}"));
            return None;
        }
        Some(Container { name, scratch })
    }

    /// The argv prefix of a door into this container (`podman … exec -i NAME`).
    pub(crate) fn door(&self) -> Vec<String> {
        exec_i(&self.name)
    }

    /// The host directory bound at `/scratch` inside.
    pub(crate) fn scratch(&self) -> &Path {
        self.scratch.path()
    }

    /// Runs `argv` in the container (no stdin) and returns its stdout.
    pub(crate) fn exec(&self, argv: &[&str]) -> String {
        let mut exec = podman();
        exec.args(["exec", &self.name]).args(argv);
        output(exec).unwrap_or_else(|why| panic!("{why}"))
    }

    /// Pids (here) of the `podman exec -i` doors into this container.
    pub(crate) fn doors(&self) -> Vec<i32> {
        let wanted = format!("exec -i {} ", self.name);
        processes()
            .into_iter()
            .filter(|(_, line)| line.starts_with("podman ") && line.contains(&wanted))
            .map(|(pid, _)| pid)
            .collect()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let mut remove = podman();
        remove
            .args(["rm", "-f", "-t", "0", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _ = remove.status();
    }
}

/// Removes containers of test processes that no longer run (killed before
/// their `Drop`).
fn remove_orphans() {
    let mut list = podman();
    list.args(["ps", "-a", "--format", "{{.Names}}"]);
    let Ok(names) = output(list) else { return };
    for name in names.lines() {
        let Some(pid) = name
            .strip_prefix("herd-it-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        if !crate::support::alive(pid) {
            let mut remove = podman();
            remove
                .args(["rm", "-f", "-t", "0", name])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let _ = remove.status();
        }
    }
}

/// Collects events until `id` completed; panics with what came otherwise.
fn until_completed(near: &Env, seen: &mut Vec<Value>, id: &str) {
    let found = wait_until(DEADLINE, || {
        seen.extend(crate::hosts::events_of(near));
        !completions_of(seen, id).is_empty()
    });
    assert!(found.is_ok(), "no completion of {id} arrived: {seen:?}");
}

/// The far home inside the container (the doors name it: `env HERD_HOME=…`).
const FAR_HOME: &str = "/var/herd";

/// The far daemon's pid inside the container, from its pid file.
fn far_daemon(container: &Container) -> String {
    container
        .exec(&["cat", &format!("{FAR_HOME}/run/herd.pid")])
        .trim()
        .to_owned()
}

/// `door` followed by `env HERD_HOME=FAR_HOME herd proxy` with `herd` as given.
fn proxy_door(container: &Container, herd: &str) -> Vec<String> {
    let mut argv = container.door();
    argv.extend([
        "env".to_owned(),
        format!("HERD_HOME={FAR_HOME}"),
        herd.to_owned(),
        "proxy".to_owned(),
    ]);
    argv
}

#[test]
fn podman_door_install_run_kill_and_a_far_daemon_sigkill() {
    // A container door (podman as `docker exec -i`): `hosts install`
    // puts herd and herd-shim into an empty /opt/herd through the door, `hosts
    // check` passes with crash survival; a far job runs, a far kill kills it; a
    // SIGKILL of the far daemon under a notified job keeps every line, one
    // completion and the real exit code.
    let Some(container) = Container::start() else {
        return;
    };
    let near = Env::new();
    let mut install = container.door();
    install.extend([
        "sh".to_owned(),
        "-c".to_owned(),
        "cat > /opt/herd/herd.new && chmod +x /opt/herd/herd.new && mv /opt/herd/herd.new /opt/herd/herd"
            .to_owned(),
    ]);
    configure(
        &near,
        &proxy_door(&container, "/opt/herd/herd"),
        Some(&install),
    );

    let before = near.run(&["hosts", "check", "far"]);
    assert_eq!(before.status.code(), Some(3), "{before:?}");
    assert!(
        stderr(&before).contains("herd hosts install far"),
        "{before:?}"
    );
    let installed = near.json(&["hosts", "install", "far", "--json"]);
    assert_eq!(installed["installed"], true, "{installed}");
    assert_eq!(installed["shim"], true, "{installed}");
    let sums = container.exec(&["sha256sum", "/opt/herd/herd", "/opt/herd/herd-shim"]);
    let mut here = raw_command(Path::new("sha256sum"));
    here.arg(HERD)
        .arg(Path::new(HERD).with_file_name("herd-shim"));
    let here = output(here).expect("sha256sum runs");
    let digests = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect()
    };
    assert_eq!(
        digests(&sums),
        digests(&here),
        "the far binaries are these, byte for byte"
    );
    let check = near.json(&["hosts", "check", "far", "--json"]);
    assert_eq!(check["reachable"], true, "{check}");
    assert_eq!(check["crash_survival"], true, "{check}");
    assert_eq!(check["far"]["home"], FAR_HOME, "{check}");

    // Run, then kill.
    let sleeper = near
        .ok(&[
            "run",
            "--host",
            "far",
            "--notify",
            "--",
            "echo up; exec sleep 300",
        ])
        .trim()
        .to_owned();
    assert!(sleeper.starts_with("far:proc_"), "{sleeper}");
    assert!(wait_until(DEADLINE, || near.ok(&["logs", &sleeper]).contains("up")).is_ok());
    near.ok(&["kill", &sleeper]);
    let mut seen = Vec::new();
    until_completed(&near, &mut seen, &sleeper);
    let polled = near.json(&["poll", &sleeper, "--json"]);
    assert_eq!(polled["completion_reason"], "killed", "{polled}");
    assert_eq!(polled["termination_source"], "process_kill", "{polled}");

    // A far daemon SIGKILL under a notified job.
    let script = "for i in $(seq 1 20); do echo line $i; done; \
         while [ ! -e /scratch/go ]; do sleep 0.05; done; \
         for i in $(seq 21 40); do echo line $i; done; exit 12";
    let id = near
        .ok(&["run", "--host", "far", "--notify", "--", script])
        .trim()
        .to_owned();
    assert!(
        wait_until(DEADLINE, || near.ok(&["logs", &id]).contains("line 20")).is_ok(),
        "the far job never printed its first lines"
    );
    let daemon = far_daemon(&container);
    container.exec(&["kill", "-9", &daemon]);
    assert!(
        wait_until(DEADLINE, || container
            .exec(&[
                "sh",
                "-c",
                &format!("kill -0 {daemon} 2>/dev/null && echo alive || true")
            ])
            .trim()
            .is_empty())
        .is_ok(),
        "the far daemon outlived SIGKILL"
    );
    std::fs::write(container.scratch().join("go"), b"").expect("the scratch dir is writable");
    until_completed(&near, &mut seen, &id);
    let completions = completions_of(&seen, &id);
    assert_eq!(completions.len(), 1, "{seen:?}");
    assert_eq!(completions[0]["exit_code"], 12, "{seen:?}");
    let wanted: Vec<String> = (1..=40).map(|i| format!("line {i}")).collect();
    assert_eq!(near.ok(&["logs", &id]).lines().collect::<Vec<_>>(), wanted);
    let second = near
        .ok(&["run", "--host", "far", "--notify", "--", "true"])
        .trim()
        .to_owned();
    let mut later = Vec::new();
    until_completed(&near, &mut later, &second);
    assert!(completions_of(&later, &id).is_empty(), "{later:?}");
    assert!(completions_of(&later, &sleeper).is_empty(), "{later:?}");
}

#[test]
fn podman_door_killed_under_a_running_job_completes_once() {
    // The image's own herd (`exec -i CTR herd proxy`, found on PATH as
    // a Docker door would), a far job running while every `podman exec` door is
    // SIGKILLed: `logs -f` gets all of it, `wait` the real code, and the
    // completion arrives exactly once.
    let Some(container) = Container::start() else {
        return;
    };
    let near = Env::new();
    configure(&near, &proxy_door(&container, "herd"), None);
    let id = near
        .ok(&[
            "run",
            "--host",
            "far",
            "--notify",
            "--",
            "echo in-a-container; while [ ! -e /scratch/go ]; do sleep 0.05; done; echo done; exit 7",
        ])
        .trim()
        .to_owned();
    assert!(id.starts_with("far:proc_"), "{id}");
    assert!(
        wait_until(DEADLINE, || near
            .ok(&["logs", &id])
            .contains("in-a-container"))
        .is_ok()
    );
    assert!(wait_until(DEADLINE, || !container.doors().is_empty()).is_ok());
    let killed = container.doors();
    for pid in &killed {
        sigkill(*pid);
    }
    std::fs::write(container.scratch().join("go"), b"").expect("the scratch dir is writable");
    let followed = near.run(&["logs", "-f", &id]);
    assert_eq!(
        followed.status.code(),
        Some(1),
        "the job failed: {followed:?}"
    );
    assert_eq!(
        stdout(&followed),
        "in-a-container\ndone\n",
        "{followed:?}; the log: {}",
        near.ok(&["logs", &id])
    );
    let waited = near.run(&["wait", &id]);
    assert_eq!(waited.status.code(), Some(1), "{waited:?}");
    let mut seen = Vec::new();
    until_completed(&near, &mut seen, &id);
    let completions = completions_of(&seen, &id);
    assert_eq!(completions.len(), 1, "{seen:?}");
    assert_eq!(completions[0]["exit_code"], 7, "{seen:?}");
    assert!(
        container.doors().iter().all(|pid| !killed.contains(pid)),
        "new doors replaced the killed ones"
    );
    let second = near
        .ok(&["run", "--host", "far", "--notify", "--", "true"])
        .trim()
        .to_owned();
    let mut later = Vec::new();
    until_completed(&near, &mut later, &second);
    assert!(completions_of(&later, &id).is_empty(), "{later:?}");
}
