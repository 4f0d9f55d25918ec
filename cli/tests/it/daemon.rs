//! The daemon: autostart, the private socket, the wire protocol's error paths,
//! restart after SIGKILL, isolation between homes.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Env, alive, raw_command, stderr, wait_until};

/// A raw protocol connection.
struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Conn {
    fn open(env: &Env) -> Conn {
        let stream = UnixStream::connect(env.socket()).expect("the daemon's socket accepts");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("a timeout can be set");
        Conn {
            reader: BufReader::new(stream.try_clone().expect("the stream clones")),
            writer: stream,
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("the daemon reads");
    }

    fn recv(&mut self) -> Value {
        let mut line = String::new();
        self.reader
            .read_line(&mut line)
            .expect("the daemon answers within 10 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
    }

    fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(format!("{request}\n").as_bytes());
        self.recv()
    }

    fn hello(&mut self) -> Value {
        let answer = self.call(0, "hello", json!({"protocol": 1, "client": "test"}));
        assert!(answer["result"]["pid"].is_u64(), "hello failed: {answer}");
        answer
    }
}

#[test]
fn autostart_creates_a_0600_socket_in_a_0700_dir() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let socket = std::fs::metadata(env.socket()).expect("the socket exists");
    assert_eq!(socket.permissions().mode() & 0o777, 0o600);
    let run = std::fs::metadata(env.home().join("run")).expect("run/ exists");
    assert_eq!(run.permissions().mode() & 0o777, 0o700);
    let pid = env.daemon_pid().expect("the daemon wrote its pid file");
    assert!(alive(pid), "daemon {pid} is running");
    // Its log is where autostart put it.
    let log =
        std::fs::read_to_string(env.home().join("logs/daemon.log")).expect("daemon.log exists");
    assert!(log.contains("daemon started"), "{log}");
}

#[test]
fn shutdown_stops_the_daemon() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let pid = env.daemon_pid().expect("pid file");
    let out = env.ok(&["shutdown"]);
    assert!(out.contains(&format!("pid {pid}")), "{out}");
    wait_until(Duration::from_secs(5), || !alive(pid)).expect("the daemon exits after shutdown");
    assert!(!env.socket().exists(), "the socket is removed");
    let again = env.ok(&["shutdown"]);
    assert!(again.contains("no daemon is running"), "{again}");
}

#[test]
fn malformed_json_is_answered_and_the_daemon_keeps_serving() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let mut conn = Conn::open(&env);
    conn.hello();
    conn.send_raw(b"{this is not json\n");
    let answer = conn.recv();
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    conn.send_raw(b"[1, 2, 3]\n");
    let answer = conn.recv();
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    let answer = conn.call(5, "list", json!({"all": true}));
    assert!(
        answer["result"]["processes"].is_array(),
        "the same connection still works: {answer}"
    );
    let answer = conn.call(6, "no_such_method", json!({}));
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    assert_eq!(answer["id"], 6);
}

#[test]
fn an_oversized_request_is_refused_with_the_limit() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let mut conn = Conn::open(&env);
    conn.hello();
    let mut huge = vec![b'x'; 2 << 20];
    huge.push(b'\n');
    conn.send_raw(&huge);
    let answer = conn.recv();
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("1048576 bytes"), "{answer}");
    let answer = conn.call(7, "list", json!({}));
    assert_eq!(answer["id"], 7, "the connection is kept: {answer}");
}

#[test]
fn the_first_request_must_be_hello_and_versions_must_match() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let mut conn = Conn::open(&env);
    let answer = conn.call(1, "list", json!({}));
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("hello"),
        "{answer}"
    );
    let answer = conn.call(2, "hello", json!({"protocol": 99, "client": "9.9.9"}));
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("protocol 99") && message.contains("protocol 1"),
        "{answer}"
    );
}

#[test]
fn a_sigkilled_daemon_is_replaced_by_the_next_command() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let first = env.daemon_pid().expect("pid file");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("the daemon can be signalled");
    wait_until(Duration::from_secs(5), || !alive(first)).expect("the daemon dies");
    assert!(env.socket().exists(), "a stale socket is left behind");
    env.json(&["ps", "--json"]);
    let second = env.daemon_pid().expect("a new pid file");
    assert_ne!(first, second);
    assert!(alive(second));
}

#[test]
fn two_homes_side_by_side_stay_isolated() {
    let a = Env::new();
    let b = Env::new();
    let id = a.json(&["run", "--json", "--", "echo only-in-a"])["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned();
    a.ok(&["wait", &id, "--timeout", "10"]);
    let listed_b = b.json(&["ps", "--all", "--json"]);
    assert_eq!(listed_b["processes"], json!([]), "home b sees nothing of a");
    let out = b.run(&["poll", &id]);
    assert_eq!(out.status.code(), Some(2), "a's id is unknown in b");
    assert_ne!(a.daemon_pid(), b.daemon_pid(), "one daemon per home");
    assert!(
        a.home()
            .join("logs/sessions")
            .read_dir()
            .is_ok_and(|mut d| d.next().is_some())
    );
    assert!(
        !b.home()
            .join("logs/sessions")
            .join(format!("{id}.log"))
            .exists()
    );
}

#[test]
fn a_socket_path_over_the_os_limit_is_a_clear_error() {
    let mut env = Env::new();
    let long = env.scratch().join("h".repeat(120));
    std::fs::create_dir(&long).expect("a long directory can be made");
    env.vars
        .push(("HERD_HOME".into(), long.display().to_string()));
    let out = env.run(&["ps"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("107 bytes") && err.contains("HERD_HOME"),
        "{err}"
    );
}

#[test]
fn a_bad_config_key_is_named_with_its_line() {
    let env = Env::new();
    std::fs::write(
        env.home().join("config.toml"),
        "finished_cap = 3\nkill_grace = 1\n",
    )
    .expect("writable");
    let out = env.run(&["ps"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("kill_grace") && err.contains("line 2"),
        "{err}"
    );
}

/// The unprivileged user the peer-uid test connects as.
const PEER_USER: &str = "herd-it-peer";

/// The uid/gid of [`PEER_USER`], creating the user when absent.
fn peer_user() -> (u32, u32) {
    if nix::unistd::User::from_name(PEER_USER)
        .ok()
        .flatten()
        .is_none()
    {
        assert!(
            nix::unistd::geteuid().is_root(),
            "the second-uid test needs root to create the user {PEER_USER} (or create it beforehand)"
        );
        let status = raw_command(std::path::Path::new("useradd"))
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                PEER_USER,
            ])
            .status()
            .expect("useradd must be installed for the second-uid test");
        assert!(
            status.success()
                || nix::unistd::User::from_name(PEER_USER)
                    .ok()
                    .flatten()
                    .is_some(),
            "useradd {PEER_USER} failed: {status}"
        );
    }
    let user = nix::unistd::User::from_name(PEER_USER)
        .expect("the passwd database is readable")
        .expect("the user exists now");
    (user.uid.as_raw(), user.gid.as_raw())
}

#[test]
fn a_connection_from_another_uid_is_refused() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let (uid, gid) = peer_user();
    assert_ne!(
        uid,
        nix::unistd::getuid().as_raw(),
        "the peer must be another uid"
    );
    // Open the path up (a misconfiguration the peer check must still survive).
    for dir in [env.scratch(), env.home(), &env.home().join("run")] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    std::fs::set_permissions(env.socket(), std::fs::Permissions::from_mode(0o666)).expect("chmod");
    // The build's target dir may sit under a home the peer cannot enter (CI keeps
    // it in ~/.cache), so the peer runs a copy of the binary from the scratch dir.
    // A hard link needs no write descriptor; a copy's descriptor can leak for a moment
    // into a child another test thread forks, and exec then fails with "text file busy"
    // until that child execs, so a copy is retried on that error.
    let peer_bin = env.scratch().join("herd-peer");
    if std::fs::hard_link(crate::support::HERD, &peer_bin).is_err() {
        std::fs::copy(crate::support::HERD, &peer_bin).expect("copy the herd binary for the peer");
    }
    std::fs::set_permissions(&peer_bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let out = loop {
        match env.cmd_at(&peer_bin, &["ps"]).uid(uid).gid(gid).output() {
            Err(e)
                if e.raw_os_error() == Some(libc::ETXTBSY)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::yield_now();
            }
            other => break other,
        }
    }
    .expect("herd runs as the peer user");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "refused peers exit 3: {err}");
    assert!(
        err.contains("connection refused") && err.contains(&format!("uid {uid}")),
        "{err}"
    );
    // The daemon is unharmed.
    env.json(&["ps", "--json"]);
}

#[test]
fn concurrent_autostarts_end_with_one_daemon() {
    let env = Env::new();
    let children: Vec<_> = (0..4)
        .map(|_| {
            env.cmd(&["ps", "--json"])
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("herd runs")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("herd finishes");
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let pid = env.daemon_pid().expect("pid file");
    assert!(alive(pid));
    let serve = env.run(&["serve"]);
    assert_eq!(
        serve.status.code(),
        Some(2),
        "a second foreground daemon is refused"
    );
    assert!(
        stderr(&serve).contains(&format!("pid {pid}")),
        "{}",
        stderr(&serve)
    );
}

#[test]
fn b17_sigterm_detaches_and_the_jobs_keep_running_until_shutdown() {
    let env = Env::new();
    let info = env.json(&["run", "--json", "--", "sleep 300"]);
    let job = i32::try_from(info["pid"].as_i64().expect("pid")).expect("a pid fits i32");
    let daemon = env.daemon_pid().expect("pid file");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("the daemon can be signalled");
    wait_until(Duration::from_secs(10), || !alive(daemon)).expect("the daemon exits on SIGTERM");
    assert!(
        alive(job),
        "the job outlives a SIGTERM of the daemon (it detaches)"
    );
    assert!(!env.socket().exists(), "the socket is removed");
    assert!(
        !env.home().join("run/herd.pid").exists(),
        "the pid file is removed"
    );
    // The next daemon re-attaches; `herd shutdown` then kills as host shutdown.
    let id = info["session_id"].as_str().expect("session_id");
    let polled = env.json(&["poll", id, "--json"]);
    assert_eq!(polled["status"], "running", "{polled}");
    let stopped = env.json(&["shutdown", "--json"]);
    assert_eq!(stopped["jobs"], "killed", "{stopped}");
    wait_until(Duration::from_secs(10), || !alive(job)).expect("shutdown kills the job");
}
