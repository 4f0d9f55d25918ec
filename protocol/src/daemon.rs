//! The answers of the daemon's own methods beyond protocol 1's sessions: the parts
//! of `status` (containment, restore, the daemon's log), `scope`, `plugins`,
//! `hosts` (and the host states `list` with `host`/`all_hosts` carries), and the
//! answers of `clean`'s neighbours that name only a count.
//!
//! Each field is written as protocol 1's daemon wrote it: a field it always wrote
//! (if only as `null`) is always written, one it left out when empty is left out.
//! Clients read them leniently: absent reads as the default.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `status`'s `containment`: what holds a new session's tree here, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ContainmentReport {
    /// `cgroup`, `subreaper` or `group`.
    #[serde(default)]
    pub kind: String,
    /// Why, in a sentence (`herd doctor` explains it).
    #[serde(default)]
    pub detail: String,
}

/// What the start-up restore did, by count (`status`'s `restore`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RestoreCounts {
    /// Sessions of an earlier daemon adopted by pid.
    #[serde(default)]
    pub adopted: u64,
    /// Supervised sessions whose shim this daemon attached to again.
    #[serde(default)]
    pub reattached: u64,
    /// Supervised sessions that finished while no daemon ran.
    #[serde(default)]
    pub finished_while_away: u64,
    /// Supervised sessions whose shim had died.
    #[serde(default)]
    pub supervisor_died: u64,
    /// Sessions known from their records alone.
    #[serde(default)]
    pub records_only: u64,
    /// Sessions whose process was gone (closed as lost).
    #[serde(default)]
    pub closed_lost: u64,
    /// Sessions whose pid another process had taken.
    #[serde(default)]
    pub closed_reused: u64,
    /// Sessions that had already finished.
    #[serde(default)]
    pub already_finished: u64,
    /// Sessions whose log another live writer held.
    #[serde(default)]
    pub skipped_live_writer: u64,
    /// Checkpoint entries that could not be used, each with why.
    #[serde(default)]
    pub invalid: Vec<String>,
    /// Where an unusable checkpoint was moved aside.
    #[serde(default)]
    pub moved_aside: Option<String>,
    /// Why the checkpoint was not updated after the restore.
    #[serde(default)]
    pub checkpoint_error: Option<String>,
}

/// `status`'s `restore`: the counts, or why the restore failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RestoreSummary {
    /// The checkpoint could not be read: no session was restored.
    Failed {
        /// What failed.
        error: String,
    },
    /// What the restore did.
    Counts(RestoreCounts),
}

impl Default for RestoreSummary {
    fn default() -> RestoreSummary {
        RestoreSummary::Counts(RestoreCounts::default())
    }
}

/// `status`'s `log`: the daemon's own log, where it is and what failed to be written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DaemonLogReport {
    /// The log file (null while none is open).
    #[serde(default)]
    pub path: Option<String>,
    /// The size at which it rotates.
    #[serde(default)]
    pub max_bytes: u64,
    /// How many files the rotation keeps.
    #[serde(default)]
    pub generations: u64,
    /// Lines that could not be written.
    #[serde(default)]
    pub failed_writes: u64,
    /// Why the last one could not.
    #[serde(default)]
    pub last_error: Option<String>,
    /// The newest of them, cut short.
    #[serde(default)]
    pub recent_failed_lines: Vec<String>,
}

/// `scope`'s answer: whether restart-safe dispatch can give a spawn its own
/// systemd scope, and its settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ScopeAnswer {
    /// `not_under_systemd`, `available` or `unavailable`.
    pub status: String,
    /// The user bus socket used or looked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_path: Option<String>,
    /// What went wrong (`unavailable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// What the operator can do (`unavailable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
    /// The memory limit a dispatched worker's scope gets.
    #[serde(default)]
    pub memory_max_bytes: u64,
    /// Whether a spawn that cannot get a scope is refused.
    #[serde(default)]
    pub require_restart_safe_scope: bool,
}

/// One route's counters of a plugin (`poll`, `log`, ...).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RouteCounts {
    /// Calls handed to the plugin.
    #[serde(default)]
    pub calls: u64,
    /// Calls that failed.
    #[serde(default)]
    pub errors: u64,
    /// Calls that panicked.
    #[serde(default)]
    pub panics: u64,
    /// Calls that overran their budget.
    #[serde(default)]
    pub timeouts: u64,
}

/// A plugin's live counters (a row of a plugin the daemon chained).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PluginCounts {
    /// Calls handed to it.
    pub calls: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Calls that panicked.
    pub panics: u64,
    /// Calls that overran their budget.
    pub timeouts: u64,
    /// Calls skipped after repeated failures.
    pub suppressed: u64,
    /// The last failure's message.
    pub last_failure: Option<String>,
    /// The same counters by route.
    #[serde(default)]
    pub routes: BTreeMap<String, RouteCounts>,
}

/// One plugin, as `plugins` and `herd plugins list --json` show it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PluginRow {
    /// Its name.
    pub name: String,
    /// Its version (`plugin.toml`).
    #[serde(default)]
    pub version: String,
    /// What it does (`plugin.toml`).
    #[serde(default)]
    pub description: String,
    /// Its library.
    #[serde(default)]
    pub path: String,
    /// `loaded`, `starting`, `failed`, `disabled`, … (`not loaded` in the CLI's
    /// listing for one installed after the daemon started).
    pub status: String,
    /// Why it is not loaded.
    #[serde(default)]
    pub reason: Option<String>,
    /// When it loaded, seconds since the epoch (a loaded plugin of the daemon's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_at: Option<f64>,
    /// Its counters (a plugin the daemon chained).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub counts: Option<PluginCounts>,
}

/// `plugins`' answer (capability `plugins`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PluginsAnswer {
    /// When the daemon started its plugins, seconds since the epoch (null when it
    /// started none).
    #[serde(default)]
    pub started_at: Option<f64>,
    /// The enabled list it started with.
    #[serde(default)]
    pub enabled: Vec<String>,
    /// How long a plugin's init may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_deadline_seconds: Option<f64>,
    /// One row per plugin.
    #[serde(default)]
    pub plugins: Vec<PluginRow>,
}

/// `queue.latency`'s answer (capability `queue`): how long a queued job waited
/// from a slot freeing to its start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QueueLatency {
    /// How many starts were measured.
    #[serde(default)]
    pub n: u64,
    /// The median, in microseconds.
    #[serde(default)]
    pub p50_us: u64,
    /// The 99th percentile, in microseconds.
    #[serde(default)]
    pub p99_us: u64,
}

/// How a far host's link stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LinkStatus {
    /// No door is open (none was needed yet).
    Idle,
    /// Its door is open.
    Connected,
    /// Its door did not open, or closed.
    Unreachable,
    /// A value this crate does not know.
    #[serde(other)]
    Other,
}

/// A far host and its link (capability `hosts`): a row of `hosts`' answer, and of
/// `list`'s `hosts` with `host`/`all_hosts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HostState {
    /// The host's name (`[hosts.NAME]`).
    pub name: String,
    /// How its link stands.
    pub status: LinkStatus,
    /// Since when, RFC 3339 UTC (connected or unreachable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Why it is unreachable, or why a listing shows its last known rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// This home's jobs there still running (absent for a host never linked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs_live: Option<u64>,
    /// This home's jobs there it knows of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs_known: Option<u64>,
    /// In a listing: whether the host answered in time with fresh rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered: Option<bool>,
    /// In a listing: the host did not answer within the listing's budget.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub late: bool,
}

/// `hosts`' answer (capability `hosts`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HostsAnswer {
    /// Every configured host, by name.
    #[serde(default)]
    pub hosts: Vec<HostState>,
}
