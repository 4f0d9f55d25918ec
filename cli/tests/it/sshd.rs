//! Hosts over a real OpenSSH server: `herd hosts check` and `herd hosts
//! install` through `ssh` into a second herd home on this machine.
//!
//! [`Sshd`] starts Debian's `/usr/sbin/sshd` on a free loopback port with its own
//! host key, user key, `authorized_keys` and pid file in a temp dir (no PAM, root
//! may log in with a key: CI runs as root). The far side is a second temp home
//! (`env HERD_HOME=... herd proxy` in the door's argv), whose daemon its own
//! [`Env`] shuts down. `.ci/run` installs `openssh-server` and sets
//! `HERD_REQUIRE_SSHD=1`; without sshd a test says so on stderr and passes, and
//! under `HERD_REQUIRE_SSHD=1` it fails. [`Sshd::start_in`] runs one in a network
//! namespace instead, on a veth address (`netns.rs`: a real network cut).
//!
//! The doors that ask (a password, an unknown host key) are run from `herd` on a
//! real terminal (a PTY, which is its controlling terminal): ssh would prompt on
//! it and hang if the door could reach it; herd's door has none, so ssh fails at
//! once with its own message.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Env, HERD, raw_command, stderr, stdout, wait_until};

/// The server program.
const SSHD: &str = "/usr/sbin/sshd";

/// The port a server in a network namespace of its own listens on.
const NETNS_PORT: u16 = 2222;

/// Generous: CI runs on two busy cores.
const DEADLINE: Duration = Duration::from_secs(30);

/// A running sshd and the keys to reach it.
#[derive(Debug)]
pub(crate) struct Sshd {
    child: Child,
    dir: tempfile::TempDir,
    /// The address it listens on (loopback, or a namespace's veth address).
    addr: String,
    port: u16,
}

/// Where a server listens: loopback on a free port, or a network namespace's
/// address (see `netns.rs`).
struct Listen<'a> {
    /// `ip netns exec NAME` runs it there.
    netns: Option<&'a str>,
    addr: &'a str,
    /// Lines added to sshd_config.
    extra: &'a str,
}

impl Sshd {
    /// Starts one, or says why not: `None` (with a note on stderr) when sshd is not
    /// installed, a panic under `HERD_REQUIRE_SSHD=1`.
    pub(crate) fn start() -> Option<Sshd> {
        Sshd::start_at(&Listen {
            netns: None,
            addr: "127.0.0.1",
            extra: "",
        })
    }

    /// Starts one in network namespace `netns`, listening on `addr` (port
    /// [`NETNS_PORT`]: the namespace is private, so the port is free). It ends a
    /// client's session after 3 unanswered keep-alives a second apart, so a far
    /// `herd proxy` behind a cut link does not outlive it by long.
    pub(crate) fn start_in(netns: &str, addr: &str) -> Option<Sshd> {
        Sshd::start_at(&Listen {
            netns: Some(netns),
            addr,
            extra: "ClientAliveInterval 1\nClientAliveCountMax 3\n",
        })
    }

    fn start_at(listen: &Listen<'_>) -> Option<Sshd> {
        if !Path::new(SSHD).is_file() {
            skipped(&format!(
                "{SSHD} is not installed (apt-get install openssh-server)"
            ));
            return None;
        }
        // sshd refuses to start without its privilege-separation directory.
        std::fs::create_dir_all("/run/sshd").expect("/run/sshd can be made (tests run as root)");
        let dir = tempfile::Builder::new()
            .prefix("herd-sshd")
            .tempdir()
            .expect("the temp dir is writable");
        for key in ["host_key", "user_key"] {
            let out = raw_command(Path::new("ssh-keygen"))
                .args(["-q", "-t", "ed25519", "-N", "", "-C", key, "-f"])
                .arg(dir.path().join(key))
                .stdin(Stdio::null())
                .output()
                .expect("ssh-keygen runs");
            assert!(out.status.success(), "ssh-keygen failed: {}", stderr(&out));
        }
        std::fs::copy(
            dir.path().join("user_key.pub"),
            dir.path().join("authorized_keys"),
        )
        .expect("the temp dir is writable");
        std::fs::write(dir.path().join("empty_known_hosts"), "").expect("writable");
        // A port that was free a moment ago; another process taking it in between
        // shows as sshd exiting, and the next port is tried.
        let mut last_log = String::new();
        for _ in 0..3 {
            let port = match listen.netns {
                Some(_) => NETNS_PORT,
                None => TcpListener::bind("127.0.0.1:0")
                    .and_then(|l| l.local_addr())
                    .expect("a loopback port is free")
                    .port(),
            };
            match Sshd::launch(dir.path(), listen, port) {
                Ok(child) => {
                    let host_key =
                        std::fs::read_to_string(dir.path().join("host_key.pub")).expect("written");
                    let mut fields = host_key.split_whitespace();
                    let (kind, key) = (
                        fields.next().expect("a key type"),
                        fields.next().expect("a key"),
                    );
                    let addr = listen.addr;
                    std::fs::write(
                        dir.path().join("known_hosts"),
                        format!("[{addr}]:{port} {kind} {key}\n"),
                    )
                    .expect("writable");
                    return Some(Sshd {
                        child,
                        dir,
                        addr: addr.to_owned(),
                        port,
                    });
                }
                Err(log) => last_log = log,
            }
        }
        panic!("sshd did not start on a free port; its log:\n{last_log}");
    }

    /// sshd on `port`, listening; its log when it exits first.
    fn launch(dir: &Path, listen: &Listen<'_>, port: u16) -> Result<Child, String> {
        let config = dir.join("sshd_config");
        let d = dir.display();
        let (addr, extra) = (listen.addr, listen.extra);
        std::fs::write(
            &config,
            format!(
                "ListenAddress {addr}:{port}\n\
                 HostKey {d}/host_key\n\
                 AuthorizedKeysFile {d}/authorized_keys\n\
                 PidFile {d}/sshd.pid\n\
                 StrictModes no\n\
                 UsePAM no\n\
                 PermitRootLogin prohibit-password\n\
                 PubkeyAuthentication yes\n\
                 PasswordAuthentication yes\n\
                 KbdInteractiveAuthentication no\n\
                 PrintMotd no\n\
                 LogLevel VERBOSE\n\
                 {extra}"
            ),
        )
        .expect("the temp dir is writable");
        let log_path = dir.join(format!("sshd-{port}.log"));
        let log = std::fs::File::create(&log_path).expect("the temp dir is writable");
        // `ip netns exec` execs sshd in place: the child is sshd itself.
        let mut command = match listen.netns {
            Some(netns) => {
                let mut command = raw_command(Path::new("ip"));
                command.args(["netns", "exec", netns, SSHD]);
                command
            }
            None => raw_command(Path::new(SSHD)),
        };
        let mut child = command
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("sshd starts");
        let end = Instant::now() + DEADLINE;
        loop {
            // Out of this process's namespace the server's own word says it listens.
            let listening = match listen.netns {
                None => TcpStream::connect((addr, port)).is_ok(),
                Some(_) => std::fs::read_to_string(&log_path)
                    .is_ok_and(|log| log.contains("Server listening on")),
            };
            if listening {
                return Ok(child);
            }
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(format!("sshd exited ({status}):\n{log}"));
            }
            if Instant::now() > end {
                let _ = child.kill();
                let _ = child.wait();
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(format!("sshd did not listen within {DEADLINE:?}:\n{log}"));
            }
            std::thread::park_timeout(Duration::from_millis(20));
        }
    }

    fn key(&self) -> PathBuf {
        self.dir.path().join("user_key")
    }

    /// ssh to this server with the user key, a known host key and no prompts.
    pub(crate) fn ssh(&self) -> Vec<String> {
        self.ssh_plus(&[])
    }

    /// [`Sshd::ssh`] with `options` first (ssh takes an option's first value).
    pub(crate) fn ssh_plus(&self, options: &[&str]) -> Vec<String> {
        let key = self.key().display().to_string();
        let known = format!(
            "UserKnownHostsFile={}",
            self.dir.path().join("known_hosts").display()
        );
        let mut all = options.to_vec();
        all.extend([
            "-i",
            &key,
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            &known,
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
        ]);
        self.ssh_with(&all)
    }

    /// ssh to this server with `options` (and nothing of the user's own config).
    pub(crate) fn ssh_with(&self, options: &[&str]) -> Vec<String> {
        let mut argv: Vec<String> = ["ssh", "-F", "/dev/null", "-p", &self.port.to_string()]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        argv.extend(options.iter().map(|s| (*s).to_owned()));
        argv.extend(["-o".to_owned(), "ConnectTimeout=10".to_owned()]);
        argv.push(self.addr.clone());
        argv
    }

    /// The listening server's pid (its sessions are its children).
    pub(crate) fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("a pid fits i32")
    }

    /// The path of a file in the server's temp dir.
    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[expect(
    clippy::print_stderr,
    reason = "a skipped ssh test says so and what to install"
)]
fn skipped(why: &str) {
    if std::env::var("HERD_REQUIRE_SSHD").as_deref() == Ok("1") {
        panic!("HERD_REQUIRE_SSHD=1 but {why}");
    }
    eprintln!("skipped: {why}");
}

/// `argv` as a TOML array.
pub(crate) fn toml_array(argv: &[String]) -> String {
    let items: Vec<String> = argv.iter().map(|a| toml_string(a)).collect();
    format!("[{}]", items.join(", "))
}

fn toml_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

/// Writes `[hosts.far]` into the near home's config.
pub(crate) fn configure(near: &Env, command: &[String], install: Option<&[String]>) {
    let mut text = format!("[hosts.far]\ncommand = {}\n", toml_array(command));
    if let Some(install) = install {
        text.push_str(&format!("install = {}\n", toml_array(install)));
    }
    std::fs::write(near.home().join("config.toml"), text).expect("the home is writable");
}

/// The door's remote command: `env HERD_HOME=<far home> <herd> proxy`.
pub(crate) fn far_proxy(far: &Env, herd: &str) -> Vec<String> {
    vec![
        "env".to_owned(),
        format!("HERD_HOME={}", far.home().display()),
        herd.to_owned(),
        "proxy".to_owned(),
    ]
}

/// Runs `herd args` for `near` on a PTY (its controlling terminal) and returns
/// the exit code, what it printed and how long it took; killed at [`DEADLINE`].
pub(crate) fn on_a_terminal(near: &Env, args: &[&str]) -> (Option<u32>, String, Duration) {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    let pair = native_pty_system()
        .openpty(PtySize {
            rows: 24,
            cols: 200,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("a PTY opens");
    let mut command = CommandBuilder::new(HERD);
    command.args(args);
    command.env("HERD_HOME", near.home());
    command.env_remove("HERD_LOG");
    let started = Instant::now();
    let mut child = pair.slave.spawn_command(command).expect("herd starts");
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader().expect("the PTY reads");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = reader.read_to_end(&mut all);
        let _ = tx.send(all);
    });
    let mut code = None;
    let finished = wait_until(DEADLINE, || match child.try_wait() {
        Ok(Some(status)) => {
            code = Some(status.exit_code());
            true
        }
        _ => false,
    });
    let took = started.elapsed();
    if finished.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    drop(pair.master);
    let text = rx
        .recv_timeout(DEADLINE)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    assert!(
        finished.is_ok(),
        "herd {args:?} did not finish within {DEADLINE:?} on a terminal; it printed:\n{text}"
    );
    (code, text, took)
}

#[test]
fn hosts_check_over_real_ssh() {
    // `herd hosts check NAME` over a real ssh door: reachable, both
    // versions, round-trip latency, the far home and user.
    let Some(sshd) = Sshd::start() else { return };
    let far = Env::new();
    let near = Env::new();
    let mut command = sshd.ssh();
    command.extend(far_proxy(&far, HERD));
    configure(&near, &command, None);

    let check = near.json(&["hosts", "check", "far", "--json"]);
    assert_eq!(check["reachable"], true, "{check}");
    assert_eq!(
        check["far"]["version"],
        env!("CARGO_PKG_VERSION"),
        "{check}"
    );
    assert_eq!(check["far"]["protocol"], 1, "{check}");
    assert_eq!(check["local"]["protocol"], 1, "{check}");
    assert_eq!(
        check["far"]["home"],
        far.home().display().to_string(),
        "{check}"
    );
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.name);
    assert_eq!(check["far"]["user"].as_str(), user.as_deref(), "{check}");
    let p50 = check["latency_ms"]["p50"].as_f64().unwrap_or(-1.0);
    assert!(p50 > 0.0 && p50 < 5_000.0, "{check}");
    assert_eq!(check["latency_ms"]["pings"], 5, "{check}");
    assert!(
        far.daemon_pid().is_some(),
        "the far proxy started the far daemon"
    );

    let text = near.ok(&["hosts", "check", "far"]);
    assert!(text.contains("host far: reachable"), "{text}");
    assert!(text.contains("ms p50"), "{text}");

    let listed = near.json(&["hosts", "list", "--json"]);
    assert_eq!(listed["hosts"][0]["name"], "far", "{listed}");
    assert_eq!(listed["hosts"][0]["command"][0], "ssh", "{listed}");
}

#[test]
fn door_asking_for_a_password_fails_fast() {
    // A door that wants a password fails fast with ssh's message and the
    // fix, even when herd runs on a terminal ssh could prompt on.
    let Some(sshd) = Sshd::start() else { return };
    let far = Env::new();
    let near = Env::new();
    let known = format!("UserKnownHostsFile={}", sshd.file("known_hosts").display());
    let mut command = sshd.ssh_with(&[
        "-o",
        "PubkeyAuthentication=no",
        "-o",
        "PasswordAuthentication=yes",
        "-o",
        &known,
    ]);
    command.extend(far_proxy(&far, HERD));
    configure(&near, &command, None);
    let (code, text, took) = on_a_terminal(&near, &["hosts", "check", "far"]);
    assert_eq!(code, Some(3), "{text}");
    assert!(
        text.contains("Permission denied"),
        "ssh's own message: {text}"
    );
    assert!(text.contains("BatchMode=yes"), "the fix: {text}");
    assert!(took < Duration::from_secs(10), "took {took:?}: {text}");
    assert!(far.daemon_pid().is_none(), "nothing ran on the far side");
}

#[test]
fn unknown_host_key_fails_fast_naming_ssh_keyscan() {
    // A door that asks whether to trust an unknown host key fails fast
    // and names ssh-keyscan.
    let Some(sshd) = Sshd::start() else { return };
    let far = Env::new();
    let near = Env::new();
    let key = sshd.key().display().to_string();
    let known = format!(
        "UserKnownHostsFile={}",
        sshd.file("empty_known_hosts").display()
    );
    let mut command = sshd.ssh_with(&["-i", &key, "-o", "IdentitiesOnly=yes", "-o", &known]);
    command.extend(far_proxy(&far, HERD));
    configure(&near, &command, None);
    let (code, text, took) = on_a_terminal(&near, &["hosts", "check", "far"]);
    assert_eq!(code, Some(3), "{text}");
    assert!(
        text.contains("Host key verification failed"),
        "ssh's own message: {text}"
    );
    assert!(text.contains("ssh-keyscan"), "the fix: {text}");
    assert!(took < Duration::from_secs(10), "took {took:?}: {text}");
}

#[test]
fn far_herd_missing_names_hosts_install() {
    // A host whose far herd is missing names `herd hosts install`.
    let Some(sshd) = Sshd::start() else { return };
    let far = Env::new();
    let near = Env::new();
    let missing = far.scratch().join("no-such-dir").join("herd");
    let mut command = sshd.ssh();
    command.extend(far_proxy(&far, &missing.display().to_string()));
    configure(&near, &command, None);
    let out = near.run(&["hosts", "check", "far"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("No such file or directory"),
        "the door's words: {err}"
    );
    assert!(err.contains("herd hosts install far"), "the fix: {err}");

    let json = near.run(&["hosts", "check", "far", "--json"]);
    assert_eq!(json.status.code(), Some(3), "{json:?}");
    let answer: Value = serde_json::from_str(&stdout(&json)).expect("JSON on stdout");
    assert_eq!(answer["reachable"], false, "{answer}");
    assert!(
        answer["fix"]
            .as_str()
            .unwrap_or_default()
            .contains("herd hosts install far"),
        "{answer}"
    );

    let unknown = near.run(&["hosts", "check", "nope"]);
    assert_eq!(unknown.status.code(), Some(2), "{unknown:?}");
    assert!(
        stderr(&unknown).contains("config.toml defines far"),
        "{unknown:?}"
    );
}

#[test]
fn hosts_install_over_ssh_then_check_passes() {
    // `herd hosts install NAME` copies this binary through the install
    // argv (after learning the far platform), then `herd hosts check` passes.
    let Some(sshd) = Sshd::start() else { return };
    let far = Env::new();
    let near = Env::new();
    let bin = far.scratch().join("bin");
    std::fs::create_dir(&bin).expect("the temp dir is writable");
    let herd = bin.join("herd");
    let mut command = sshd.ssh();
    command.extend(far_proxy(&far, &herd.display().to_string()));
    let mut install = sshd.ssh();
    let b = bin.display();
    install.push(format!(
        "cat > {b}/herd.new && chmod +x {b}/herd.new && mv {b}/herd.new {b}/herd"
    ));
    configure(&near, &command, Some(&install));

    let before = near.run(&["hosts", "check", "far"]);
    assert_eq!(before.status.code(), Some(3), "{before:?}");

    let installed = near.json(&["hosts", "install", "far", "--json"]);
    assert_eq!(installed["installed"], true, "{installed}");
    assert_eq!(installed["far"]["os"], std::env::consts::OS, "{installed}");
    assert_eq!(
        installed["far"]["arch"],
        std::env::consts::ARCH,
        "{installed}"
    );
    assert!(installed["needed_glibc"].is_string(), "{installed}");
    assert_eq!(
        std::fs::read(&herd).expect("the far binary exists"),
        std::fs::read(HERD).expect("this binary reads"),
        "the far binary is this one, byte for byte"
    );

    let check = near.json(&["hosts", "check", "far", "--json"]);
    assert_eq!(check["reachable"], true, "{check}");
    assert_eq!(
        check["far"]["proxy_version"],
        env!("CARGO_PKG_VERSION"),
        "{check}"
    );

    let again = near.json(&["hosts", "install", "far", "--json"]);
    assert_eq!(again["installed"], false, "already there: {again}");

    // The far daemon runs the installed binary; stop it with that binary.
    let _ = far
        .cmd_at(&herd, &["shutdown", "--yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
