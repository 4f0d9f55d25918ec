//! The owner of a `herd mcp` started without `--owner` (or `$HERD_OWNER`): derived
//! from the host process that runs the server, so the servers one host starts one
//! after another (a server per call, a restart) act for the same agent, and two
//! hosts are two agents.
//!
//! The host is found by walking up from the server's parent through wrappers
//! (`sh`, `bash`, `env`, `npx`, `uvx`, `timeout`, node or python running npm/npx,
//! …). Its identity is its pid and start time (with the boot id, so a reused pid
//! is another host), hashed to `mcp-<12 hex>`. Two servers alive at the same time
//! under one host (a host running several agents) must stay two owners: each
//! server holds an exclusive `flock` on `<home>/run/owners/<owner>.lock` while it
//! runs, and a server that finds the first slot held takes the next one (slot 2,
//! 3, …, each its own owner). The lock goes with the process, however it ends.
//! A server with an explicit `--owner` holds that owner's lock shared, so several
//! of them act for one owner at once and the sweep still sees the owner live.
//!
//! The daemon sweeps the files of owners that are gone ([`sweep_hourly`]: at its
//! start and hourly), so hosts that come and go leave no trail in `<home>/run/owners/`.

use std::fs::File;
use std::path::{Path, PathBuf};

use herd_persistence::Home;

/// How many servers one host may run at once, each its own owner; past it, a
/// server gets a fresh owner of its own.
const MAX_SLOTS: u32 = 64;

/// How many ancestors are looked through for the host.
const MAX_DEPTH: usize = 16;

/// Programs that only start another one: the host is above them.
const WRAPPERS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "mksh",
    "fish",
    "busybox",
    "env",
    "npx",
    "npm",
    "pnpm",
    "pnpx",
    "yarn",
    "bunx",
    "uvx",
    "uv",
    "pipx",
    "corepack",
    "timeout",
    "nohup",
    "setsid",
    "stdbuf",
    "nice",
    "ionice",
    "chrt",
    "taskset",
    "tini",
    "dumb-init",
    "catatonit",
    "su",
    "sudo",
    "runuser",
    "script",
    "xargs",
];

/// Interpreters that are a wrapper when the script they run is one of [`WRAPPERS`]
/// (`node …/npx-cli.js`, `python -m uv`…), and the host otherwise.
const LAUNCHER_INTERPRETERS: &[&str] = &["node", "nodejs", "bun", "deno", "python", "python3"];

/// The owner a server acts for, and the lock that keeps it its own while it runs.
#[derive(Debug)]
pub(crate) struct HostOwner {
    pub(crate) owner: String,
    /// Held for the server's lifetime; `None` when no lock could be taken.
    _lock: Option<File>,
}

/// One process of the ancestry: its pid, parent, start time, name and arguments.
#[derive(Debug, Clone)]
struct Proc {
    pid: u32,
    ppid: u32,
    start_ticks: u64,
    comm: String,
    argv: Vec<String>,
}

fn read_proc(pid: u32) -> Option<Proc> {
    let stat = crate::sys::stat(pid)?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    // After the name: state (field 3), ppid (4), …, starttime (22).
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let start_ticks = fields.get(19)?.parse().ok()?;
    let argv = crate::sys::cmdline(pid)
        .map(|raw| {
            raw.split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default();
    Some(Proc {
        pid,
        ppid,
        start_ticks,
        comm,
        argv,
    })
}

/// The last path component of `path`, without a version suffix such as `3.12`.
fn program_name(path: &str) -> &str {
    let base = Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(path);
    base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')
}

/// Whether `proc` only starts another program.
fn is_wrapper(proc: &Proc) -> bool {
    let comm = proc.comm.as_str();
    // npm's own title is "npm exec …", "npm run …".
    let comm_word = comm.split_whitespace().next().unwrap_or(comm);
    if WRAPPERS.contains(&comm_word) || WRAPPERS.contains(&program_name(comm_word)) {
        return true;
    }
    let interpreter = proc.argv.first().map_or(comm, |a| program_name(a));
    if !LAUNCHER_INTERPRETERS.contains(&interpreter)
        && !LAUNCHER_INTERPRETERS.contains(&program_name(comm))
    {
        return false;
    }
    // The script (or `-m module`) the interpreter runs.
    let mut args = proc.argv.iter().skip(1);
    let script = loop {
        match args.next() {
            Some(flag) if flag == "-m" => break args.next(),
            Some(flag) if flag.starts_with('-') => {}
            other => break other,
        }
    };
    script.is_some_and(|s| {
        let name = program_name(s);
        let stem = name.split(['-', '.']).next().unwrap_or(name);
        WRAPPERS.contains(&stem)
            || s.contains("/npm/bin/")
            || s.contains("/node_modules/.bin/")
            || s.contains("/corepack/")
    })
}

/// The host: the first ancestor above the server's wrappers (the topmost wrapper
/// below init when there is none).
fn find_host() -> Option<Proc> {
    let mut current = read_proc(std::os::unix::process::parent_id())?;
    for _ in 0..MAX_DEPTH {
        if !is_wrapper(&current) || current.ppid <= 1 {
            return Some(current);
        }
        match read_proc(current.ppid) {
            Some(parent) => current = parent,
            None => return Some(current),
        }
    }
    Some(current)
}

/// FNV-1a: a hash that is the same in every build, so a new herd keeps the owner.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.iter().chain(&[0xff]) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// The owner of `host`'s server in `slot` (1 for the first server alive at once).
fn owner_of(host: &Proc, boot_id: &str, slot: u32) -> String {
    let hash = fnv1a(&[
        boot_id.trim().as_bytes(),
        &host.pid.to_le_bytes(),
        &host.start_ticks.to_le_bytes(),
        &slot.to_le_bytes(),
    ]);
    format!("mcp-{:012x}", hash & 0xffff_ffff_ffff)
}

/// How a server holds its owner's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// A derived owner: one server alone (the next one takes the next slot).
    Exclusive,
    /// An explicit `--owner`: every server of that owner at once. The sweep's
    /// exclusive lock fails while any of them holds it, so their files are kept.
    Shared,
}

/// How long a shared lock waits out the sweep's brief exclusive hold.
const SHARED_TRIES: u32 = 100;
const SHARED_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// Takes `file`'s lock as `hold` says; `false` when another holder has it.
fn try_hold(file: &File, hold: Hold) -> bool {
    match hold {
        Hold::Exclusive => file.try_lock().is_ok(),
        // Only the sweep (briefly) or a derived owner's server of the same name
        // holds it exclusively: wait the sweep out, then give up on the other.
        Hold::Shared => (0..SHARED_TRIES).any(|try_no| {
            if try_no > 0 {
                #[expect(
                    clippy::disallowed_methods,
                    reason = "flock has no timed wait; the sweep's hold is brief and the tries are bounded"
                )]
                std::thread::sleep(SHARED_RETRY);
            }
            file.try_lock_shared().is_ok()
        }),
    }
}

/// Takes the lock of `owner` as `hold` says, when no other holder keeps it from
/// that. A lock file the sweep removed while it was being taken is not held by
/// anything: open it again.
fn lock(dir: &Path, owner: &str, hold: Hold) -> Option<File> {
    use std::os::unix::fs::MetadataExt;
    let path = dir.join(format!("{owner}.lock"));
    for _ in 0..3 {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|err| tracing::debug!(%owner, error = %err, "cannot open the owner lock"))
            .ok()?;
        if !try_hold(&file, hold) {
            return None;
        }
        let same = match (file.metadata(), std::fs::metadata(&path)) {
            (Ok(held), Ok(named)) => held.dev() == named.dev() && held.ino() == named.ino(),
            _ => false,
        };
        if same {
            return Some(file);
        }
    }
    None
}

/// The directory of the owners' lock and read-cursor files.
pub(crate) fn owners_dir(home: &Home) -> PathBuf {
    home.run_dir().join("owners")
}

/// Removes the lock and read-cursor files of owners that are gone: no live server
/// holds the owner's lock and `is_kept` (the daemon's registry: the owner still
/// has sessions or undelivered notices) says no. Runs off the session table's
/// lock (file IO; `is_kept` takes it briefly per owner). A cursor file whose name
/// had characters escaped (`_`) is kept: its owner cannot be told from its name.
/// Returns the owners swept.
pub(crate) fn sweep(home: &Home, is_kept: impl Fn(&str) -> bool) -> Vec<String> {
    let dir = owners_dir(home);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut owners: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let owner = name
                .strip_suffix(".lock")
                .or_else(|| name.strip_suffix(".read.json"))?;
            (!owner.is_empty() && !owner.contains('_')).then(|| owner.to_owned())
        })
        .collect();
    owners.sort_unstable();
    owners.dedup();
    let mut swept = Vec::new();
    for owner in owners {
        // Held while the files go, so no server takes this owner meanwhile
        // (`lock` checks that the file it locked is still the one named).
        let _held = match std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join(format!("{owner}.lock")))
        {
            Ok(file) if file.try_lock().is_ok() => Some(file),
            Ok(_) => continue,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => {
                tracing::warn!(%owner, error = %err, "cannot open an owner lock to sweep it");
                continue;
            }
        };
        if is_kept(&owner) {
            continue;
        }
        for file in [format!("{owner}.read.json"), format!("{owner}.lock")] {
            match std::fs::remove_file(dir.join(&file)) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => {
                    tracing::warn!(%owner, %file, error = %err, "cannot remove a gone owner's file")
                }
            }
        }
        swept.push(owner);
    }
    if !swept.is_empty() {
        tracing::info!(
            owners = swept.len(),
            "swept the files of owners that are gone"
        );
    }
    swept
}

/// The owner of a server started without `--owner`: the host's first free slot,
/// locked; a fresh owner when the host or the lock directory cannot be found.
pub(crate) fn host_owner(home: &Home) -> HostOwner {
    let fresh = || HostOwner {
        owner: super::fresh_owner(),
        _lock: None,
    };
    let Some(host) = find_host() else {
        tracing::debug!("no host process found; a fresh owner");
        return fresh();
    };
    let dir = owners_dir(home);
    if let Err(err) = crate::config::create_home(home)
        .and_then(|()| home.ensure_dir(&dir).map_err(anyhow::Error::from))
    {
        tracing::warn!(error = %err, "cannot keep owner locks; a fresh owner");
        return fresh();
    }
    let boot_id = crate::sys::boot_id();
    for slot in 1..=MAX_SLOTS {
        let owner = owner_of(&host, &boot_id, slot);
        if let Some(file) = lock(&dir, &owner, Hold::Exclusive) {
            tracing::debug!(%owner, host = host.pid, comm = %host.comm, slot, "owner derived from the host");
            return HostOwner {
                owner,
                _lock: Some(file),
            };
        }
    }
    fresh()
}

/// The lock of an explicit `--owner`, shared with the other servers of that owner
/// and held while this one runs, so the sweep sees the owner live and keeps its
/// read cursors. `None` (with a warning) when it cannot be had; the server still
/// runs. An owner whose name has characters a file name cannot carry is locked
/// under its escaped name, whose files the sweep never removes anyway.
pub(crate) fn explicit_owner_lock(home: &Home, owner: &str) -> Option<File> {
    let dir = owners_dir(home);
    if let Err(err) = crate::config::create_home(home)
        .and_then(|()| home.ensure_dir(&dir).map_err(anyhow::Error::from))
    {
        tracing::warn!(%owner, error = %err, "cannot keep the owner lock; the sweep may reset this owner's read cursors");
        return None;
    }
    let held = lock(&dir, &file_safe(owner), Hold::Shared);
    if held.is_none() {
        tracing::warn!(%owner, "the owner lock is held exclusively elsewhere; the sweep may reset this owner's read cursors");
    }
    held
}

/// `owner` with every character a file name must not carry as `_`: the name of
/// its files in [`owners_dir`].
pub(crate) fn file_safe(owner: &str) -> String {
    owner
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// How often the daemon sweeps the files of owners that are gone.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);

/// Whether `owner` still has sessions (running, or finished and kept) or notices
/// not yet delivered in `registry`.
fn has_sessions_or_notices(registry: &herd_core::Registry, owner: &str) -> bool {
    registry.pending(owner) > 0
        || !registry
            .list(&herd_core::ListFilter {
                owner: Some(owner.to_owned()),
                session_key: None,
                include_finished: true,
            })
            .is_empty()
}

/// The daemon's sweep of gone owners' files ([`sweep`]): now, then hourly, each on a
/// blocking thread.
pub(crate) fn sweep_hourly(registry: herd_core::Registry) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let registry = registry.clone();
            let swept = tokio::task::spawn_blocking(move || {
                sweep(registry.home(), |owner| {
                    has_sessions_or_notices(&registry, owner)
                })
            })
            .await;
            if let Err(err) = swept {
                tracing::warn!(error = %err, "the sweep of gone owners' files failed");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(comm: &str, argv: &[&str]) -> Proc {
        Proc {
            pid: 10,
            ppid: 5,
            start_ticks: 7,
            comm: comm.to_owned(),
            argv: argv.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    #[test]
    fn shells_and_launchers_are_wrappers_hosts_are_not() {
        assert!(is_wrapper(&proc("bash", &["bash", "-c", "herd mcp"])));
        assert!(is_wrapper(&proc("env", &["env", "HERD_HOME=x", "herd"])));
        assert!(is_wrapper(&proc("npm exec herd", &["npm exec herd"])));
        assert!(is_wrapper(&proc(
            "node",
            &["node", "/usr/lib/node_modules/npm/bin/npx-cli.js", "herd"]
        )));
        assert!(is_wrapper(&proc(
            "python3",
            &["python3", "-m", "uv", "run"]
        )));
        assert!(is_wrapper(&proc("uvx", &["uvx", "herd"])));
        assert!(!is_wrapper(&proc("node", &["node", "host.mjs"])));
        assert!(!is_wrapper(&proc("python3", &["python3", "agent.py"])));
        assert!(!is_wrapper(&proc("claude", &["claude"])));
    }

    #[test]
    fn an_owner_is_stable_per_host_and_slot() {
        let host = proc("claude", &["claude"]);
        let first = owner_of(&host, "boot", 1);
        assert_eq!(first, owner_of(&host, "boot", 1));
        assert_ne!(first, owner_of(&host, "boot", 2));
        assert_ne!(first, owner_of(&host, "other-boot", 1));
        assert!(first.len() == 16 && first.starts_with("mcp-"), "{first}");
    }
}
