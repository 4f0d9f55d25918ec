//! A real network cut under a host link.
//!
//! [`Netns`] makes two network namespaces joined by a veth pair: `near`
//! (10.213.0.1) and `far` (10.213.0.2). A real sshd runs in `far`
//! ([`Sshd::start_in`]); the host's door is `ip netns exec NEAR ssh … 10.213.0.2
//! env HERD_HOME=<far home> herd proxy`, so the local daemon's doors cross the
//! veth. Cutting is `ip link set … down` on the far end (packets vanish, as on a
//! pulled cable: no reset reaches either side), restoring is `up`; ssh's
//! keep-alives (`ServerAliveInterval=1`) notice a cut in seconds.
//!
//! Both ends live in namespaces of their own, so the addresses and sshd's port
//! never meet this machine's real networks, and concurrent runs do not collide
//! (the namespaces and veths are named after the test process and a counter).
//! [`Netns`]'s `Drop` deletes them even when a test fails, and a new one first
//! deletes those of test processes that no longer run (killed before their
//! `Drop`).
//!
//! Network namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2:
//! without them a test says why on stderr and passes, and under
//! `HERD_REQUIRE_NETNS=1` (which `.ci/run` sets, after installing iproute2) it
//! fails.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::hosts::{Pair, completions_of, sigkill};
use crate::sshd::Sshd;
use crate::support::{alive, raw_command, stderr, wait_until};

/// Generous: CI runs on two busy cores.
const DEADLINE: Duration = Duration::from_secs(60);

/// The near end's address (the local daemon's doors).
const NEAR_ADDR: &str = "10.213.0.1";
/// The far end's address (sshd).
const FAR_ADDR: &str = "10.213.0.2";

/// What every namespace of these tests is called first.
const PREFIX: &str = "herd-it-";

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Two network namespaces joined by a veth pair, deleted on drop.
#[derive(Debug)]
struct Netns {
    near: String,
    far: String,
    /// The veth end in `far` (the one cut).
    far_veth: String,
}

impl Netns {
    /// Makes them, or says why not: `None` (with a note on stderr) when this
    /// machine does not allow it, a panic under `HERD_REQUIRE_NETNS=1`.
    fn create() -> Option<Netns> {
        sweep_stale();
        let pid = std::process::id();
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        // Interface names have at most 15 bytes: `hn`, pid and counter in hex, end.
        let tag = format!("{pid:x}-{n:x}");
        let net = Netns {
            near: format!("{PREFIX}{pid}-{n}-near"),
            far: format!("{PREFIX}{pid}-{n}-far"),
            far_veth: format!("hn{tag}f"),
        };
        let (near, far, far_veth) = (&net.near, &net.far, &net.far_veth);
        let near_veth = format!("hn{tag}n");
        let steps = [
            format!("netns add {near}"),
            format!("netns add {far}"),
            format!("link add {near_veth} netns {near} type veth peer name {far_veth} netns {far}"),
            format!("-n {near} addr add {NEAR_ADDR}/30 dev {near_veth}"),
            format!("-n {far} addr add {FAR_ADDR}/30 dev {far_veth}"),
            format!("-n {near} link set {near_veth} up"),
            format!("-n {far} link set {far_veth} up"),
            format!("-n {near} link set lo up"),
            format!("-n {far} link set lo up"),
        ];
        for step in &steps {
            // No name has a space in it.
            let args: Vec<&str> = step.split(' ').collect();
            if let Err(why) = ip(&args) {
                // `net` drops here, deleting what was made.
                skipped(&format!("network namespaces are not available here: {why}"));
                return None;
            }
        }
        Some(net)
    }

    /// `ip netns exec NEAR`: a door's argv starts with it.
    fn near_exec(&self) -> Vec<String> {
        ["ip", "netns", "exec", &self.near]
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    }

    /// The link goes down on the far end (the near end loses its carrier).
    fn cut(&self) {
        ip(&["-n", &self.far, "link", "set", &self.far_veth, "down"])
            .unwrap_or_else(|why| panic!("the link cannot be cut: {why}"));
    }

    fn restore(&self) {
        ip(&["-n", &self.far, "link", "set", &self.far_veth, "up"])
            .unwrap_or_else(|why| panic!("the link cannot be restored: {why}"));
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // The veth pair goes with the namespaces (once their last process ends).
        let _ = ip(&["netns", "del", &self.near]);
        let _ = ip(&["netns", "del", &self.far]);
    }
}

/// Runs `ip args`; its stderr when it fails.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = raw_command(Path::new("ip"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("`ip` cannot run ({e}; apt-get install iproute2)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), stderr(&out).trim()))
    }
}

/// Deletes the namespaces of test processes that no longer run.
fn sweep_stale() {
    let Ok(out) = raw_command(Path::new("ip"))
        .args(["netns", "list"])
        .stdin(Stdio::null())
        .output()
    else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let owner = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok());
        if let Some(pid) = owner
            && !alive(pid)
        {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

#[expect(
    clippy::print_stderr,
    reason = "a skipped netns test says so and what it needs"
)]
fn skipped(why: &str) {
    if std::env::var("HERD_REQUIRE_NETNS").as_deref() == Ok("1") {
        panic!("HERD_REQUIRE_NETNS=1 but {why}");
    }
    eprintln!("skipped: {why}");
}

/// The local daemon's entry for host `far` (`herd hosts list --json`).
fn host_state(pair: &Pair) -> Value {
    let listed = pair.local.json(&["hosts", "list", "--json"]);
    listed["hosts"]
        .as_array()
        .and_then(|hosts| hosts.iter().find(|h| h["name"] == "far"))
        .map(|h| h["daemon"].clone())
        .unwrap_or(Value::Null)
}

/// Pids of the ssh clients of this pair's doors.
fn ssh_doors(pair: &Pair) -> Vec<i32> {
    crate::hosts::ssh_doors(&pair.far)
}

#[test]
fn network_cut_mid_job_then_restored_delivers_the_completion_once() {
    // A real network cut (a veth pair between namespaces, taken down)
    // in the middle of a far job: the host is unreachable and says since when,
    // the job goes on on the far side and ends there, and once the link is back
    // its completion reaches the local owner exactly once.
    let Some(net) = Netns::create() else { return };
    let Some(sshd) = Sshd::start_in(&net.far, FAR_ADDR) else {
        return;
    };
    // Keep-alives every second, three unanswered end the door; a door that
    // cannot connect gives up after 3 s.
    let mut door = net.near_exec();
    door.extend(sshd.ssh_plus(&[
        "-o",
        "ServerAliveInterval=1",
        "-o",
        "ServerAliveCountMax=3",
        "-o",
        "ConnectTimeout=3",
    ]));
    let pair = Pair::through(door);
    let marker = pair.far.scratch().join("go");
    let id = pair.run(&[
        "--notify",
        "--",
        &format!(
            "echo started; while [ ! -e {} ]; do sleep 0.05; done; echo finished",
            marker.display()
        ),
    ]);
    let far_id = id.trim_start_matches("far:").to_owned();
    // The control door and the events door are open, across the veth.
    assert!(
        wait_until(DEADLINE, || ssh_doors(&pair).len() >= 2).is_ok(),
        "the doors never opened: {:?}",
        ssh_doors(&pair)
    );
    assert_eq!(host_state(&pair)["status"], "connected");

    net.cut();
    let mut state = Value::Null;
    let noticed = wait_until(DEADLINE, || {
        state = host_state(&pair);
        state["status"] == "unreachable"
    });
    assert!(
        noticed.is_ok(),
        "the cut was never noticed: {state} {:?}",
        ssh_doors(&pair)
    );
    assert!(state["since"].is_string(), "{state}");
    // A command that needs the host says it is unreachable, and since when.
    let poll = pair.local.run(&["poll", &id]);
    assert_eq!(poll.status.code(), Some(3), "{}", stderr(&poll));
    let said = stderr(&poll);
    assert!(
        said.contains("host far is unreachable since"),
        "the reason and since when: {said}"
    );
    // The job goes on on the far side, and ends there while the link is down.
    let far_poll = pair.far.json(&["poll", &far_id, "--json"]);
    assert_eq!(far_poll["status"], "running", "{far_poll}");
    std::fs::write(&marker, b"").expect("the scratch dir is writable");
    let mut far_poll = Value::Null;
    let ended = wait_until(DEADLINE, || {
        far_poll = pair.far.json(&["poll", &far_id, "--json"]);
        far_poll["status"] != "running"
    });
    assert!(ended.is_ok(), "the far job never ended: {far_poll}");
    assert_eq!(far_poll["exit_code"], 0, "{far_poll}");
    // Nothing can have arrived yet: the only way here is down.
    let mut all = pair.events();
    assert!(
        completions_of(&all, &id).is_empty(),
        "a completion crossed a cut link: {all:?}"
    );
    assert_eq!(host_state(&pair)["status"], "unreachable");

    net.restore();
    all.extend(pair.events_until(|got| !completions_of(got, &id).is_empty()));
    let first = completions_of(&all, &id);
    assert_eq!(first.len(), 1, "{all:?}");
    assert_eq!(first[0]["exit_code"], 0, "{all:?}");
    assert_eq!(first[0]["owner_task_id"], "cli", "{all:?}");
    assert!(
        first[0]["output"]
            .as_str()
            .is_some_and(|o| o.contains("finished")),
        "{all:?}"
    );
    assert!(
        wait_until(DEADLINE, || host_state(&pair)["status"] == "connected").is_ok(),
        "the host never showed connected again: {}",
        host_state(&pair)
    );

    // A further reconnect (every door killed), then a second job's completion,
    // which comes after any replay of the first would: the first is not there.
    let killed = ssh_doors(&pair);
    for pid in &killed {
        sigkill(*pid);
    }
    // Spawned only once the link has seen its doors die (or has already opened
    // new ones): a spawn sent into a door that is dying is answered unreachable
    // (it may have started), not sent again.
    let settled = wait_until(DEADLINE, || {
        let now = ssh_doors(&pair);
        let status = host_state(&pair)["status"].clone();
        killed.iter().all(|pid| !alive(*pid))
            && now.iter().all(|pid| !killed.contains(pid))
            && (status == "unreachable" || (status == "connected" && !now.is_empty()))
    });
    assert!(
        settled.is_ok(),
        "the link never saw its doors die: {:?} {}",
        ssh_doors(&pair),
        host_state(&pair)
    );
    let second = pair.run(&["--notify", "--", "true"]);
    let later = pair.events_until(|got| !completions_of(got, &second).is_empty());
    assert!(
        completions_of(&later, &id).is_empty(),
        "the first completion came again: {later:?}"
    );
    assert_eq!(completions_of(&later, &second).len(), 1, "{later:?}");
}
