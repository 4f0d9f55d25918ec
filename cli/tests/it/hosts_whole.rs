//! A far herd installed whole (herd and herd-shim) over a real
//! loopback sshd, and `herd hosts check` refusing a far herd whose jobs would
//! not survive a crash of its daemon.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::hosts::{
    completions_of, completions_stay_with_their_names, events_of, kill_far_daemon_and_doors,
    proxy_doors, sigkill, start_far_echoer,
};
use crate::sshd::{Sshd, configure, far_proxy};
use crate::support::{Env, HERD, alive, stderr, stdout, wait_until};

/// Generous: CI runs on two busy cores.
const DEADLINE: Duration = Duration::from_secs(60);

/// The `herd-shim` built beside the `herd` the tests run.
fn built_shim() -> PathBuf {
    Path::new(HERD).with_file_name("herd-shim")
}

/// A far `bin/` directory, a near home whose host `far` runs `bin/herd proxy`
/// over ssh, and whose `install` argv writes `bin/herd`.
fn installable(sshd: &Sshd, near: &Env, far: &Env) -> PathBuf {
    let bin = far.scratch().join("bin");
    std::fs::create_dir(&bin).expect("the temp dir is writable");
    let herd = bin.join("herd");
    let mut command = sshd.ssh();
    command.extend(far_proxy(far, &herd.display().to_string()));
    let mut install = sshd.ssh();
    let b = bin.display();
    install.push(format!(
        "cat > {b}/herd.new && chmod +x {b}/herd.new && mv {b}/herd.new {b}/herd"
    ));
    configure(near, &command, Some(&install));
    bin
}

/// Stops the far daemon with the far binary it runs.
fn stop_far(far: &Env, bin: &Path) {
    let _ = far
        .cmd_at(&bin.join("herd"), &["shutdown", "--yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

#[test]
fn hosts_install_sends_herd_shim_and_a_far_daemon_sigkill_keeps_a_notified_job() {
    // `hosts install` sends herd and herd-shim; the far side is checked
    // as doctor would; a SIGKILL of the far daemon then leaves a notified far job
    // running: every line, one completion, the real exit code.
    let Some(sshd) = Sshd::start() else { return };
    let far = Env::new();
    let near = Env::new();
    let bin = installable(&sshd, &near, &far);

    let installed = near.json(&["hosts", "install", "far", "--json"]);
    assert_eq!(installed["installed"], true, "{installed}");
    assert_eq!(installed["shim"], true, "{installed}");
    assert_eq!(
        std::fs::read(bin.join("herd-shim")).expect("the far shim exists"),
        std::fs::read(built_shim()).expect("the built shim reads"),
        "the far herd-shim is this one, byte for byte"
    );
    let check = near.json(&["hosts", "check", "far", "--json"]);
    assert_eq!(check["crash_survival"], true, "{check}");
    assert_eq!(check["far"]["supervisor"], "shim", "{check}");
    assert_eq!(
        check["far"]["shim"],
        bin.join("herd-shim").display().to_string(),
        "{check}"
    );
    let again = near.json(&["hosts", "install", "far", "--json"]);
    assert_eq!(again["installed"], false, "already whole: {again}");

    let marker = far.scratch().join("go");
    let script = format!(
        "for i in $(seq 1 20); do echo line $i; done; \
         while [ ! -e {m} ]; do sleep 0.05; done; \
         for i in $(seq 21 40); do echo line $i; sleep 0.01; done; exit 12",
        m = marker.display()
    );
    let id = near
        .ok(&["run", "--host", "far", "--notify", "--", &script])
        .trim()
        .to_owned();
    assert!(id.starts_with("far:proc_"), "{id}");
    assert!(
        wait_until(DEADLINE, || near.ok(&["logs", &id]).contains("line 20")).is_ok(),
        "the far job never printed its first lines"
    );
    let far_daemon = far.daemon_pid().expect("the far daemon runs");
    sigkill(far_daemon);
    assert!(wait_until(DEADLINE, || !alive(far_daemon)).is_ok());
    std::fs::write(&marker, b"").expect("the scratch dir is writable");

    let mut all = Vec::new();
    let found = wait_until(DEADLINE, || {
        all.extend(events_of(&near));
        !completions_of(&all, &id).is_empty()
    });
    assert!(found.is_ok(), "no completion arrived: {all:?}");
    let completions = completions_of(&all, &id);
    assert_eq!(completions.len(), 1, "{all:?}");
    assert_eq!(completions[0]["exit_code"], 12, "{all:?}");
    let logs = near.ok(&["logs", &id]);
    let lines: Vec<&str> = logs.lines().collect();
    let wanted: Vec<String> = (1..=40).map(|i| format!("line {i}")).collect();
    assert_eq!(lines, wanted, "every line, in order");
    // No second completion comes later.
    let second = near
        .ok(&["run", "--host", "far", "--notify", "--", "true"])
        .trim()
        .to_owned();
    let mut later = Vec::new();
    let found = wait_until(DEADLINE, || {
        later.extend(events_of(&near));
        !completions_of(&later, &second).is_empty()
    });
    assert!(found.is_ok(), "{later:?}");
    assert!(completions_of(&later, &id).is_empty(), "{later:?}");
    stop_far(&far, &bin);
}

#[test]
fn hosts_check_fails_loudly_on_a_far_herd_without_herd_shim() {
    // A far herd with no herd-shim beside it would run jobs inside its
    // daemon: `hosts check` says reachable but exits 1 naming the danger and the
    // fix, in text and in JSON.
    let Some(sshd) = Sshd::start() else { return };
    let far = Env::new();
    let near = Env::new();
    let bin = far.scratch().join("lonely");
    std::fs::create_dir(&bin).expect("the temp dir is writable");
    std::fs::copy(HERD, bin.join("herd")).expect("herd copies");
    let mut command = sshd.ssh();
    command.extend(far_proxy(&far, &bin.join("herd").display().to_string()));
    configure(&near, &command, None);

    let out = near.run(&["hosts", "check", "far"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stdout(&out).contains("host far: reachable"), "{out:?}");
    let err = stderr(&out);
    assert!(err.contains("without crash survival"), "{err}");
    assert!(err.contains("herd hosts install far"), "the fix: {err}");

    let json = near.run(&["hosts", "check", "far", "--json"]);
    assert_eq!(json.status.code(), Some(1), "{json:?}");
    let answer: Value = serde_json::from_str(&stdout(&json)).expect("JSON on stdout");
    assert_eq!(answer["crash_survival"], false, "{answer}");
    assert_eq!(answer["far"]["supervisor"], "in_process", "{answer}");
    assert!(answer["far"]["shim"].is_null(), "{answer}");
    stop_far(&far, &bin);
}

/// Writes host tables `names` into `local`'s config, each a local door to the
/// far home (`env HERD_HOME=<far> herd proxy`).
pub(crate) fn aliases(local: &Env, far: &Env, names: &[&str]) {
    let argv = far_proxy(far, HERD);
    let mut text = String::new();
    for name in names {
        text.push_str(&format!(
            "[hosts.{name}]\ncommand = {}\n",
            crate::sshd::toml_array(&argv)
        ));
    }
    std::fs::write(local.home().join("config.toml"), text).expect("the home is writable");
}

#[test]
fn two_host_names_of_one_far_home_keep_their_completions_apart() {
    // Two host names that reach the same far home: every completion
    // arrives once, under the name its job was started with; a far id has one
    // qualified id here (the other name refuses it, naming the right one).
    let local = Env::new();
    let far = Env::new();
    aliases(&local, &far, &["far1", "far2"]);
    let started = completions_stay_with_their_names(&local, &["far1", "far2"], 5, "sleep 0.2");

    let far_id = started[0].trim_start_matches("far1:");
    let other = local.run(&["poll", &format!("far2:{far_id}")]);
    assert_eq!(other.status.code(), Some(2), "{other:?}");
    assert!(
        stderr(&other).contains(&format!("far1:{far_id}")),
        "names the id it was started as: {other:?}"
    );
}

#[test]
fn two_local_homes_sharing_a_far_home_each_find_their_own_name() {
    // Far names are per local home: two homes that share a far home
    // both name a job `web`, and `far:web` is each one's own.
    let far = Env::new();
    let one = Env::new();
    let two = Env::new();
    aliases(&one, &far, &["far"]);
    aliases(&two, &far, &["far"]);
    let a = one
        .ok(&[
            "run",
            "--host",
            "far",
            "--name",
            "web",
            "--",
            "echo from-one; sleep 30",
        ])
        .trim()
        .to_owned();
    let b = two
        .ok(&[
            "run",
            "--host",
            "far",
            "--name",
            "web",
            "--",
            "echo from-two; sleep 30",
        ])
        .trim()
        .to_owned();
    assert_ne!(a, b);
    for (home, id, said) in [(&one, &a, "from-one"), (&two, &b, "from-two")] {
        let polled = home.json(&["poll", "far:web", "--json"]);
        assert_eq!(polled["session_id"], id.as_str(), "{polled}");
        assert!(
            wait_until(DEADLINE, || home.ok(&["logs", "far:web"]).contains(said)).is_ok(),
            "far:web in this home is its own job"
        );
    }
    let missing = one.run(&["poll", "far:nosuchname"]);
    assert_eq!(missing.status.code(), Some(2), "{missing:?}");
    one.ok(&["kill", "far:web"]);
    two.ok(&["kill", "far:web"]);
}

/// Kills, when dropped, every process whose pid was appended to `file` (the
/// silent doors below), so no `sleep 60` outlives its test, failed or not.
struct KillListed(PathBuf);

impl Drop for KillListed {
    fn drop(&mut self) {
        let listed = std::fs::read_to_string(&self.0).unwrap_or_default();
        for pid in listed.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            sigkill(pid);
        }
    }
}

#[test]
fn ps_all_hosts_answers_within_seconds_past_a_silent_door() {
    // A host whose door never answers (its hello deadline is 15 s) does
    // not hold up a listing: `ps --all-hosts` answers in about a second (bounded
    // at 7 s for a whole client on busy CI), with the local and far rows, and
    // marks the silent host as not answering in time.
    let local = Env::new();
    let far = Env::new();
    aliases(&local, &far, &["far"]);
    let pids = local.scratch().join("silent-doors.pids");
    let _doors = KillListed(pids.clone());
    let config = local.home().join("config.toml");
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str(&format!(
        "[hosts.silent]\ncommand = [\"sh\", \"-c\", \"echo $$ >> {}; exec sleep 60\"]\n",
        pids.display()
    ));
    std::fs::write(&config, text).expect("config");
    let far_job = local
        .ok(&["run", "--host", "far", "--", "sleep 30"])
        .trim()
        .to_owned();
    let local_job = local.ok(&["run", "--", "sleep 30"]).trim().to_owned();
    for _ in 0..2 {
        let began = std::time::Instant::now();
        let answer = local.json(&["ps", "--all-hosts", "--json"]);
        let took = began.elapsed();
        assert!(took < Duration::from_secs(7), "took {took:?}: {answer}");
        let rows = answer["processes"].as_array().expect("rows");
        for id in [&far_job, &local_job] {
            assert!(
                rows.iter().any(|r| r["session_id"] == id.as_str()),
                "{id}: {answer}"
            );
        }
        let hosts = answer["hosts"].as_array().expect("host states");
        let silent = hosts
            .iter()
            .find(|h| h["name"] == "silent")
            .expect("the silent host's state");
        assert_eq!(silent["answered"], false, "{answer}");
        // far's answer may miss the listing's 0.9 s on a busy machine (its
        // last known row stands in): only its state being there is required.
        assert!(hosts.iter().any(|h| h["name"] == "far"), "{answer}");
    }
    let out = local.run(&["ps", "--all-hosts"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stderr(&out).contains("host silent did not answer in time"),
        "{out:?}"
    );
    local.ok(&["kill", &far_job]);
    local.ok(&["kill", &local_job]);
}

#[test]
fn attach_to_a_far_pty_job_shows_it_takes_keys_and_ends() {
    // `herd attach HOST:ID` of a far PTY job is an attach (its screen,
    // typed lines answered, its end said), not a silent wait for the job's end.
    use herd_test_support::tmux::Tmux;
    let local = Env::new();
    let far = Env::new();
    aliases(&local, &far, &["far"]);
    let id = start_far_echoer(&local, &far);
    assert!(
        wait_until(DEADLINE, || local.ok(&["logs", &id]).contains("far-ready")).is_ok(),
        "the far job never started"
    );
    let tmux = Tmux::start(
        local.scratch().join("tmux.sock"),
        "far",
        local.home(),
        (100, 30),
        &[],
    )
    .joined();
    tmux.type_line(&format!("clear; {HERD} attach {id}; echo ended=$?"));
    tmux.wait_for("the far job's screen", |s| s.contains("far-ready"));
    tmux.type_line("hello far");
    tmux.wait_for("the far job's answer", |s| s.contains("got:hello far"));
    tmux.type_line("quit");
    let screen = tmux.wait_for("attach to end with the job", |s| {
        s.lines().any(|l| l.contains("ended="))
    });
    assert!(screen.contains(&format!("{id} exited 3")), "{screen}");
    assert!(screen.contains("ended=1"), "{screen}");
}

#[test]
fn far_logs_follow_rides_through_killed_doors_and_a_far_daemon_restart() {
    // `logs -f` of a far job goes on through its doors killed and the
    // far daemon SIGKILLed (the next door starts another): every line once, in
    // order, and the job's real end.
    use std::io::Read;
    let local = Env::new();
    let far = Env::new();
    aliases(&local, &far, &["far"]);
    let go = |n: u32| far.scratch().join(format!("go{n}"));
    let script = format!(
        "for i in $(seq 1 10); do echo line $i; done; \
         while [ ! -e {g1} ]; do sleep 0.05; done; \
         for i in $(seq 11 20); do echo line $i; done; \
         while [ ! -e {g2} ]; do sleep 0.05; done; \
         for i in $(seq 21 30); do echo line $i; done; exit 7",
        g1 = go(1).display(),
        g2 = go(2).display()
    );
    let id = local
        .ok(&["run", "--host", "far", "--", &script])
        .trim()
        .to_owned();
    let mut follower = local
        .cmd(&["logs", "-f", &id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("herd logs -f starts");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut out = follower.stdout.take().expect("piped");
    let sink = std::sync::Arc::clone(&seen);
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            let mut seen = sink
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let shown = |text: &str| {
        seen.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(text)
    };
    assert!(
        wait_until(DEADLINE, || shown("line 10\n")).is_ok(),
        "no first lines"
    );
    // 1. Every door dies.
    let doors = proxy_doors(&far);
    assert!(!doors.is_empty(), "the doors are open");
    for pid in doors {
        sigkill(pid);
    }
    std::fs::write(go(1), b"").expect("the scratch dir is writable");
    assert!(
        wait_until(DEADLINE, || shown("line 20\n")).is_ok(),
        "not past the killed doors"
    );
    // 2. The far daemon dies; the next door starts another.
    kill_far_daemon_and_doors(&far, proxy_doors);
    std::fs::write(go(2), b"").expect("the scratch dir is writable");
    let mut status = None;
    let ended = wait_until(DEADLINE, || {
        status = follower.try_wait().ok().flatten();
        status.is_some()
    });
    if ended.is_err() {
        let _ = follower.kill();
    }
    let _ = reader.join();
    let mut err = String::new();
    if let Some(mut e) = follower.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let text = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    assert!(ended.is_ok(), "logs -f never ended: {text}\n{err}");
    let wanted: Vec<String> = (1..=30).map(|i| format!("line {i}")).collect();
    assert_eq!(text.lines().collect::<Vec<_>>(), wanted, "stderr: {err}");
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{err}");
    assert!(err.contains("exited 7"), "{err}");
}

#[test]
fn a_changed_host_key_is_called_a_possible_attack_not_fixed_with_ssh_keyscan() {
    // Ssh meeting another key than the known one: the advice says it
    // may be an attack and how to verify (the fingerprint ssh saw, the old key's
    // line), and never to append whatever the host now sends.
    let Some(sshd) = Sshd::start() else { return };
    let far = Env::new();
    let near = Env::new();
    let other = far.scratch().join("other_key");
    let made = crate::support::raw_command(Path::new("ssh-keygen"))
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&other)
        .stdin(Stdio::null())
        .output()
        .expect("ssh-keygen runs");
    assert!(made.status.success(), "{made:?}");
    let known = std::fs::read_to_string(sshd.file("known_hosts")).expect("known_hosts");
    let host = known.split_whitespace().next().expect("the host field");
    let key = std::fs::read_to_string(other.with_extension("pub")).expect("the other key");
    let mut fields = key.split_whitespace();
    let (kind, body) = (fields.next().expect("type"), fields.next().expect("key"));
    let changed = far.scratch().join("changed_known_hosts");
    std::fs::write(&changed, format!("{host} {kind} {body}\n")).expect("writable");
    let user_key = sshd.file("user_key").display().to_string();
    let known_opt = format!("UserKnownHostsFile={}", changed.display());
    let mut command = sshd.ssh_with(&[
        "-i",
        &user_key,
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        &known_opt,
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
    ]);
    command.extend(far_proxy(&far, HERD));
    configure(&near, &command, None);
    let out = near.run(&["hosts", "check", "far"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let err = stderr(&out);
    assert!(err.contains("may be an attack"), "{err}");
    assert!(err.contains("SHA256:"), "the fingerprint to compare: {err}");
    assert!(
        err.contains(&format!("{}:1", changed.display())),
        "the old key's line: {err}"
    );
    let fix = err.split("fix:").nth(1).unwrap_or_default();
    assert!(!fix.contains("ssh-keyscan"), "{err}");
    assert!(far.daemon_pid().is_none(), "nothing ran on the far side");
}

#[test]
fn a_far_permission_error_names_the_path_not_a_password() {
    // The far user cannot reach the far home: the advice names the
    // path, not passwords or BatchMode. The far side runs as `nobody` (setpriv)
    // with a home under a directory only root may enter.
    let Some(sshd) = Sshd::start() else { return };
    let near = Env::new();
    let dir = tempfile::Builder::new()
        .prefix("herd-perm")
        .tempdir_in("/var/lib")
        .expect("/var/lib is writable (tests run as root)");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let herd = dir.path().join("herd");
    std::fs::copy(HERD, &herd).expect("herd copies");
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).expect("mkdir");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let home = locked.join("home");
    let mut command = sshd.ssh();
    command.extend(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "env",
            &format!("HERD_HOME={}", home.display()),
            &herd.display().to_string(),
            "proxy",
        ]
        .map(str::to_owned),
    );
    configure(&near, &command, None);
    let out = near.run(&["hosts", "check", "far"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let err = stderr(&out);
    let fix = err.split("fix:").nth(1).unwrap_or_default();
    assert!(
        fix.contains(&home.display().to_string()),
        "names the path: {err}"
    );
    assert!(
        !fix.contains("BatchMode") && !fix.contains("password"),
        "{err}"
    );
}

#[test]
fn an_unreachable_host_shows_what_is_known_stale_never_a_wrong_state() {
    // While a host does not answer, its jobs show their last known
    // state, marked stale: a killed job and an exited one as ended (with how),
    // a job started just before as running with its pid.
    let local = Env::new();
    let far = Env::new();
    aliases(&local, &far, &["far"]);
    let running = local
        .ok(&["run", "--host", "far", "--", "sleep 30"])
        .trim()
        .to_owned();
    let killed = local
        .ok(&["run", "--host", "far", "--", "sleep 30"])
        .trim()
        .to_owned();
    let exited = local
        .ok(&["run", "--host", "far", "--notify", "--", "exit 4"])
        .trim()
        .to_owned();
    // Seen once by a listing, then killed and finished.
    local.ok(&["ps", "--host", "far"]);
    local.ok(&["kill", &killed]);
    let mut all = Vec::new();
    assert!(
        wait_until(DEADLINE, || {
            all.extend(events_of(&local));
            !completions_of(&all, &exited).is_empty()
        })
        .is_ok(),
        "{all:?}"
    );
    let fresh = local
        .ok(&["run", "--host", "far", "--", "sleep 30"])
        .trim()
        .to_owned();
    // The host stops answering: its door fails from the next daemon on.
    let config = local.home().join("config.toml");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replace("command = [", "command = [\"false\", "),
    )
    .expect("config");
    local.ok(&["shutdown", "--keep-jobs"]);
    let ps = local.json(&["ps", "--host", "far", "--all", "--json"]);
    let rows = ps["processes"].as_array().expect("rows");
    let row = |id: &str| {
        rows.iter()
            .find(|r| r["session_id"] == id)
            .unwrap_or_else(|| panic!("{id} is not shown: {ps}"))
            .clone()
    };
    for id in [&running, &killed, &exited, &fresh] {
        assert_eq!(row(id)["stale"], true, "{ps}");
    }
    assert_eq!(row(&running)["status"], "running", "{ps}");
    assert_eq!(row(&killed)["status"], "exited", "{ps}");
    assert_eq!(row(&killed)["completion_reason"], "killed", "{ps}");
    assert_eq!(row(&exited)["status"], "exited", "{ps}");
    assert_eq!(row(&exited)["exit_code"], 4, "{ps}");
    assert_eq!(row(&fresh)["status"], "running", "{ps}");
    assert!(row(&fresh)["pid"].as_u64().is_some_and(|p| p > 0), "{ps}");
    std::fs::write(&config, text).expect("config");
    local.ok(&["shutdown", "--keep-jobs"]);
    for id in [&running, &fresh] {
        local.ok(&["kill", id]);
    }
}

#[test]
fn far_streams_and_waits_ride_the_hosts_mux_door_not_a_door_each() {
    // Once a host's doors are open, `run --wait`, `logs -f` and `wait`
    // of far jobs open no new door (over ssh, no new connection): their streams
    // and waits are channels of the host's mux door.
    let local = Env::new();
    let far = Env::new();
    aliases(&local, &far, &["far"]);
    let out = local.ok(&["run", "--host", "far", "--wait", "--", "echo warm"]);
    assert!(out.contains("warm"), "{out}");
    let mut before = proxy_doors(&far);
    before.sort_unstable();
    assert!(!before.is_empty(), "the doors are open");
    for n in 0..3 {
        let out = local.ok(&[
            "run",
            "--host",
            "far",
            "--wait",
            "--",
            &format!("echo round-{n}"),
        ]);
        assert!(out.contains(&format!("round-{n}")), "{out}");
    }
    let id = local
        .ok(&["run", "--host", "far", "--", "echo followed; sleep 0.3"])
        .trim()
        .to_owned();
    let followed = local.ok(&["logs", "-f", &id]);
    assert!(followed.contains("followed"), "{followed}");
    let waited = local.run(&["wait", &id]);
    assert!(waited.status.success(), "{waited:?}");
    let mut after = proxy_doors(&far);
    after.sort_unstable();
    assert_eq!(
        before, after,
        "no door was opened or lost for the streams and waits"
    );
}
