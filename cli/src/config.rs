//! The home and its `config.toml`.
//!
//! The home is `$HERD_HOME`, else the platform data directory (`directories`),
//! resolved once per command and passed down explicitly (B4). The config file is
//! optional; every field has a default. Unknown keys and wrong types are errors
//! that name the key and the line (serde's `deny_unknown_fields` plus toml's
//! positioned messages), because a silently ignored typo in a guard or deny-list
//! setting is worse than a refusal to start.

use std::path::{Path, PathBuf};

use anyhow::Context;
use herd_persistence::Home;
use serde::{Deserialize, Serialize};

use crate::exit::{Code, Failure};

/// The environment variable that names the home.
pub(crate) const HOME_ENV: &str = "HERD_HOME";

/// Resolves the home: `$HERD_HOME`, else the platform data directory.
///
/// # Errors
/// When neither is available.
pub(crate) fn resolve_home() -> anyhow::Result<Home> {
    let root = if let Some(root) = std::env::var_os(HOME_ENV).filter(|v| !v.is_empty()) {
        absolute(PathBuf::from(root))
    } else {
        let dirs = directories::ProjectDirs::from("", "", "herd").ok_or_else(|| {
            Failure::new(
                Code::Usage,
                "cannot find a data directory for herd; set HERD_HOME to a directory",
            )
        })?;
        dirs.data_dir().to_path_buf()
    };
    // Once, here: every component must be one nobody else can change (OpenSSH's
    // StrictModes rule, herd_persistence::safe_path); the home is then its real
    // path, with no symbolic link left to swap.
    match herd_persistence::safe_path::check_dir(&root, nix::unistd::geteuid().as_raw()) {
        Ok(Some(checked)) => Ok(Home::new(checked.real)),
        Ok(None) => Ok(Home::new(root)),
        Err(err) => Err(refused_path(&err)),
    }
}

/// A path refused by the safe-path check, as a usage failure (exit 2).
pub(crate) fn refused_path(err: &herd_persistence::safe_path::PathError) -> anyhow::Error {
    Failure::new(Code::Usage, format!("{err}")).into()
}

/// Opens a file herd reads for its own use (the config, a configured shim) after
/// the safe-path check of it and every directory leading to it; `None` when absent.
///
/// # Errors
/// A refusal naming the path, its owner and mode and the fix (exit 2).
pub(crate) fn open_checked(path: &Path) -> anyhow::Result<Option<(std::fs::File, PathBuf)>> {
    let path = absolute(path.to_path_buf());
    herd_persistence::safe_path::open_file(&path, nix::unistd::geteuid().as_raw())
        .map_err(|err| refused_path(&err))
}

/// How deep under the plugins directory [`checked_plugins_dir`] looks: each
/// plugin's directory and the files (manifest, library) in it.
const PLUGIN_TREE_DEPTH: usize = 2;

/// The plugins directory's real path once it, every directory leading to it and
/// everything in it (each plugin's directory, manifest and library) pass the
/// safe-path check: loaded code nobody else can change.
///
/// # Errors
/// A refusal naming the path, its owner and mode and the fix (exit 2).
pub(crate) fn checked_plugins_dir(home: &Home) -> anyhow::Result<PathBuf> {
    let uid = nix::unistd::geteuid().as_raw();
    match herd_persistence::safe_path::check_dir(&home.plugins_dir(), uid) {
        Ok(Some(checked)) => {
            herd_persistence::safe_path::check_tree(&checked, uid, PLUGIN_TREE_DEPTH)
                .map_err(|err| refused_path(&err))?;
            Ok(checked.real)
        }
        Ok(None) => Ok(home.plugins_dir()),
        Err(err) => Err(refused_path(&err)),
    }
}

/// Makes `path` absolute against the current directory, so a daemon started from
/// elsewhere resolves the same home.
fn absolute(path: PathBuf) -> PathBuf {
    if path.is_absolute() {
        return path;
    }
    std::env::current_dir()
        .map(|cwd| cwd.join(&path))
        .unwrap_or(path)
}

/// How deep under the home [`check_home_ownership`] looks for directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HomeCheck {
    /// The home and what it holds directly (`config.toml`, `run/`, `plugins/`,
    /// `logs/`): what every client checks before it talks to the daemon, in a few
    /// system calls however many sessions the home holds. Nobody else can make a
    /// directory deeper down while these are the user's and not writable by others.
    Shallow,
    /// Every directory herd makes (`run/shims/<id>` is the deepest): what the daemon
    /// checks when it starts, before it loads plugins or serves the socket.
    Deep,
}

impl HomeCheck {
    fn depth(self) -> usize {
        match self {
            HomeCheck::Shallow => 1,
            HomeCheck::Deep => 3,
        }
    }
}

/// Directories under the home whose contents are not herd's: `cache/scratch` is
/// every job's `$TMPDIR`, so what jobs make there is judged by nobody.
const NOT_HERDS: [&str; 1] = ["cache/scratch"];

/// Refuses a home that is not the user's own: the home and every directory under
/// it, and `config.toml`, must be owned by this user and not writable by group or
/// others. Otherwise another user could plant a config or a plugin, or replace
/// `run/` and pose as the daemon. A home that does not exist yet passes (it is
/// created 0700).
///
/// # Errors
/// A [`Failure`] ([`Code::Usage`]) naming the path, what is wrong and the fix.
pub(crate) fn check_home_ownership(home: &Home, how: HomeCheck) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let refuse = |_path: &Path, why: String| -> anyhow::Result<()> {
        Err(Failure::new(
            Code::Usage,
            format!("refusing the home {}: {why}", home.root().display()),
        )
        .into())
    };
    let judge = |path: &Path, meta: &std::fs::Metadata| -> anyhow::Result<()> {
        if meta.uid() != me {
            return refuse(
                path,
                format!(
                    "{} is owned by uid {}, not by you (uid {me}); use a home of your own (set HERD_HOME) \
                     or `chown -R` it to yourself",
                    path.display(),
                    meta.uid()
                ),
            );
        }
        if meta.mode() & 0o022 != 0 {
            return refuse(
                path,
                format!(
                    "{} is writable by {} (mode {:o}); run `chmod go-w {}`",
                    path.display(),
                    if meta.mode() & 0o002 != 0 {
                        "everyone"
                    } else {
                        "its group"
                    },
                    meta.mode() & 0o7777,
                    path.display()
                ),
            );
        }
        Ok(())
    };
    let root = home.root();
    let Ok(meta) = std::fs::metadata(root) else {
        return Ok(());
    };
    judge(root, &meta)?;
    let mut dirs = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let is_config = depth == 0 && entry.file_name() == "config.toml";
            if is_config {
                // A config kept elsewhere and linked in is judged where it lives.
                let target = std::fs::metadata(&path).unwrap_or(meta.clone());
                judge(&path, &target)?;
                continue;
            }
            if meta.is_dir() {
                judge(&path, &meta)?;
            }
            let inside_jobs_own = NOT_HERDS.iter().any(|d| path == root.join(d));
            if meta.is_dir() && depth + 1 < how.depth() && !inside_jobs_own {
                dirs.push((path, depth + 1));
            }
        }
    }
    Ok(())
}

/// How [`open_private`] opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Private {
    /// Keep the contents (a lock file).
    Keep,
    /// Append (a log).
    Append,
    /// Replace the contents (a pid file).
    Truncate,
}

/// Opens one of the daemon's own files under the home: created 0600, never
/// through a symlink (`O_NOFOLLOW`: a planted link makes this fail, not write
/// elsewhere), and tightened to 0600 if it was looser.
///
/// # Errors
/// The OS error, e.g. `ELOOP` for a symlink.
pub(crate) fn open_private(path: &Path, how: Private) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut options = std::fs::OpenOptions::new();
    options
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    match how {
        Private::Keep => options.write(true).truncate(false),
        Private::Append => options.append(true),
        Private::Truncate => options.write(true).truncate(true),
    };
    let file = options.open(path)?;
    if file.metadata()?.permissions().mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// Creates the home root (mode 0700) when it does not exist yet.
///
/// Only the CLI creates a home; libraries never resurrect a deleted one (B29).
///
/// # Errors
/// When the directory cannot be created.
pub(crate) fn create_home(home: &Home) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if home.root().is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(home.root())
        .with_context(|| {
            format!(
                "failed to create the home directory {}",
                home.root().display()
            )
        })
}

/// When process-driven notifications wake an agent (B22).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Notifications {
    /// Completions, heartbeats and watch matches.
    #[default]
    All,
    /// Completions only.
    Result,
    /// Completions of failed jobs only.
    Error,
    /// Nothing process-driven.
    Off,
}

/// What becomes of a session's leftovers (processes of its tree that outlive its main
/// process).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Leftovers {
    /// Kept, held by the session, until they end or `herd kill` ends them.
    #[default]
    Keep,
    /// Killed (SIGTERM, the grace, SIGKILL) once the main process is done.
    Kill,
}

/// Who holds a session's job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Supervisor {
    /// A `herd-shim` process per session that outlives the daemon.
    #[default]
    Shim,
    /// The daemon itself: jobs end when the daemon ends.
    InProcess,
}

/// The `[plugins]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct PluginsConfig {
    /// Plugin names that load; plugins are opt-in.
    pub(crate) enabled: Vec<String>,
}

/// The `[limits]` table: what every job's tree is bounded by when its request
/// sets no limit of its own (`herd run --memory/--cpus/--pids`, MCP arguments).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct LimitsConfig {
    /// Memory of the tree: `"512M"`, `"2G"` (1M to 1024T).
    pub(crate) memory: Option<String>,
    /// CPUs of the tree: 1.5 (0.01 to 1024).
    pub(crate) cpus: Option<f64>,
    /// Processes and threads of the tree (1 to 4194304).
    pub(crate) pids: Option<u64>,
}

impl LimitsConfig {
    /// The first bad value as (key, why).
    fn problem(&self) -> Option<(&'static str, String)> {
        if let Some(text) = &self.memory
            && let Err(why) = crate::sizes::parse_memory(text)
        {
            return Some(("limits.memory", why));
        }
        if let Some(cpus) = self.cpus
            && let Err(why) = crate::sizes::parse_cpus(&cpus.to_string())
        {
            return Some(("limits.cpus", why));
        }
        if let Some(pids) = self.pids
            && !(1..=crate::sizes::PIDS_MAX).contains(&pids)
        {
            return Some((
                "limits.pids",
                format!(
                    "{pids} is out of range: give 1 to {}",
                    crate::sizes::PIDS_MAX
                ),
            ));
        }
        None
    }

    /// The limits (checked by `validate`; a bad value reads as no limit).
    pub(crate) fn to_limits(&self) -> herd_core::Limits {
        herd_core::Limits {
            memory_bytes: self
                .memory
                .as_deref()
                .and_then(|t| crate::sizes::parse_memory(t).ok()),
            cpu_millis: self
                .cpus
                .and_then(|c| crate::sizes::parse_cpus(&c.to_string()).ok()),
            pids: self.pids,
        }
    }
}

/// The smallest and largest `worker_memory_max_bytes` (16 MiB to 1 PiB).
const WORKER_MEMORY_MIN: u64 = 16 << 20;
const WORKER_MEMORY_MAX: u64 = 1 << 50;

/// `<home>/config.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Config {
    /// Notification policy (B22).
    pub(crate) notifications: Notifications,
    /// The smallest heartbeat interval, in seconds (B21).
    pub(crate) heartbeat_floor_seconds: u64,
    /// The grace between SIGTERM and SIGKILL, in seconds (B15).
    pub(crate) kill_grace_seconds: f64,
    /// `keep` (default) or `kill` a session's leftovers when its main process is done.
    pub(crate) leftovers: Leftovers,
    /// The longest a single `wait` blocks, in seconds (B23).
    pub(crate) wait_cap_seconds: u64,
    /// Deprecated: finished sessions are kept in the store by `result_ttl_seconds`
    /// and `log_budget_bytes`, not by count. Still accepted (a config must keep
    /// loading); the daemon warns and ignores it.
    pub(crate) finished_cap: Option<usize>,
    /// How long a finished session, its result and its log stay answerable, in
    /// seconds (default 7 days; `result_ttl` is accepted too).
    #[serde(alias = "result_ttl")]
    pub(crate) result_ttl_seconds: u64,
    /// The size cap of one session log file, in bytes.
    pub(crate) log_cap_bytes: u64,
    /// The finished sessions of the home together (logs and stored output), in
    /// bytes: past it the oldest finished sessions are evicted first.
    pub(crate) log_budget_bytes: u64,
    /// Extra environment-variable name patterns removed from children (B36).
    pub(crate) env_deny: Vec<String>,
    /// Extra regular expressions the redactor masks.
    pub(crate) redact_extra_patterns: Vec<String>,
    /// Extra image names the self-kill guard protects (B33).
    pub(crate) guard_host_images: Vec<String>,
    /// Plugin settings.
    pub(crate) plugins: PluginsConfig,
    /// Default bounds of every job's tree.
    pub(crate) limits: LimitsConfig,
    /// Under systemd, a `--persist` job that cannot get a restart-safe scope fails
    /// instead of running as a direct subprocess (B34).
    pub(crate) require_restart_safe_scope: bool,
    /// A tighter memory limit for scoped workers, in bytes (B34); the computed one
    /// (min of the service's own limit and half the RAM capped at 4 GiB) otherwise.
    pub(crate) worker_memory_max_bytes: Option<u64>,
    /// Exec a command line of plain words (`cargo test -p x`) directly instead of
    /// through `bash -c`, which would exec the same program after its own start-up.
    pub(crate) direct_exec: bool,
    /// Who holds each job: `shim` (a supervisor process per session that outlives
    /// the daemon) or `in_process` (jobs end with the daemon).
    pub(crate) supervisor: Supervisor,
    /// The `herd-shim` program; by default the one installed beside `herd`.
    pub(crate) shim_path: Option<PathBuf>,
    /// The most notifications one owner's queue holds before older ones are
    /// folded (heartbeats first; a folded completion stays in the ledger).
    pub(crate) queue_cap: usize,
    /// Connections served at once (all are this user's); the next one is refused
    /// with error -32018 naming the limit.
    pub(crate) max_connections: usize,
    /// Other machines, reached through doors that already exist (`[hosts.NAME]`).
    pub(crate) hosts: std::collections::BTreeMap<String, HostConfig>,
}

/// `[hosts.NAME]`: how to reach a far herd.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HostConfig {
    /// The argv that ends in `herd proxy` on the far side
    /// (`["ssh", "build1", "herd", "proxy"]`); run as written, never through a shell.
    pub(crate) command: Vec<String>,
    /// An argv that receives this herd binary on stdin and installs it on the far
    /// side (`herd hosts install NAME`).
    #[serde(default)]
    pub(crate) install: Option<Vec<String>>,
}

/// Whether `name` is a host name: `[a-z0-9][a-z0-9_-]{0,31}`.
pub(crate) fn is_host_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let allowed = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-';
    (1..=32).contains(&bytes.len())
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes.iter().all(allowed)
}

impl Default for Config {
    fn default() -> Config {
        Config {
            notifications: Notifications::All,
            heartbeat_floor_seconds: 60,
            kill_grace_seconds: 2.0,
            leftovers: Leftovers::Keep,
            wait_cap_seconds: 180,
            finished_cap: None,
            result_ttl_seconds: herd_persistence::RECEIPT_RETENTION.as_secs(),
            log_cap_bytes: 1 << 30,
            log_budget_bytes: herd_persistence::DEFAULT_LOG_BUDGET_BYTES,
            env_deny: Vec::new(),
            redact_extra_patterns: Vec::new(),
            guard_host_images: Vec::new(),
            plugins: PluginsConfig::default(),
            limits: LimitsConfig::default(),
            require_restart_safe_scope: false,
            worker_memory_max_bytes: None,
            direct_exec: true,
            supervisor: Supervisor::Shim,
            shim_path: None,
            max_connections: 256,
            queue_cap: 1_024,
            hosts: std::collections::BTreeMap::new(),
        }
    }
}

impl Config {
    /// The shim program sessions run under, `None` when jobs run in-process
    /// (configured so, or no `herd-shim` beside `herd` and none configured).
    ///
    /// A configured `shim_path` passes the safe-path check (it and every directory
    /// leading to it are the user's or root's and not writable by others) and is
    /// opened once; the daemon keeps that descriptor for its lifetime and every shim
    /// is executed through it (`/proc/<daemon pid>/fd/N`), so the file checked is the
    /// file run, whatever happens to the path later.
    ///
    /// # Errors
    /// A configured `shim_path` that is refused (exit 2, naming path, owner, mode
    /// and the fix).
    pub(crate) fn shim_program(&self) -> anyhow::Result<Option<PathBuf>> {
        self.shim_program_kept(true)
    }

    /// Refuses a configured `shim_path` that fails the safe-path check, without
    /// keeping anything open: what a client checks before it autostarts a daemon,
    /// so the refusal is its own (exit 2), not a daemon that died.
    ///
    /// # Errors
    /// As [`Config::shim_program`].
    pub(crate) fn check_shim_path(&self) -> anyhow::Result<()> {
        self.shim_program_kept(false).map(drop)
    }

    fn shim_program_kept(&self, keep: bool) -> anyhow::Result<Option<PathBuf>> {
        use std::os::fd::IntoRawFd;
        if self.supervisor == Supervisor::InProcess {
            return Ok(None);
        }
        // Said by the daemon, which acts on it; a client's check stays quiet.
        let not_found = |path: &Path| {
            if keep {
                tracing::warn!(path = %path.display(), "herd-shim not found; jobs run inside the daemon and end with it (install herd-shim beside herd, or set shim_path)");
            }
            Ok(None)
        };
        let Some(configured) = &self.shim_path else {
            let Ok(exe) = std::env::current_exe() else {
                return Ok(None);
            };
            let path = exe.with_file_name("herd-shim");
            return if path.is_file() {
                Ok(Some(path))
            } else {
                not_found(&path)
            };
        };
        let Some((file, _)) = open_checked(configured)? else {
            return not_found(configured);
        };
        if !keep {
            return Ok(None);
        }
        // Deliberately kept open (close-on-exec) for the daemon's lifetime: the
        // path every launch executes.
        let fd = file.into_raw_fd();
        Ok(Some(crate::sys::own_fd_path(fd)))
    }

    /// Parses config text; `path` only names the file in errors.
    ///
    /// # Errors
    /// A [`Failure`] with [`Code::Usage`] naming the file, the key and the line.
    pub(crate) fn parse(text: &str, path: &Path) -> anyhow::Result<Config> {
        let config: Config = toml::from_str(text).map_err(|err| {
            Failure::new(
                Code::Usage,
                format!(
                    "invalid config {}: {}",
                    path.display(),
                    err.to_string().trim_end()
                ),
            )
        })?;
        config.validate(path)?;
        Ok(config)
    }

    /// Checks the values serde cannot.
    fn validate(&self, path: &Path) -> anyhow::Result<()> {
        let bad = |key: &str, why: &str| {
            Err(Failure::new(
                Code::Usage,
                format!("invalid config {}: `{key}` {why}", path.display()),
            )
            .into())
        };
        use herd_core::limits;
        let checks = [
            limits::check(
                "heartbeat_floor_seconds",
                self.heartbeat_floor_seconds,
                &limits::HEARTBEAT_SECONDS,
            ),
            limits::check(
                "kill_grace_seconds",
                self.kill_grace_seconds,
                &limits::KILL_GRACE_SECONDS,
            ),
            limits::check(
                "wait_cap_seconds",
                self.wait_cap_seconds,
                &limits::WAIT_CAP_SECONDS,
            ),
            limits::check(
                "finished_cap",
                self.finished_cap.unwrap_or_default(),
                &limits::FINISHED_CAP,
            ),
            limits::check(
                "result_ttl_seconds",
                self.result_ttl_seconds,
                &limits::RESULT_TTL_SECONDS,
            ),
            limits::check("max_connections", self.max_connections, &(1..=65_536)),
            limits::check("queue_cap", self.queue_cap, &limits::QUEUE_CAP),
            limits::check("log_cap_bytes", self.log_cap_bytes, &limits::LOG_CAP_BYTES),
            limits::check(
                "log_budget_bytes",
                self.log_budget_bytes,
                &limits::LOG_BUDGET_BYTES,
            ),
            limits::check(
                "worker_memory_max_bytes",
                self.worker_memory_max_bytes.unwrap_or(WORKER_MEMORY_MIN),
                &(WORKER_MEMORY_MIN..=WORKER_MEMORY_MAX),
            ),
        ];
        if let Some(Err(message)) = checks.into_iter().find(Result::is_err) {
            return Err(Failure::new(
                Code::Usage,
                format!("invalid config {}: {message}", path.display()),
            )
            .into());
        }
        if let Some((key, why)) = self.limits.problem() {
            return bad(key, &format!("is invalid: {why}"));
        }
        for (name, host) in &self.hosts {
            if !is_host_name(name) {
                return bad(
                    &format!("hosts.{name}"),
                    "is not a host name: use 1 to 32 of a-z, 0-9, `_` and `-`, starting with a letter or digit",
                );
            }
            if host
                .command
                .first()
                .is_none_or(|program| program.is_empty())
            {
                return bad(
                    &format!("hosts.{name}.command"),
                    "must name a program (e.g. [\"ssh\", \"build1\", \"herd\", \"proxy\"])",
                );
            }
            if let Some(install) = &host.install
                && install.first().is_none_or(|program| program.is_empty())
            {
                return bad(
                    &format!("hosts.{name}.install"),
                    "must name a program that reads the herd binary on stdin",
                );
            }
        }
        // Only config patterns can make a redactor fail to build (the built-in ones
        // are fixed and tested); building one without them would be a transient
        // automaton of megabytes on every load, the daemon's start-up included.
        if !self.redact_extra_patterns.is_empty()
            && let Err(err) = herd_hooks::Redactor::new(&self.redactor_config())
        {
            return bad("redact_extra_patterns", &format!("is invalid: {err}"));
        }
        Ok(())
    }

    /// The redactor settings: the built-in families plus the configured patterns.
    pub(crate) fn redactor_config(&self) -> herd_hooks::RedactorConfig {
        herd_hooks::RedactorConfig {
            extra_patterns: self.redact_extra_patterns.clone(),
        }
    }

    /// Loads `<home>/config.toml`; a missing file is the default config.
    ///
    /// # Errors
    /// An unreadable or invalid file.
    pub(crate) fn load(home: &Home) -> anyhow::Result<Config> {
        let path = home.config_path();
        // Read from the descriptor that was checked, never the path again.
        let Some((mut file, _)) = open_checked(&path)? else {
            return Ok(Config::default());
        };
        let mut text = String::new();
        std::io::Read::read_to_string(&mut file, &mut text)
            .with_context(|| format!("failed to read config {}", path.display()))?;
        Config::parse(&text, &path)
    }
}

/// Sets or clears `name` in `plugins.enabled`, keeping the rest of the file's keys.
///
/// The file is rewritten through a `toml` table, so comments are not kept.
///
/// # Errors
/// An unreadable, invalid or unwritable config file.
pub(crate) fn set_plugin_enabled(home: &Home, name: &str, enabled: bool) -> anyhow::Result<bool> {
    let path = home.config_path();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => {
            return Err(err).with_context(|| format!("failed to read config {}", path.display()));
        }
    };
    Config::parse(&text, &path)?;
    let mut table: toml::Table = toml::from_str(&text)
        .with_context(|| format!("failed to parse config {}", path.display()))?;
    let plugins = table
        .entry("plugins")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let toml::Value::Table(plugins) = plugins else {
        anyhow::bail!(
            "invalid config {}: `plugins` must be a table",
            path.display()
        );
    };
    let list = plugins
        .entry("enabled")
        .or_insert_with(|| toml::Value::Array(Vec::new()));
    let toml::Value::Array(list) = list else {
        anyhow::bail!(
            "invalid config {}: `plugins.enabled` must be a list",
            path.display()
        );
    };
    let present = list.iter().any(|v| v.as_str() == Some(name));
    let changed = present != enabled;
    if enabled && !present {
        list.push(toml::Value::String(name.to_owned()));
    } else if !enabled {
        list.retain(|v| v.as_str() != Some(name));
    }
    if changed {
        create_home(home)?;
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(&tmp, toml::to_string(&table)?)
            .with_context(|| format!("failed to write {}", tmp.display()))?;
        std::fs::rename(&tmp, &path)
            .with_context(|| format!("failed to replace config {}", path.display()))?;
    }
    Ok(changed)
}

#[cfg(test)]
mod tests;
