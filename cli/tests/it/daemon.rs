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

    /// Spawns `command` for owner `agent` in the scratch dir; its session id.
    fn spawn(&mut self, env: &Env, command: &str) -> String {
        let spawned = self.call(
            1,
            "spawn",
            json!({"command": command, "owner": "agent", "cwd": env.scratch()}),
        );
        spawned["result"]["session_id"]
            .as_str()
            .unwrap_or_else(|| panic!("spawn failed: {spawned}"))
            .to_owned()
    }

    fn hello(&mut self) -> Value {
        let answer = self.call(0, "hello", json!({"protocol": 1, "client": "test"}));
        assert!(answer["result"]["pid"].is_u64(), "hello failed: {answer}");
        answer
    }
}

/// Asserts `answer` is an invalid-params error whose message names `needle`.
fn invalid_params(answer: &Value, needle: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(needle), "{answer}");
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
    let out = env.ok(&["shutdown", "--yes"]);
    assert!(out.contains(&format!("pid {pid}")), "{out}");
    wait_until(Duration::from_secs(5), || !alive(pid)).expect("the daemon exits after shutdown");
    assert!(!env.socket().exists(), "the socket is removed");
    let again = env.ok(&["shutdown", "--yes"]);
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
    let ours = nix::unistd::getuid().as_raw();
    // Another user's home is refused before anything is read from it.
    assert_eq!(out.status.code(), Some(2), "{err}");
    // (Its path already: the test's temp dir is root's entry in the sticky /tmp.)
    assert!(
        err.contains(&format!("owner uid {ours}")) && err.contains(&format!("(uid {uid})")),
        "{err}"
    );
    // In a home of the peer's own, a socket served by another uid gets nothing
    // sent to it: herd's client checks the server's uid first. The home's path must
    // be the peer's own from the sticky /tmp down.
    let peer_base = tempfile::Builder::new()
        .prefix("herd-peer")
        .tempdir()
        .expect("a temp dir");
    std::os::unix::fs::chown(peer_base.path(), Some(uid), Some(gid)).expect("chown");
    let peer_home = peer_base.path().join("peer-home");
    std::fs::create_dir_all(peer_home.join("run")).expect("the peer's home");
    let planted = std::os::unix::net::UnixListener::bind(peer_home.join("run").join("herd.sock"))
        .expect("a socket served by this uid");
    for path in [peer_home.clone(), peer_home.join("run")] {
        std::os::unix::fs::chown(&path, Some(uid), Some(gid)).expect("chown");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    }
    std::fs::set_permissions(
        peer_home.join("run").join("herd.sock"),
        std::fs::Permissions::from_mode(0o666),
    )
    .expect("chmod");
    let out = env
        .cmd_at(&peer_bin, &["ps"])
        .env("HERD_HOME", &peer_home)
        .uid(uid)
        .gid(gid)
        .output()
        .expect("herd runs as the peer user");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!("served by uid {ours}, not by you (uid {uid})")),
        "{err}"
    );
    planted.set_nonblocking(true).expect("nonblocking");
    if let Ok((mut accepted, _)) = planted.accept() {
        accepted.set_nonblocking(true).expect("nonblocking");
        let mut sent = Vec::new();
        let _ = std::io::Read::read_to_end(&mut accepted, &mut sent);
        assert!(
            sent.is_empty(),
            "the client sent {:?}",
            String::from_utf8_lossy(&sent)
        );
    }
    // And the daemon refuses a raw client of another uid on its own.
    // The daemon answers a foreign uid with the refusal before reading anything,
    // then closes: the probe only reads (a write could meet the closed socket).
    let probe = "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n\
                 print(s.makefile().readline())";
    let raw = raw_command(std::path::Path::new("python3"))
        .args(["-c", probe])
        .arg(env.socket())
        .uid(uid)
        .gid(gid)
        .output()
        .expect("python3 runs as the peer user");
    let answer = String::from_utf8_lossy(&raw.stdout);
    assert!(
        answer.contains("connection refused") && answer.contains(&format!("uid {uid}")),
        "{answer} {}",
        stderr(&raw)
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
    let stopped = env.json(&["shutdown", "--yes", "--json"]);
    assert_eq!(stopped["jobs"], "killed", "{stopped}");
    wait_until(Duration::from_secs(10), || !alive(job)).expect("shutdown kills the job");
}

/// Spawns `command` for `owner` over `conn` and waits for it to exit.
fn run_to_exit(conn: &mut Conn, env: &Env, command: &str, owner: &str, notify: bool) -> String {
    let spawned = conn.call(
        10,
        "spawn",
        json!({"command": command, "owner": owner, "cwd": env.scratch(), "notify": notify}),
    );
    let id = spawned["result"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("spawn failed: {spawned}"))
        .to_owned();
    let waited = conn.call(11, "wait", json!({"id": id, "timeout_seconds": 10}));
    assert_eq!(waited["result"]["status"], "exited", "{waited}");
    id
}

fn drained_ids(answer: &Value) -> Vec<String> {
    answer["result"]["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter_map(|e| e["session_id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn b29_a_leased_drain_is_delivered_only_when_acknowledged_and_returns_when_its_connection_closes() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let mut a = Conn::open(&env);
    let hello = a.hello();
    let capabilities = hello["result"]["capabilities"].to_string();
    assert!(capabilities.contains("drain.lease"), "{hello}");
    let first = run_to_exit(&mut a, &env, "echo one", "agent", true);
    let second = run_to_exit(&mut a, &env, "echo two", "agent", true);
    let leased = a.call(20, "drain", json!({"owner": "agent", "lease": true}));
    assert_eq!(
        drained_ids(&leased),
        vec![first.clone(), second.clone()],
        "{leased}"
    );
    assert!(
        leased["result"]["rendered"]
            .as_str()
            .unwrap_or_default()
            .contains(&first)
    );
    let lease = leased["result"]["lease"].as_u64().expect("a lease number");
    // Held by `a`: another connection's drain gets nothing.
    let mut b = Conn::open(&env);
    b.hello();
    let meanwhile = b.call(21, "drain", json!({"owner": "agent", "lease": true}));
    assert!(drained_ids(&meanwhile).is_empty(), "{meanwhile}");
    // A lease is `a`'s alone.
    let foreign = b.call(22, "drain.ack", json!({"lease": lease}));
    assert!(
        foreign["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no drain lease"),
        "{foreign}"
    );
    // `a` goes away without acknowledging: the events come back, in order.
    drop(a);
    let mut again = Value::Null;
    wait_until(Duration::from_secs(10), || {
        again = b.call(23, "drain", json!({"owner": "agent", "lease": true}));
        !drained_ids(&again).is_empty()
    })
    .expect("the unacknowledged events return to the queue");
    assert_eq!(drained_ids(&again), vec![first, second], "{again}");
    let lease = again["result"]["lease"].as_u64().expect("a lease number");
    let acked = b.call(24, "drain.ack", json!({"lease": lease}));
    assert_eq!(acked["result"]["acknowledged"], 2, "{acked}");
    drop(b);
    // Acknowledged is for good, whichever connection asks next, and a plain drain
    // (protocol 1) still works.
    let mut c = Conn::open(&env);
    c.hello();
    let after = c.call(25, "drain", json!({"owner": "agent"}));
    assert!(drained_ids(&after).is_empty(), "{after}");
    let plain = run_to_exit(&mut c, &env, "echo three", "agent", true);
    let taken = c.call(26, "drain", json!({"owner": "agent"}));
    assert_eq!(drained_ids(&taken), vec![plain], "{taken}");
    assert!(taken["result"]["lease"].is_null(), "{taken}");
    let released = c.call(27, "drain.release", json!({"lease": 99}));
    assert!(
        released["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("99"),
        "{released}"
    );
}

#[test]
fn b24_adopt_over_the_socket_turns_notify_on_for_a_running_job() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let mut conn = Conn::open(&env);
    conn.hello();
    let id = conn.spawn(&env, "read -r _; echo later");
    let adopted = conn.call(2, "adopt", json!({"id": id}));
    assert_eq!(adopted["result"]["adoption"], "notified", "{adopted}");
    conn.call(3, "close", json!({"id": id}));
    let waited = conn.call(4, "wait", json!({"id": id, "timeout_seconds": 10}));
    assert_eq!(waited["result"]["status"], "exited", "{waited}");
    let drained = conn.call(5, "drain", json!({"owner": "agent"}));
    assert_eq!(drained_ids(&drained), vec![id.clone()], "{drained}");
    let again = conn.call(6, "adopt", json!({"id": id}));
    assert_eq!(again["result"]["adoption"], "finished", "{again}");
    let unknown = conn.call(7, "adopt", json!({"id": "nonesuch"}));
    assert!(unknown["error"].is_object(), "{unknown}");
}

#[test]
fn list_filters_by_state_and_age_and_keeps_the_newest_under_a_limit() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let mut conn = Conn::open(&env);
    conn.hello();
    let done: Vec<String> = (0..3)
        .map(|n| run_to_exit(&mut conn, &env, &format!("echo {n}"), "agent", false))
        .collect();
    let running = conn.spawn(&env, "read -r _");
    let ids = |answer: &Value| -> Vec<String> {
        answer["result"]["processes"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .filter_map(|r| r["session_id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let default = conn.call(2, "list", json!({"owner": "agent"}));
    assert_eq!(ids(&default), vec![running.clone()], "{default}");
    let finished = conn.call(3, "list", json!({"owner": "agent", "state": "finished"}));
    assert_eq!(ids(&finished), done, "{finished}");
    let newest = conn.call(
        4,
        "list",
        json!({"owner": "agent", "state": "all", "limit": 2}),
    );
    assert_eq!(
        ids(&newest),
        vec![done[2].clone(), running.clone()],
        "{newest}"
    );
    assert_eq!(newest["result"]["more"], 2, "{newest}");
    let recent = conn.call(
        5,
        "list",
        json!({"owner": "agent", "state": "all", "since_seconds": 3600}),
    );
    assert_eq!(ids(&recent).len(), 4, "{recent}");
    let bad = conn.call(6, "list", json!({"limit": 0}));
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("limit"),
        "{bad}"
    );
    let typo = conn.call(7, "list", json!({"state": "done"}));
    assert!(
        typo["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("running"),
        "{typo}"
    );
    conn.call(8, "close", json!({"id": running}));
}

#[test]
fn b36_a_request_without_an_environment_runs_with_the_minimal_one_and_bad_names_are_refused() {
    let env = Env::new();
    // The daemon starts from a client whose environment has a marker.
    let out = env
        .cmd(&["ps"])
        .env("HERD_IT_DAEMON_ONLY", "leaked")
        .output()
        .expect("herd runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let mut conn = Conn::open(&env);
    conn.hello();
    let id = run_to_exit(&mut conn, &env, "env", "agent", false);
    let logged = conn.call(30, "log", json!({"id": id}));
    let text = logged["result"]["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!text.contains("HERD_IT_DAEMON_ONLY"), "{text}");
    assert!(
        text.contains("PATH=/usr/local/bin:/usr/bin:/bin\n"),
        "{text}"
    );
    assert!(
        text.contains("LANG=C.UTF-8\n") && text.contains("HOME="),
        "{text}"
    );
    for (params, needle) in [
        (json!({"env": [["", "x"]]}), "empty name"),
        (json!({"env": [["A=B", "x"]]}), "`=`"),
        (json!({"caller_env": {"A": "x\u{0}y"}}), "NUL"),
    ] {
        let mut request = json!({"command": "true", "owner": "agent", "cwd": env.scratch()});
        if let (Some(into), Some(from)) = (request.as_object_mut(), params.as_object()) {
            into.extend(from.clone());
        }
        let answer = conn.call(31, "spawn", request);
        invalid_params(&answer, needle);
    }
}

#[test]
fn a_pty_spawn_in_a_missing_directory_is_refused_not_run_in_home() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let mut conn = Conn::open(&env);
    conn.hello();
    let missing = env.scratch().join("no-such-build-dir");
    for pty in [true, false] {
        let answer = conn.call(
            1,
            "spawn",
            json!({"command": "pwd", "owner": "agent", "cwd": missing, "pty": pty}),
        );
        invalid_params(&answer, "cwd");
        invalid_params(&answer, "no-such-build-dir");
    }
    let listed = conn.call(2, "list", json!({"state": "all"}));
    assert_eq!(listed["result"]["processes"], json!([]), "{listed}");
}

#[test]
fn a_notification_is_neither_run_nor_answered() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let pid = env.daemon_pid().expect("the daemon runs");
    let mut conn = Conn::open(&env);
    conn.hello();
    conn.send_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"shutdown\",\"params\":{}}\n");
    conn.send_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"spawn\",\"params\":{\"command\":\"true\",\"owner\":\"n\"}}\n");
    // The next answer is the status request's: nothing came for the notifications.
    let status = conn.call(7, "status", json!({}));
    assert_eq!(status["id"], 7, "{status}");
    assert_eq!(status["result"]["running"], 0, "{status}");
    assert!(alive(pid), "a notification stopped the daemon");
    let listed = conn.call(8, "list", json!({"state": "all"}));
    assert_eq!(listed["result"]["processes"], json!([]), "{listed}");
}

#[test]
fn spawn_numbers_out_of_range_are_refused_and_start_nothing() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let mut conn = Conn::open(&env);
    conn.hello();
    for (extra, needle) in [
        (
            json!({"heartbeat_seconds": u64::MAX}),
            "heartbeat_seconds must be from 1 to 86400",
        ),
        (
            json!({"completion_output_chars": 1_000_000_000_000_u64}),
            "completion_output_chars must be from 0 to 1000000",
        ),
    ] {
        let mut request = json!({"command": "sleep 30", "owner": "agent", "cwd": env.scratch()});
        if let (Some(into), Some(from)) = (request.as_object_mut(), extra.as_object()) {
            into.extend(from.clone());
        }
        let answer = conn.call(1, "spawn", request);
        invalid_params(&answer, needle);
    }
    let listed = conn.call(2, "list", json!({"state": "all"}));
    assert_eq!(
        listed["result"]["processes"],
        json!([]),
        "no ghost session: {listed}"
    );
}

/// `status`'s count of open connections, asked on a connection of its own.
fn open_connections(env: &Env) -> u64 {
    let mut conn = Conn::open(env);
    conn.hello();
    let status = conn.call(1, "status", json!({}));
    // Less this connection.
    status["result"]["connections"]
        .as_u64()
        .expect("connections")
        - 1
}

/// Whether the daemon closed `conn` (end-of-file, or a reset) within the read
/// timeout; false when it stays open (the read times out) or sends a line.
fn closed_by_daemon(conn: &mut Conn) -> bool {
    conn.reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a timeout can be set");
    let mut line = String::new();
    match conn.reader.read_line(&mut line) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}

/// A connection whose `hello` and a `wait` without a timeout for `id` go in one
/// write: the daemon reads the wait straight after answering the hello, so once the
/// hello is answered the connection has a request in flight until it closes.
fn open_waiting(env: &Env, id: &str) -> Conn {
    let mut conn = Conn::open(env);
    let hello = json!({"jsonrpc": "2.0", "id": 0, "method": "hello", "params": {"protocol": 1, "client": "test"}});
    let wait = json!({"jsonrpc": "2.0", "id": 9, "method": "wait", "params": {"id": id}});
    conn.send_raw(format!("{hello}\n{wait}\n").as_bytes());
    let answer = conn.recv();
    assert!(answer["result"]["pid"].is_u64(), "hello failed: {answer}");
    conn
}

#[test]
fn at_max_connections_the_longest_idle_connection_makes_room_and_a_refused_client_exits_3() {
    let env = Env::new();
    std::fs::create_dir_all(env.home()).expect("the home");
    std::fs::write(env.home().join("config.toml"), "max_connections = 4\n").expect("writable");
    let info = env.json(&["run", "--json", "--", "sleep 300"]);
    let id = info["session_id"].as_str().expect("session_id").to_owned();
    // The limit filled: one that never says hello, three that say it and stall.
    let mut silent = Conn::open(&env);
    let mut stalled: Vec<Conn> = (0..3)
        .map(|_| {
            let mut conn = Conn::open(&env);
            conn.hello();
            conn
        })
        .collect();
    // Every other command still works: each closes the connection idle the longest,
    // the silent one first, then the stalled ones in the order they went quiet.
    env.ok(&["ps"]);
    assert!(
        closed_by_daemon(&mut silent),
        "the silent connection made room"
    );
    // One more stalls (the limit is full again), and the next command makes room
    // with the oldest stalled one; the youngest stays open. (A finished client's
    // connection may linger a moment, idle and younger than these: it can be the one
    // closed instead, never the youngest stalled one.)
    let mut newest = Conn::open(&env);
    newest.hello();
    env.ok(&["ps"]);
    assert!(
        closed_by_daemon(&mut stalled[0]),
        "the oldest stalled one made room"
    );
    stalled[2]
        .writer
        .set_nonblocking(true)
        .expect("non-blocking");
    let mut byte = [0u8; 1];
    let still_open = matches!(
        std::io::Read::read(&mut stalled[2].writer, &mut byte),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
    );
    assert!(still_open, "the youngest stalled connection stays open");
    drop((stalled, newest));
    let mut waits: Vec<Conn> = (0..4).map(|_| open_waiting(&env, &id)).collect();
    wait_until(Duration::from_secs(10), || {
        let out = env.run(&["ps"]);
        out.status.code() == Some(3)
    })
    .expect("a client past four busy connections is refused with exit 3");
    let out = env.run(&["ps"]);
    assert!(stderr(&out).contains("max_connections"), "{}", stderr(&out));
    drop(waits.pop());
    wait_until(Duration::from_secs(10), || {
        env.run(&["ps"]).status.success()
    })
    .expect("a slot freed by a closed wait admits the next client");
    drop(waits);
    env.ok(&["kill", &id]);
}

#[test]
fn a_wait_without_a_timeout_ends_when_its_client_leaves() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let mut conn = Conn::open(&env);
    conn.hello();
    let id = conn.spawn(&env, "sleep 300");
    let mut waiter = Conn::open(&env);
    waiter.hello();
    waiter.send_raw(
        format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": 2, "method": "wait", "params": {"id": id}})
        )
        .as_bytes(),
    );
    wait_until(Duration::from_secs(10), || open_connections(&env) == 2)
        .expect("the waiter and the spawner are open");
    drop(waiter);
    wait_until(Duration::from_secs(10), || open_connections(&env) == 1)
        .expect("the wait ended with its connection");
    conn.call(3, "kill", json!({"id": id}));
}

#[test]
fn the_daemons_own_files_are_0600_and_never_written_through_a_symlink() {
    let env = Env::new();
    // A planted link where the pid file goes: the daemon must not write through it.
    let run = env.home().join("run");
    std::fs::create_dir_all(&run).expect("run dir");
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).expect("mode");
    let victim = env.scratch().join("victim");
    std::fs::write(&victim, "precious\n").expect("a file");
    std::os::unix::fs::symlink(&victim, run.join("herd.pid")).expect("a symlink");
    let out = env.run(&["ps"]);
    assert_eq!(
        std::fs::read_to_string(&victim).expect("readable"),
        "precious\n"
    );
    assert!(
        !out.status.success(),
        "the daemon started through a planted pid link"
    );
    std::fs::remove_file(run.join("herd.pid")).expect("unlink");
    env.json(&["ps", "--json"]);
    for path in [
        run.join("herd.pid"),
        run.join("herd.lock"),
        env.home().join("logs").join("daemon.log"),
    ] {
        let mode = std::fs::metadata(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
    }
}

#[test]
fn a_home_writable_by_others_is_refused_with_the_path_and_the_fix() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    for (path, mode) in [
        (env.home().join("run"), 0o777),
        (env.home().join("logs"), 0o770),
        (env.home().to_path_buf(), 0o757),
    ] {
        let before = std::fs::metadata(&path).expect("exists").permissions();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let out = env.run(&["ps"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", path.display());
        assert!(
            err.contains(&format!("chmod go-w {}", path.display())),
            "{}: {err}",
            path.display()
        );
        std::fs::set_permissions(&path, before).expect("chmod back");
    }
    // A planted, group-writable config is refused too.
    let config = env.home().join("config.toml");
    std::fs::write(&config, "").expect("a config");
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o664)).expect("chmod");
    let err = stderr(&env.run(&["ps"]));
    assert!(
        err.contains("config.toml is writable by its group"),
        "{err}"
    );
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    env.json(&["ps", "--json"]);
}

#[test]
fn positional_params_and_nul_bytes_are_refused_as_invalid_params() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let mut conn = Conn::open(&env);
    conn.hello();
    for (method, params, needle) in [
        ("spawn", json!(["true", "agent"]), "named fields"),
        ("poll", json!("proc_0123"), "bare value"),
        (
            "spawn",
            json!({"command": "echo a\u{0}b", "owner": "agent"}),
            "NUL",
        ),
        (
            "spawn",
            json!({"command": "true", "owner": "agent", "cwd": "/tmp/a\u{0}b"}),
            "NUL",
        ),
    ] {
        let answer = conn.call(1, method, params);
        invalid_params(&answer, needle);
    }
    let listed = conn.call(2, "list", json!({"state": "all"}));
    assert_eq!(listed["result"]["processes"], json!([]), "{listed}");
}

#[test]
fn logs_follow_with_result_ends_with_the_sessions_result() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let mut conn = Conn::open(&env);
    let hello = conn.hello();
    assert!(
        hello["result"]["capabilities"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c == "logs.follow.result")),
        "{hello}"
    );
    let spawned = conn.call(
        1,
        "spawn",
        json!({"command": "echo out; exit 7", "owner": "t"}),
    );
    let id = spawned["result"]["session_id"]
        .as_str()
        .expect("an id")
        .to_owned();
    conn.send_raw(
        format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": 2, "method": "logs.follow",
                   "params": {"id": id, "result": true}})
        )
        .as_bytes(),
    );
    let mut output = String::new();
    let end = loop {
        let message = conn.recv();
        if message["method"] == "log" {
            output.push_str(message["params"]["output"].as_str().unwrap_or_default());
            continue;
        }
        break message;
    };
    assert_eq!(output, "out\n");
    assert_eq!(end["id"], 2, "{end}");
    let result = &end["result"]["result"];
    assert_eq!(result["session_id"], json!(id), "{end}");
    assert_eq!(result["exit_code"], 7, "{end}");
    assert!(end["result"]["next_byte"].is_u64(), "{end}");
}

#[test]
fn a_spawn_sent_again_with_its_request_key_starts_the_job_once() {
    // A caller that lost its connection after sending a spawn sends it
    // again with the same `request_key` (a host link does, over a new door): the
    // daemon answers the first spawn's id and starts nothing more.
    let env = Env::new();
    env.ok(&["ps"]);
    let marker = env.scratch().join("starts");
    let spawn = json!({
        "command": format!("echo started >> {}", marker.display()),
        "owner": "agent",
        "request_key": "home1-5f3a-7",
    });
    let mut first = Conn::open(&env);
    let hello = first.hello();
    assert!(
        hello["result"]["capabilities"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c == "spawn.request_key")),
        "{hello}"
    );
    let one = first.call(1, "spawn", spawn.clone());
    let id = one["result"]["session_id"]
        .as_str()
        .expect("a session id")
        .to_owned();
    drop(first);
    let mut second = Conn::open(&env);
    second.hello();
    let again = second.call(1, "spawn", spawn.clone());
    assert_eq!(again["result"]["session_id"], id.as_str(), "{again}");
    let other = second.call(
        2,
        "spawn",
        json!({"command": "true", "owner": "agent", "request_key": "home1-5f3a-8"}),
    );
    assert_ne!(other["result"]["session_id"], id.as_str(), "{other}");
    env.ok(&["wait", &id]);
    let rows = env.json(&["ps", "--all", "--json"]);
    let n_first = rows["processes"].as_array().map_or(0, |r| {
        r.iter()
            .filter(|r| r["command"].as_str().is_some_and(|c| c.contains("started")))
            .count()
    });
    assert_eq!(n_first, 1, "{rows}");
    assert_eq!(
        std::fs::read_to_string(&marker).expect("the job ran"),
        "started\n"
    );
    // A malformed key is refused, naming the field.
    let bad = second.call(
        3,
        "spawn",
        json!({"command": "true", "owner": "agent", "request_key": "a b"}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("request_key")),
        "{bad}"
    );
}
