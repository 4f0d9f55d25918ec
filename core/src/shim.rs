//! Session supervisors that outlive the daemon (the shims).
//!
//! A shim is a small single-threaded process, one per session, started by the daemon
//! through [`launch`]. It leaves the daemon's process tree at once (setsid, then a fork
//! whose parent exits), becomes a child subreaper, starts the job through herd-core's
//! own spawn path and is its parent for its whole life. It owns what the in-process
//! reader owned: the pipe's read end or the PTY master, the PTY query responder, the
//! shell-noise filter, the complete log file and the job's stdin. It keeps reading
//! while no daemon is attached, so a job never blocks on a full pipe or dies of
//! SIGPIPE because the daemon went away.
//!
//! When the job has exited and its output is done (end-of-file, the idle drain, or a
//! kill), the shim writes `exit.json` atomically *before* it closes the log, tells an
//! attached daemon, and exits. Its directory `<home>/run/shims/<id>/` holds the socket
//! (`sock`, 0600 in a 0700 directory, peer uid checked) and the two records.
//!
//! The daemon side ([`link`]) attaches to a shim over that socket and follows the log
//! file by offset: the shim says how far the log has grown when asked (`want`, then one
//! `grew`), so a chatty job costs one wake per read of the daemon, not per write of the
//! job, and output written while no daemon ran is simply further along in the file.
//!
//! Versions: the socket protocol is [`PROTOCOL`]. A daemon attaches fully to shims
//! of its own protocol and of the one before it ([`OLDEST_FULL_ATTACH`]); any other
//! shim is refused with a message naming both versions and is followed only through
//! the frozen minimal contract: its info record (which process to stop), its exit
//! record (how the job ended) and tree kill, which needs no shim at all. A job is never
//! killed because its shim is of another version.
//!
//! Rationale for following the file instead of streaming bytes over the socket: the
//! log is written anyway, so reading it back from the page cache is the only copy the
//! daemon adds, the shim never has to buffer for a slow daemon, and re-attaching after
//! a restart is the same operation as keeping up.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub(crate) mod link;
mod supervise;
pub(crate) mod wire;

/// The shim socket protocol this build speaks.
pub const PROTOCOL: u32 = 1;
/// The oldest shim protocol a daemon of this build attaches to fully.
pub const OLDEST_FULL_ATTACH: u32 = 1;

/// The largest launch spec a shim reads.
const MAX_SPEC_BYTES: u64 = 16 << 20;

/// What the daemon tells a new shim to run; sent as JSON on the shim's stdin.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Spec {
    /// The protocol the daemon speaks.
    pub(crate) protocol: u32,
    /// The session's id.
    pub(crate) session_id: String,
    /// The shim's directory (created by the daemon, 0700).
    pub(crate) dir: PathBuf,
    /// The job's argv (the shell or a direct exec).
    pub(crate) argv: Vec<String>,
    /// The job's environment, as raw bytes.
    pub(crate) env: Vec<(Vec<u8>, Vec<u8>)>,
    /// The job's working directory.
    pub(crate) cwd: PathBuf,
    /// The PTY size, `None` for pipes.
    pub(crate) pty: Option<(u16, u16)>,
    /// The session's log file.
    pub(crate) log_path: PathBuf,
    /// The log's cap in bytes.
    pub(crate) log_cap_bytes: u64,
    /// How long output may stay idle after the exit before the session ends.
    pub(crate) idle_drain_ms: u64,
}

impl Spec {
    pub(crate) fn env_map(&self) -> std::collections::BTreeMap<OsString, OsString> {
        use std::os::unix::ffi::OsStringExt;
        self.env
            .iter()
            .map(|(k, v)| (OsString::from_vec(k.clone()), OsString::from_vec(v.clone())))
            .collect()
    }
}

/// The one line a shim prints on its stdout once its job runs, or why it could not.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub(crate) enum Ready {
    /// The job runs.
    Running {
        protocol: u32,
        shim_pid: i32,
        shim_start_time: Option<u64>,
        pid: i32,
        pgid: i32,
        start_time: Option<u64>,
    },
    /// No PTY could be opened; nothing ran, so the daemon may fall back to pipes.
    PtyUnavailable { message: String },
    /// The job could not start.
    Failed { message: String },
}

/// The entry point of the `herd-shim` binary: reads the spec on stdin, starts the job
/// and supervises it until it is done. Returns the process's exit code.
///
/// Call it first thing in `main`, before any thread or runtime exists: it forks.
pub fn main() -> i32 {
    let mut raw = Vec::new();
    if let Err(error) = std::io::stdin().take(MAX_SPEC_BYTES).read_to_end(&mut raw) {
        return report_failure(&format!("the launch spec could not be read: {error}"));
    }
    let spec: Spec = match serde_json::from_slice(&raw) {
        Ok(spec) => spec,
        Err(error) => {
            return report_failure(&format!(
                "the launch spec is not valid (herd-shim is started by the herd daemon, not by hand): {error}"
            ));
        }
    };
    if spec.protocol != PROTOCOL {
        return report_failure(&format!(
            "the daemon speaks shim protocol {} and this herd-shim speaks {PROTOCOL}; install matching herd and herd-shim binaries",
            spec.protocol
        ));
    }
    supervise::run(spec)
}

/// Prints a failure line on stdout (the daemon reads it) and returns the exit code.
fn report_failure(message: &str) -> i32 {
    write_ready(&Ready::Failed {
        message: message.to_owned(),
    });
    2
}

/// Writes the ready line on stdout.
fn write_ready(ready: &Ready) {
    let mut line = serde_json::to_vec(ready).unwrap_or_default();
    line.push(b'\n');
    let mut out = std::io::stdout().lock();
    // The daemon may have given up waiting; nothing else can be done then.
    let _ = out.write_all(&line).and_then(|()| out.flush());
}
