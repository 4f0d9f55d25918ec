//! Session supervisors that outlive the daemon (the shims).
//!
//! A shim is a small single-threaded process, one per session, forked by the daemon's
//! launcher (`herd-shim --launcher`, itself out of the daemon's tree), or started and
//! detached (setsid, then a fork whose parent exits) when a dispatcher wraps it. It
//! becomes a child subreaper, starts the job through herd-core's
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
//! The daemon side (`link`) attaches to a shim over that socket and follows the log
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
use std::io::Read;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

mod launcher;
pub(crate) mod link;
mod supervise;
pub(crate) mod wire;

/// The shim socket protocol this build speaks: 2 adds length-prefixed frames after
/// the hello (`wire::CAP_FRAMES`) and framed launch specs and ready answers.
pub const PROTOCOL: u32 = 2;
/// The oldest shim protocol a daemon of this build attaches to fully.
pub const OLDEST_FULL_ATTACH: u32 = 1;

/// The largest launch spec a shim reads.
const MAX_SPEC_BYTES: u64 = 16 << 20;

/// What the daemon tells a new shim to run; sent as one frame (`wire::Framing::Lengths`)
/// on the shim's or the launcher's stdin.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Spec {
    /// The protocol the daemon speaks.
    pub(crate) protocol: u32,
    /// Which launch this is, echoed in the ready answer (a launcher serves many).
    #[serde(default)]
    pub(crate) request: u64,
    /// The session's id.
    pub(crate) session_id: String,
    /// The shim's directory (created by the daemon, 0700).
    pub(crate) dir: PathBuf,
    /// The job's argv (the shell or a direct exec).
    pub(crate) argv: Vec<String>,
    /// The job's environment.
    pub(crate) env: Vec<(EnvText, EnvText)>,
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
    /// The session's time limit, a wall-clock instant in unix milliseconds: the shim
    /// kills the job's tree then, daemon or no daemon (absent: no limit).
    #[serde(default)]
    pub(crate) deadline_unix_ms: Option<u64>,
    /// The SIGTERM-to-SIGKILL grace of that kill.
    #[serde(default)]
    pub(crate) kill_grace_ms: u64,
    /// No cgroup for this session: the shim holds the tree as subreaper
    /// (`HERD_CONTAINMENT=subreaper` in the daemon's environment).
    #[serde(default)]
    pub(crate) force_subreaper: bool,
    /// Kill the session cgroup by freezing it, as where `cgroup.kill` is missing
    /// (`HERD_CONTAINMENT=freeze` in the daemon's environment; tests).
    #[serde(default)]
    pub(crate) force_freeze: bool,
    /// Kill what is left of the tree once the main process is done (`--kill-leftovers`).
    #[serde(default)]
    pub(crate) kill_leftovers: bool,
    /// Memory, CPU and process limits of the tree (`--memory`, `--cpus`, `--pids`).
    #[serde(default)]
    pub(crate) limits: crate::Limits,
    /// How far before the log's end the daemon will want the shim's key mark (its
    /// `want`s say so again; absent from an older daemon): known from the start,
    /// a job that ends before the daemon's first `want` still gives one.
    #[serde(default)]
    pub(crate) mark_lag: Option<u64>,
    /// The spec came on a connection to the daemon (a supervisor forked ahead of
    /// need): the shim keeps that connection as the daemon's and binds its socket
    /// only once the connection closes, for the next daemon to find. A spawn then
    /// makes no socket file (whose inode is a file system's allocation and, on a busy
    /// ext4, a scan past every inode freed in the last minutes) and no connect.
    /// Absent from an older daemon: the socket is bound at the start.
    #[serde(default)]
    pub(crate) attach_here: bool,
    /// For a supervisor the launcher forks (its ready answer goes on the launcher's
    /// shared stdout): the daemon's claim socket and this launch's token. The shim
    /// connects there and sends the token (one frame, [`Claim`]) before its ready
    /// answer, and that connection is the daemon's, as with `attach_here`. Absent
    /// from an older daemon.
    #[serde(default)]
    pub(crate) claim: Option<(PathBuf, u64)>,
}

/// What a shim forked by the launcher sends first on the daemon's claim socket.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Claim {
    pub(crate) token: u64,
}

/// An environment name or value: text when it is UTF-8 (nearly always, and cheap to
/// encode), raw bytes otherwise, so nothing is lost either way.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum EnvText {
    Text(String),
    Bytes(Vec<u8>),
}

impl EnvText {
    pub(crate) fn of(s: &std::ffi::OsStr) -> EnvText {
        use std::os::unix::ffi::OsStrExt;
        match s.to_str() {
            Some(text) => EnvText::Text(text.to_owned()),
            None => EnvText::Bytes(s.as_bytes().to_vec()),
        }
    }

    fn to_os(&self) -> OsString {
        use std::os::unix::ffi::OsStringExt;
        match self {
            EnvText::Text(text) => OsString::from(text),
            EnvText::Bytes(bytes) => OsString::from_vec(bytes.clone()),
        }
    }
}

impl Spec {
    pub(crate) fn env_map(&self) -> std::collections::BTreeMap<OsString, OsString> {
        self.env
            .iter()
            .map(|(k, v)| (k.to_os(), v.to_os()))
            .collect()
    }
}

/// What a shim says on its stdout (one frame) once its job runs, or why it could not.
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
        /// Whether a session cgroup holds the job (else the shim as subreaper): what
        /// `info.json` says, so the daemon need not read it back on the spawn's
        /// path. Absent from an older shim's answer (the daemon then reads it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cgroup: Option<bool>,
        /// The connection the spec came on is now the daemon's connection to this
        /// shim (`Spec::attach_here` honoured); absent or false from a shim that
        /// bound its socket, which the daemon then connects to.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        attached: bool,
    },
    /// No PTY could be opened; nothing ran, so the daemon may fall back to pipes.
    PtyUnavailable { message: String },
    /// The job could not start.
    Failed { message: String },
}

/// The ready answer: the launch it answers and what became of it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ReadyLine {
    pub(crate) request: u64,
    pub(crate) ready: Ready,
}

/// The entry point of the `herd-shim` binary. Returns the process's exit code.
///
/// Without arguments it reads one launch spec on stdin, starts that job and
/// supervises it until it is done. With `--launcher` it is the daemon's launcher: it
/// reads launch specs as they come and forks one supervisor per spec, which saves
/// every session the exec and start-up of a new program.
///
/// Call it first thing in `main`, before any thread or runtime exists: it forks.
pub fn main() -> i32 {
    // A renewed launcher image keeps its pool's pipe, handed over across its exec.
    let kept = launcher::kept_descriptors(&std::env::args().collect::<Vec<_>>());
    let _ = crate::hygiene::clean_start_keeping(&kept);
    match std::env::args().nth(1).as_deref() {
        None => {}
        Some("--launcher") => {
            let args: Vec<String> = std::env::args().skip(2).collect();
            return launcher::run(&args);
        }
        Some("--restart-loop") => {
            let args: Vec<String> = std::env::args().skip(2).collect();
            return crate::spawn::restart_loop::main(&args);
        }
        Some(other) => {
            return report_failure(
                0,
                &format!(
                    "unknown argument {other:?}: herd-shim is started by the herd daemon, not by hand"
                ),
            );
        }
    }
    let mut raw = Vec::new();
    if let Err(error) = std::io::stdin()
        .take(MAX_SPEC_BYTES + 8)
        .read_to_end(&mut raw)
    {
        return report_failure(0, &format!("the launch spec could not be read: {error}"));
    }
    let mut frames = spec_reader();
    frames.feed(&raw);
    let header = match frames.next() {
        Ok(Some(frame)) => frame.header,
        Ok(None) => Vec::new(),
        Err(error) => {
            return report_failure(0, &format!("the launch spec is not one frame: {error}"));
        }
    };
    let spec: Spec = match serde_json::from_slice(&header) {
        Ok(spec) => spec,
        Err(error) => {
            return report_failure(
                0,
                &format!(
                    "the launch spec is not valid (herd-shim is started by the herd daemon, not by hand): {error}"
                ),
            );
        }
    };
    if spec.protocol != PROTOCOL {
        return report_failure(
            spec.request,
            &format!(
                "the daemon speaks shim protocol {} and this herd-shim speaks {PROTOCOL}; install matching herd and herd-shim binaries",
                spec.protocol
            ),
        );
    }
    supervise::run(spec, true, None, None)
}

/// Prints a failure line on stdout (the daemon reads it) and returns the exit code.
fn report_failure(request: u64, message: &str) -> i32 {
    write_ready(
        request,
        &Ready::Failed {
            message: message.to_owned(),
        },
    );
    2
}

/// The reader of launch specs (the launcher's and a standalone shim's stdin).
pub(crate) fn spec_reader() -> wire::FrameReader {
    wire::FrameReader::new(wire::Framing::Lengths, MAX_SPEC_BYTES as usize, 0)
}

/// The reader of ready answers (a launcher's or a standalone shim's stdout).
pub(crate) fn ready_reader() -> wire::FrameReader {
    wire::FrameReader::new(wire::Framing::Lengths, 1 << 20, 0)
}

/// In a supervisor forked ahead of need (a pool member): the pipe on which it
/// tells its launcher that it took a spec, set before its session starts. Its pid
/// goes there right after its ready answer, so the launcher forks its replacement
/// once the spawn has been answered, not on the same CPUs while the job starts.
static TAKEN_REPORT: std::sync::OnceLock<std::os::fd::OwnedFd> = std::sync::OnceLock::new();

/// Has [`write_ready`] report this pool member's pid on `taken` after its answer.
/// Returns `taken` when a report is already set (never, in one member's life).
fn report_taken_after_ready(taken: std::os::fd::OwnedFd) -> Result<(), std::os::fd::OwnedFd> {
    TAKEN_REPORT.set(taken)
}

/// Writes the ready answer on stdout as one frame, in one write: answers of concurrent
/// supervisors of one launcher share the pipe, and a write under `PIPE_BUF` is never
/// interleaved. A pool member then tells its launcher it took a spec.
fn write_ready(request: u64, ready: &Ready) {
    let answer = ReadyLine {
        request,
        ready: ready.clone(),
    };
    let mut line = Vec::new();
    wire::encode(wire::Framing::Lengths, &answer, b"", &mut line);
    // One write(2): the daemon may have given up waiting; nothing else can be done
    // then.
    let stdout = std::io::stdout();
    let _ = nix::unistd::write(std::os::fd::AsFd::as_fd(&stdout), &line);
    if let Some(taken) = TAKEN_REPORT.get() {
        // A second answer (none is written) would report again: the launcher's
        // count takes a pid once.
        launcher::tell_own_pid(taken);
    }
}

/// The longest path a Unix socket can be bound at (`sun_path` is 108 bytes with
/// its NUL).
pub(crate) const MAX_SOCKET_PATH_BYTES: usize = 107;

/// Whether a Unix socket can be bound at `path`.
pub(crate) fn fits_a_socket_address(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes().len() <= MAX_SOCKET_PATH_BYTES
}
