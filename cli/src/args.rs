//! The command line: every subcommand, flag and help text of `herd`.
//!
//! The help texts here are the user's manual (they also feed `herd man` and the
//! shell completions), so each one says what the command does, what it prints and
//! how it exits.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use clap_complete::ArgValueCandidates;

mod attach;
mod queue;

pub(crate) use attach::{AttachArgs, DetachKey};
pub(crate) use queue::{GroupArgs, GroupCommand, QueueArgs};

/// The exit codes, repeated in `--help` so scripts can rely on them.
const EXIT_CODES: &str = "\
Exit codes:
  0  success (for `wait`: the job exited 0)
  1  the job failed, was killed or is still running after `wait --timeout`; or a command was blocked by the guard
  2  usage error, unknown or ambiguous session id, bad configuration
  3  the daemon could not be reached or started

Environment:
  HERD_HOME   the home directory (default: the platform data directory)
  HERD_OWNER  the default owner id for `run`, `ps`, `events` and `mcp`
  HERD_LOG    tracing filter for herd's own diagnostics (e.g. debug)";

/// herd runs shell commands in the background for people and AI agents.
///
/// A local daemon (started on demand) supervises every job: it keeps the
/// complete output, tells you when a job finishes, kills whole process trees and
/// refuses commands that would kill the host that launched it.
#[derive(Debug, Parser)]
#[command(name = "herd", version, about, long_about, after_long_help = EXIT_CODES, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Every `herd` subcommand. Each one's arguments are defined only when it is the one
/// invoked (`defer`; help, completion and man pages build them all): a client
/// builds one subcommand's definition, not some forty.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum Command {
    /// Start a command in the background and print its session id.
    ///
    /// One argument after `--` is a shell command line (`herd run -- 'make && make test'`).
    /// Several arguments are joined with shell quoting, so the program receives them
    /// exactly as typed (`herd run -- bash -c 'echo a; echo b'`).
    /// With --json: `{"session_id", "pid", "command", "mode", ...}`.
    /// A command refused by the self-kill guard starts nothing and exits 1.
    /// The client's own command line reads `herd run` once parsed, so a job's
    /// `pkill -f` of its command does not find the client waiting for it.
    Run(Box<RunArgs>),
    /// List sessions: id, state, pid, age, command and last output line.
    ///
    /// Shows the running sessions of the owner; --all adds finished ones (and every
    /// owner unless --owner is given). With --json: `{"processes": [ ... ]}`.
    Ps(PsArgs),
    /// Show a session's status, pid, uptime and a preview of its latest output.
    Poll(IdArgs),
    /// Print a session's output.
    ///
    /// Without paging flags it prints the whole (redacted) log verbatim.
    /// --offset/--limit page by lines over the whole log (line 0 is the first line the
    /// job printed); a page carries at most 200,000 bytes, and a note on stderr says
    /// when it holds fewer lines or cut one. --follow keeps printing new output until
    /// the job exits.
    Logs(LogsArgs),
    /// Wait for a session to finish and print its result.
    ///
    /// Exits 0 when the job exited 0, 1 when it failed, was killed, or is still
    /// running when the timeout elapses (the job is left running).
    Wait(WaitArgs),
    /// Kill sessions and every process they started (SIGTERM, grace, SIGKILL).
    Kill(KillArgs),
    /// Forget finished sessions, with their logs and result receipts (running ones
    /// are never touched).
    Clean(CleanArgs),
    /// Write TEXT to a session's stdin as is (no newline added).
    Send(StdinArgs),
    /// Write TEXT to a session's stdin followed by Enter.
    Submit(StdinArgs),
    /// Close a session's stdin (EOF).
    Close(IdArgs),
    /// Set a PTY session's terminal size (the program gets SIGWINCH).
    Resize(ResizeArgs),
    /// Take the owner's pending notifications (completions, heartbeats, watch matches).
    ///
    /// Each notification is delivered to exactly one `events` call, and only once it
    /// has been printed. On a terminal, one readable line per event (time, id, what
    /// happened, the first line of output); otherwise, or with --json, one JSON
    /// object per line, each with a "type";
    /// --follow keeps streaming new ones; --peek shows them and leaves them queued
    /// (e.g. `herd events --owner mcp-0123456789ab --peek` for an agent's).
    Events(EventsArgs),
    /// Job groups with a parallel limit: add, set, list, rm (`herd run --group`).
    Group(GroupArgs),
    /// Hand a running session over to another owner, with a note.
    Handoff(HandoffArgs),
    /// Start a session again: the same command, directory, mode and options, in
    /// this shell's environment; a running one is tree-killed first (reason
    /// `restarted`). The new session keeps the name and records what it replaced.
    Restart(crate::restart::RestartArgs),
    /// A live full-screen view of the home's sessions, with a pane following the
    /// selected one's output and keys to kill, restart, hand off and page its log.
    ///
    /// Every owner's sessions: id, name, owner, state, exit, age (or how long it
    /// ran), CPU and memory of the process tree, last line. Keys: ↑↓ PgUp PgDn
    /// select; / filter (Enter keeps, Esc clears); s next sort, S reverse; a show or
    /// hide finished; f or Enter the pane full screen; k kill (asks y); r restart;
    /// h hand off (type the owner); l the whole log in $PAGER (default less -R);
    /// q or Ctrl-C quit. Needs a terminal; `herd ps --all` is the script's view.
    Top(crate::top::TopArgs),
    /// Put a session on this terminal: a PTY session takes your keys (raw mode,
    /// window size passed on); a pipe session shows its output and sends each
    /// line you type. Detach with Ctrl-\ (see --detach-key).
    ///
    /// While you are attached, the questions a PTY job asks its terminal (where
    /// the cursor is, the device's status and attributes, the window size) go to
    /// your terminal, and its answers reach the job as input; detached, herd
    /// answers them.
    Attach(AttachArgs),
    /// The hosts of `[hosts.NAME]` in config.toml: list them, check one (reachable,
    /// versions, round trip, far home) or install this herd there.
    Hosts(crate::remote::HostsArgs),
    /// Speak herd's protocol on stdin/stdout, bridged to this home's daemon
    /// (started if needed): what runs on the far side of a host's door
    /// (`ssh build1 herd proxy`).
    Proxy(crate::remote::ProxyArgs),
    /// Judge a command line with the self-kill guard, locally (no daemon).
    Guard(GuardArgs),
    /// List, enable, disable, create (`new`) or install output-transform plugins.
    Plugins(PluginsArgs),
    /// Install, remove or inspect the systemd unit that runs `herd serve` for this home.
    Service(ServiceArgs),
    /// Check the home, config, socket, daemon and plugins; each line says ok, warn or fail
    /// and how to fix it.
    Doctor(JsonFlag),
    /// Run the daemon in the foreground (for systemd and debugging).
    ///
    /// Clients start one automatically when none answers; you rarely need this.
    Serve(ServeArgs),
    /// Stop the daemon of this home; running sessions are killed as host_shutdown.
    ///
    /// With --keep-jobs the daemon detaches instead: every job keeps running under
    /// its supervisor and the next daemon re-attaches it (as after SIGTERM).
    /// Killing running jobs asks first on a terminal; with no terminal (a script,
    /// an agent's shell tool) it is refused (exit 2) unless --yes or --keep-jobs.
    Shutdown(ShutdownArgs),
    /// Run an MCP server on stdio exposing the `terminal` and `process` tools.
    ///
    /// One server process is one owner: every session it starts belongs to --owner,
    /// and every tool result carries that owner's pending notifications.
    Mcp(McpArgs),
    /// Print a shell completion script.
    Completions(CompletionsArgs),
    /// Show a man page: herd(1), or with a subcommand its own page (`herd man
    /// run` is herd-run(1)), paged by `man -l` on a terminal and printed as roff
    /// elsewhere; --dir writes every page into a directory.
    Man(ManArgs),
}

// `herd man`.
#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// The subcommand whose page to print (`run`, `plugins new`); none: herd(1).
    #[arg(value_name = "SUBCOMMAND")]
    pub(crate) subcommand: Vec<String>,
    /// Write herd.1 and a herd-<subcommand>.1 for every subcommand into DIR
    /// (e.g. ~/.local/share/man/man1) instead of printing one.
    #[arg(long, value_name = "DIR", conflicts_with = "subcommand")]
    pub(crate) dir: Option<PathBuf>,
}

// `--json` alone.
#[derive(Debug, Args)]
pub(crate) struct JsonFlag {
    /// Print machine-readable JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

// The owner flag shared by every command that acts for an owner.
#[derive(Debug, Args, Clone)]
pub(crate) struct OwnerArg {
    /// The owner id (default: $HERD_OWNER, else "cli"; for `herd mcp`, an
    /// `mcp-<12 hex>` derived from the host that runs it, named in its instructions).
    #[arg(long, value_name = "ID")]
    pub(crate) owner: Option<String>,
}

impl OwnerArg {
    /// The owner to act for: the flag, else `$HERD_OWNER`, else `fallback`.
    pub(crate) fn resolve(&self, fallback: &str) -> String {
        resolve_owner(self.owner.as_deref(), fallback)
    }
}

/// The owner precedence shared by the CLI and the MCP server.
pub(crate) fn resolve_owner(flag: Option<&str>, fallback: &str) -> String {
    if let Some(owner) = flag.filter(|o| !o.is_empty()) {
        return owner.to_owned();
    }
    match std::env::var("HERD_OWNER") {
        Ok(owner) if !owner.is_empty() => owner,
        _ => fallback.to_owned(),
    }
}

// `herd run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Run under a pseudo-terminal (for programs that need a tty).
    #[arg(long)]
    pub(crate) pty: bool,
    /// Queue a notification when the job finishes (see `herd events`).
    #[arg(long)]
    pub(crate) notify: bool,
    /// Queue a notification when an output line contains PAT (repeatable).
    #[arg(long, value_name = "PAT", num_args = 1)]
    pub(crate) watch: Vec<String>,
    /// Queue the new output every SECS seconds while the job runs (0 = off; the
    /// daemon clamps positive values to its floor, 60 s by default).
    #[arg(long, value_name = "SECS")]
    pub(crate) heartbeat: Option<u64>,
    /// Keep the job when its owner is released (only an explicit kill or daemon
    /// shutdown stops it).
    #[arg(long)]
    pub(crate) persist: bool,
    #[command(flatten)]
    pub(crate) owner: OwnerArg,
    /// The task (container) id the job runs under (default: the owner).
    #[arg(long, value_name = "ID")]
    pub(crate) task: Option<String>,
    /// Working directory of the job (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) cwd: Option<PathBuf>,
    /// Set an environment variable for the job (repeatable).
    #[arg(long, value_name = "K=V", value_parser = parse_env_pair)]
    pub(crate) env: Vec<(String, String)>,
    /// Pass this variable through even if it matches the credential deny-list (repeatable).
    #[arg(long, value_name = "NAME")]
    pub(crate) forward_env: Vec<String>,
    /// Print machine-readable JSON instead of the session id.
    #[arg(long)]
    pub(crate) json: bool,
    /// A name for the job, usable wherever its id is (`herd logs web`): letters,
    /// digits, `.`, `_`, `-`, with at least one letter beyond a-f unless it is 1 to
    /// 3 characters (`db`); unique among your running jobs.
    #[arg(long, value_name = "NAME")]
    pub(crate) name: Option<String>,
    /// Kill the job (its whole tree) after this long, with reason `time_limit`:
    /// 90, 90s, 5m, 2h. Reaches --persist jobs too, and holds while no daemon runs.
    #[arg(long, value_name = "AGE", value_parser = parse_time_limit, allow_hyphen_values = true)]
    pub(crate) time_limit: Option<u64>,
    /// Kill what is left of the job's tree (background children, daemons it
    /// started) once its main process is done, after the kill grace; by default
    /// they are kept, held by the session, and `herd kill` ends them.
    #[arg(long)]
    pub(crate) kill_leftovers: bool,
    /// Memory limit of the job's whole tree, through its cgroup: 512M, 2G (1 MiB to
    /// 1 PiB); refused where no cgroup can carry it.
    #[arg(long, value_name = "SIZE", value_parser = crate::sizes::parse_memory, allow_hyphen_values = true)]
    pub(crate) memory: Option<u64>,
    /// CPU limit of the job's whole tree: 1.5 is one and a half CPUs (0.01 to 1024).
    #[arg(long, value_name = "CPUS", value_parser = crate::sizes::parse_cpus, allow_hyphen_values = true)]
    pub(crate) cpus: Option<u64>,
    /// Most processes and threads of the job's whole tree at once (1 to 4194304).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=crate::sizes::PIDS_MAX))]
    pub(crate) pids: Option<u64>,
    /// Mark the job ready when an output line (redacted, as `herd logs` shows it)
    /// matches the regex PATTERN (`herd wait --ready`, `ready_at` in ps --json, a
    /// `ready` event with --notify). A pattern that does not compile is refused.
    #[arg(long, value_name = "PATTERN")]
    pub(crate) ready: Option<String>,
    /// Mark the job ready when a process of its own tree listens on TCP port N on
    /// 127.0.0.1, ::1 or a wildcard address (1 to 65535); another program already
    /// holding the port does not count.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) ready_port: Option<u16>,
    /// Run the command again when it ends: `on-failure` (not exit 0) or `always`.
    /// Each run's output goes to the same log after a line `── herd: run 2 of 4
    /// (previous exit 1) ──`; one completion at the end says how many runs there
    /// were; --time-limit applies to each run.
    #[arg(long, value_name = "WHEN", value_enum)]
    pub(crate) restart: Option<RestartWhen>,
    /// With --restart: at most N restarts (1 to 10000; default 5).
    #[arg(long, value_name = "N", requires = "restart", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(crate) max_restarts: Option<u32>,
    /// With --restart: the first pause before a restart, doubled after each (at
    /// most 5 minutes): 500ms, 2s, 1m (100 ms to 5 minutes; default 1s).
    #[arg(long, value_name = "DELAY", requires = "restart", value_parser = crate::sizes::parse_restart_delay)]
    pub(crate) restart_delay: Option<u64>,
    /// Start the job on a host of `[hosts.NAME]` in config.toml; its id is
    /// `NAME:proc_...`.
    #[arg(long, value_name = "NAME")]
    pub(crate) host: Option<String>,
    /// Stay attached: print the output as it comes, then how the job ended; exit 0
    /// when it exited 0, 1 otherwise (the job's code is in the message and in
    /// --json). As a foreground program: Ctrl-C, SIGTERM and SIGHUP reach the
    /// job's process group, and a Ctrl-C 2 s after the first detaches, printing
    /// the id. With --pty on a terminal it attaches: keys reach the job.
    #[arg(long)]
    pub(crate) wait: bool,
    #[command(flatten)]
    pub(crate) queue: QueueArgs,
    /// The command: one shell line, or a program and its arguments. Everything
    /// from the first word that is not one of run's options is the command
    /// (`herd run echo hi`, `herd run --pty top`); `--` before it also works,
    /// and is needed for a command that starts with `-`. A mistyped option
    /// before the command (`--nmae`) is refused, never run as the command.
    #[arg(trailing_var_arg = true, required = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

/// `--restart`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RestartWhen {
    /// After a run that did not exit 0.
    OnFailure,
    /// After every run.
    Always,
}

/// Parses `K=V`.
fn parse_env_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("expected K=V, got `{text}`")),
    }
}

// `herd ps`.
#[derive(Debug, Args)]
pub(crate) struct PsArgs {
    /// Include finished sessions, and every owner unless --owner is given.
    #[arg(long)]
    pub(crate) all: bool,
    /// With --all, the finished sessions of this last while (default 24h): 90, 90s,
    /// 5m, 2h, 7d; older ones are counted, not listed.
    #[arg(long, value_name = "AGE", value_parser = parse_time_limit, requires = "all")]
    pub(crate) since: Option<u64>,
    #[command(flatten)]
    pub(crate) owner: OwnerArg,
    /// This home's jobs on host NAME of `[hosts.NAME]` (ids `NAME:proc_…`), with a
    /// HOST column; a host that does not answer shows its jobs' last known state.
    #[arg(long, value_name = "NAME", conflicts_with = "all_hosts")]
    pub(crate) host: Option<String>,
    /// The local jobs and those on every configured host, with a HOST column.
    #[arg(long)]
    pub(crate) all_hosts: bool,
    /// Print `{"processes": [...]}` (with --host/--all-hosts also `"hosts"`: each
    /// host's status).
    #[arg(long)]
    pub(crate) json: bool,
}

// A command that takes just a session id.
#[derive(Debug, Args)]
pub(crate) struct IdArgs {
    /// The session id, or a unique prefix (at least 4 characters after `proc_`).
    #[arg(add = ArgValueCandidates::new(crate::complete::sessions))]
    pub(crate) id: String,
    /// Print machine-readable JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

// `herd kill`.
#[derive(Debug, Args)]
pub(crate) struct KillArgs {
    /// Session ids, unique prefixes or names (several are killed together).
    #[arg(required_unless_present = "all", value_name = "ID", add = ArgValueCandidates::new(crate::complete::sessions))]
    pub(crate) ids: Vec<String>,
    /// Every running session of the owner (--owner, else $HERD_OWNER, else "cli").
    #[arg(long, conflicts_with = "ids")]
    pub(crate) all: bool,
    #[command(flatten)]
    pub(crate) owner: OwnerArg,
    /// Print machine-readable JSON (one object per session, one per line when
    /// there are several).
    #[arg(long)]
    pub(crate) json: bool,
}

// `herd clean`.
#[derive(Debug, Args)]
pub(crate) struct CleanArgs {
    #[command(flatten)]
    pub(crate) owner: OwnerArg,
    /// Every owner's finished sessions, not only the owner's.
    #[arg(long, conflicts_with = "owner")]
    pub(crate) every_owner: bool,
    /// Only sessions that finished at least this long ago: 90, 90s, 5m, 2h, 7d.
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub(crate) older_than: Option<u64>,
    /// Print the answer as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `90`, `90s`, `5m`, `2h`, `7d` as seconds (at most ten years).
fn parse_age(text: &str) -> Result<u64, String> {
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("expected a whole number with s, m, h or d, got `{text}`"))?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(format!("unknown unit in `{text}`: use s, m, h or d")),
    };
    n.checked_mul(scale)
        .filter(|&s| s <= 10 * 365 * 86_400)
        .ok_or_else(|| format!("`{text}` is more than ten years"))
}

/// Parses `--time-limit`: an age of 1 s to 10 years (0 would kill at once).
fn parse_time_limit(text: &str) -> Result<u64, String> {
    match parse_age(text)? {
        0 => Err(format!(
            "`{text}` is no time at all: give 1s to 10 years, e.g. 90, 90s, 5m or 2h (leave the flag out for no limit)"
        )),
        seconds => Ok(seconds),
    }
}

// `herd logs`.
#[derive(Debug, Args)]
pub(crate) struct LogsArgs {
    /// The session id, a unique prefix or a name; with --follow, several (their
    /// lines interleaved, each after the session's name or short id).
    #[arg(required_unless_present = "all", value_name = "ID", add = ArgValueCandidates::new(crate::complete::sessions))]
    pub(crate) ids: Vec<String>,
    /// With --follow: every running session of the owner (--owner, else
    /// $HERD_OWNER, else "cli").
    #[arg(long, requires = "follow", conflicts_with = "ids")]
    pub(crate) all: bool,
    #[command(flatten)]
    pub(crate) owner: OwnerArg,
    /// Keep printing new output until the job exits, then say how it ended on
    /// stderr; exit 0 when it exited 0, 1 otherwise (with several, when every one
    /// exited 0). With -n N, starts from the last N lines (as `tail -n N -f`);
    /// alone, from the start of the log.
    #[arg(long, short, conflicts_with = "offset")]
    pub(crate) follow: bool,
    /// First line to print, counted from the first line of the whole log (0-based);
    /// prints --limit lines from there (default 200).
    #[arg(long, value_name = "N")]
    pub(crate) offset: Option<usize>,
    /// How many lines to print (default 200); without --offset, the last N lines.
    #[arg(
        long,
        short = 'n',
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub(crate) limit: Option<u64>,
    /// Print the log answer as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

// `herd wait`.
#[derive(Debug, Args)]
pub(crate) struct WaitArgs {
    /// The session id, a unique prefix or a name.
    #[arg(add = ArgValueCandidates::new(crate::complete::sessions))]
    pub(crate) id: String,
    /// Print the output as it comes (from the start of the log), then how the job
    /// ended on stderr; no --timeout: it follows until the job ends.
    #[arg(long, short, conflicts_with = "timeout")]
    pub(crate) follow: bool,
    /// Give up after SECS seconds (the daemon caps this, 180 s by default).
    #[arg(long, value_name = "SECS", value_parser = parse_positive_seconds)]
    pub(crate) timeout: Option<f64>,
    /// Return once the job is ready (`run --ready`, `--ready-port`), or has been:
    /// exit 0; exit 4 when it ended without becoming ready, 1 on --timeout.
    #[arg(long, conflicts_with = "follow")]
    pub(crate) ready: bool,
    /// Print the wait answer as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Parses a positive number of seconds.
fn parse_positive_seconds(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("expected a number of seconds, got `{text}`"))?;
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(format!("timeout must be positive (got {text})"))
    }
}

// `herd send` / `herd submit`.
#[derive(Debug, Args)]
pub(crate) struct StdinArgs {
    /// The session id, a unique prefix or a name.
    #[arg(add = ArgValueCandidates::new(crate::complete::sessions))]
    pub(crate) id: String,
    /// The text to write.
    pub(crate) text: String,
    /// Print the answer as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

// `herd resize`.
#[derive(Debug, Args)]
pub(crate) struct ResizeArgs {
    /// The session id, a unique prefix or a name.
    #[arg(add = ArgValueCandidates::new(crate::complete::sessions))]
    pub(crate) id: String,
    /// Rows (1 to 10000).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=10_000))]
    pub(crate) rows: u16,
    /// Columns (1 to 10000).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=10_000))]
    pub(crate) cols: u16,
    /// Print the answer as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

// `herd shutdown`.
#[derive(Debug, Args)]
pub(crate) struct ShutdownArgs {
    /// Leave every job running under its supervisor; the next daemon re-attaches.
    #[arg(long)]
    pub(crate) keep_jobs: bool,
    /// Kill running jobs without asking. Without it, a shutdown that would kill
    /// jobs asks on a terminal and is refused elsewhere (exit 2).
    #[arg(long, short)]
    pub(crate) yes: bool,
    /// Print machine-readable JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

// `herd events`.
#[derive(Debug, Args)]
pub(crate) struct EventsArgs {
    /// Keep streaming new notifications as they are published.
    #[arg(long, short)]
    pub(crate) follow: bool,
    /// Show the owner's pending notifications without taking them: they stay
    /// queued for the owner (a person looking at an agent's completions).
    #[arg(long, conflicts_with = "follow")]
    pub(crate) peek: bool,
    #[command(flatten)]
    pub(crate) owner: OwnerArg,
    /// One JSON object per line (what a non-terminal gets anyway).
    #[arg(long)]
    pub(crate) json: bool,
    /// Colour the human lines: auto (a terminal without NO_COLOR), always, never.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub(crate) color: ColorChoice,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ColorChoice {
    Auto,
    Always,
    Never,
}

// `herd handoff`.
#[derive(Debug, Args)]
pub(crate) struct HandoffArgs {
    /// The session id, a unique prefix or a name.
    #[arg(add = ArgValueCandidates::new(crate::complete::sessions))]
    pub(crate) id: String,
    /// The owner that takes the session over.
    #[arg(long, value_name = "OWNER")]
    pub(crate) to: String,
    /// What the session is for and what the new owner should do with its result.
    #[arg(long, value_name = "TEXT")]
    pub(crate) note: String,
    #[command(flatten)]
    pub(crate) owner: OwnerArg,
    /// Print the answer as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

// `herd guard`.
#[derive(Debug, Args)]
pub(crate) struct GuardArgs {
    #[command(subcommand)]
    pub(crate) command: GuardCommand,
}

// `herd guard ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum GuardCommand {
    /// Judge a command line: exits 0 when allowed, 1 when blocked.
    ///
    /// With --json: `{"verdict": "allow"|"block", "rule", "reason", "remedy"}`.
    Check(GuardCheckArgs),
}

// `herd guard check`.
#[derive(Debug, Args)]
pub(crate) struct GuardCheckArgs {
    /// An image name of the host to protect (repeatable; default: this process's
    /// host as detected, plus `guard_host_images` from the config).
    #[arg(long, value_name = "NAME")]
    pub(crate) host_image: Vec<String>,
    /// The host's command line, against which `pkill -f` patterns are judged.
    #[arg(long, value_name = "TEXT")]
    pub(crate) host_cmdline: Option<String>,
    /// Print machine-readable JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// The command line to judge.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

// `herd plugins`.
#[derive(Debug, Args)]
pub(crate) struct PluginsArgs {
    #[command(subcommand)]
    pub(crate) command: PluginsCommand,
}

// `herd plugins ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum PluginsCommand {
    /// List installed plugins with their status and, for failures, the reason.
    ///
    /// With --json: `{"plugins": [{"name", "version", "path", "status", "reason"}]}`.
    List(JsonFlag),
    /// Enable a plugin (takes effect when the daemon restarts).
    Enable(PluginName),
    /// Disable a plugin (takes effect when the daemon restarts).
    Disable(PluginName),
    /// Write a ready-to-build plugin crate in `./NAME/`.
    ///
    /// The crate depends on `herd-plugin-abi` from the registry, has a working
    /// transform with a unit test, and a `plugin.toml`. Then: `herd plugins install
    /// ./NAME`, `herd plugins enable NAME`.
    New(PluginNew),
    /// Install a plugin into the home: a plugin crate directory (built with `cargo
    /// build --release`) or a built library with a `plugin.toml` beside it.
    ///
    /// The library and manifest are copied to `<home>/plugins/<name>/` with modes
    /// nobody else can write, and the loader checks that it loads.
    Install(PluginInstall),
}

// `herd plugins new`.
#[derive(Debug, Args)]
pub(crate) struct PluginNew {
    /// The plugin's name: lowercase letters, digits and `-`, starting with a letter
    /// (at most 40 characters); the crate is `herd-plugin-NAME`.
    pub(crate) name: String,
    /// The directory to create the crate in (default: `./NAME`).
    #[arg(long)]
    pub(crate) path: Option<std::path::PathBuf>,
}

// `herd plugins install`.
#[derive(Debug, Args)]
pub(crate) struct PluginInstall {
    /// A plugin crate directory, or a built library (`.so`) with its `plugin.toml`
    /// in the same directory.
    pub(crate) path: std::path::PathBuf,
}

// A plugin name argument.
#[derive(Debug, Args)]
pub(crate) struct PluginName {
    /// The plugin's directory name under `<home>/plugins`.
    pub(crate) name: String,
}

// `herd service`.
#[derive(Debug, Args)]
pub(crate) struct ServiceArgs {
    #[command(subcommand)]
    pub(crate) command: ServiceCommand,
}

// `herd service ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum ServiceCommand {
    /// Write `herd.service` for this binary and home, reload systemd and enable it.
    ///
    /// A user unit goes to ~/.config/systemd/user/herd.service, a system unit to
    /// /etc/systemd/system/herd.service (override the directory with
    /// $HERD_SYSTEMD_UNIT_DIR). Says when linger is needed.
    Install(ServiceInstallArgs),
    /// Disable and stop the unit, then remove its file.
    Uninstall(ServiceScopeArgs),
    /// Show the unit file and whether systemd has it enabled and active.
    Status(ServiceScopeArgs),
}

// Which manager a unit belongs to.
#[derive(Debug, Args, Clone, Copy)]
pub(crate) struct ServiceScopeArgs {
    /// A user unit run by your user manager (the default).
    #[arg(long, conflicts_with = "system")]
    pub(crate) user: bool,
    /// A system unit (needs root) that runs the daemon as --run-as.
    #[arg(long)]
    pub(crate) system: bool,
    /// Print the answer as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

// `herd service install`.
#[derive(Debug, Args)]
pub(crate) struct ServiceInstallArgs {
    #[command(flatten)]
    pub(crate) scope: ServiceScopeArgs,
    /// Only write the unit file; do not run systemctl.
    #[arg(long)]
    pub(crate) no_start: bool,
    /// The account a system unit runs the daemon as (default: $SUDO_USER, else you).
    #[arg(long, value_name = "USER")]
    pub(crate) run_as: Option<String>,
}

// `herd serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Internal: detach into a new session (used by autostart).
    #[arg(long, hide = true)]
    pub(crate) detached: bool,
}

// `herd mcp`.
#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    #[command(flatten)]
    pub(crate) owner: OwnerArg,
    /// The owner of the parent agent this server's agent is a subagent of; without it,
    /// `process action=handoff` is refused.
    #[arg(long, value_name = "OWNER", env = "HERD_PARENT_OWNER")]
    pub(crate) parent: Option<String>,
}

// `herd completions`.
#[derive(Debug, Args)]
#[command(after_long_help = "\
Load it when the shell starts (it asks this binary, so ids and names are completed
from the running daemon):
  bash:  echo 'source <(herd completions bash)' >> ~/.bashrc
  zsh:   echo 'source <(herd completions zsh)' >> ~/.zshrc
  fish:  echo 'herd completions fish | source' >> ~/.config/fish/config.fish")]
pub(crate) struct CompletionsArgs {
    /// The shell to generate for.
    pub(crate) shell: crate::complete::Shell,
}

#[cfg(test)]
mod tests;
