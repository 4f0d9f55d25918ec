//! What the running daemon loaded (the `plugins` method, capability `plugins`), and
//! the listing `herd plugins list` and `herd doctor` show from it.
//!
//! The daemon answers from its start-up report and its hook chain: each plugin's
//! status (`starting`, `loaded`, `failed` with the reason; a plugin whose init
//! missed its deadline is `failed`), when it loaded, and its call, error, panic and
//! timeout counts, in total and per route, with the last failure. The CLI compares
//! that with the files as they are now (the config's enabled list, the libraries'
//! modification times) and says "restart to apply" for what the daemon does not
//! run yet. Without a daemon the CLI checks the files without running any init.

use std::time::{SystemTime, UNIX_EPOCH};

use herd_hooks::{HookStart, HookStats, Pipeline, PluginReport, PluginStatus};
use herd_persistence::Home;
use herd_protocol::daemon::{PluginCounts, PluginRow, PluginsAnswer, RouteCounts};
use herd_protocol::methods::Plugins;
use herd_protocol::params::NoParams;
use serde_json::Value;

use crate::client::Client;
use crate::config::Config;

/// The capability a daemon announces when it answers `plugins`.
pub(crate) const CAPABILITY: &str = "plugins";

/// What the daemon started with: the start-up report, the enabled list it was
/// given, and when.
#[derive(Debug, Clone)]
pub(crate) struct Started {
    at: SystemTime,
    enabled: Vec<String>,
    reports: Vec<PluginReport>,
}

impl Started {
    /// The daemon's start: `reports` from `start_plugins` with `config`'s list.
    pub(crate) fn new(reports: Vec<PluginReport>, config: &Config) -> Started {
        Started {
            at: SystemTime::now(),
            enabled: config.plugins.enabled.clone(),
            reports,
        }
    }
}

/// Seconds since the epoch (0 before it).
fn unix_seconds(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| (d.as_secs_f64() * 1000.0).round() / 1000.0)
}

/// The daemon's answer to `plugins`.
pub(crate) fn report(started: Option<&Started>, pipeline: &Pipeline) -> PluginsAnswer {
    let Some(started) = started else {
        return PluginsAnswer::default();
    };
    let stats = pipeline.hook_stats();
    let rows = started
        .reports
        .iter()
        .map(|report| {
            let mut row = super::row(report);
            if let Some(stats) = stats.iter().find(|s| s.name == report.name) {
                live_fields(&mut row, stats);
            }
            row
        })
        .collect();
    PluginsAnswer {
        started_at: Some(unix_seconds(started.at)),
        enabled: started.enabled.clone(),
        init_deadline_seconds: Some(herd_hooks::INIT_DEADLINE.as_secs_f64()),
        plugins: rows,
    }
}

/// A chained plugin's live status and counters, on its report row.
fn live_fields(row: &mut PluginRow, stats: &HookStats) {
    match &stats.start {
        HookStart::Ready { since } => {
            PluginStatus::Loaded.as_str().clone_into(&mut row.status);
            row.reason = None;
            row.loaded_at = since.map(unix_seconds);
        }
        HookStart::Starting => PluginStatus::Starting.as_str().clone_into(&mut row.status),
        HookStart::Failed { reason } => {
            PluginStatus::Failed.as_str().clone_into(&mut row.status);
            row.reason = Some(reason.clone());
        }
        _ => {}
    }
    let routes = stats
        .routes
        .iter()
        .map(|(route, c)| {
            (
                (*route).to_owned(),
                RouteCounts {
                    calls: c.calls,
                    errors: c.errors,
                    panics: c.panics,
                    timeouts: c.timeouts,
                },
            )
        })
        .collect();
    row.counts = Some(PluginCounts {
        calls: stats.n_calls,
        errors: stats.n_errors,
        panics: stats.n_panics,
        timeouts: stats.n_timeouts,
        suppressed: stats.n_suppressed,
        last_failure: stats.last_failure.clone(),
        routes,
    });
}

/// A row of the listing: the plugin's row and, from a daemon, what a restart
/// would change.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Listed {
    /// The plugin as the daemon (or the files) say.
    #[serde(flatten)]
    pub(crate) row: PluginRow,
    /// What a restart would change (`null` for nothing). Only a daemon's rows
    /// carry it: the files' rows print without it.
    pub(crate) pending: Option<&'static str>,
}

/// The listing: the daemon's rows when one runs and answers `plugins`, with what
/// it does not apply yet; otherwise the files, checked without running any init.
#[derive(Debug)]
pub(crate) struct Listing {
    /// The daemon's pid, when the rows are the daemon's.
    pub(crate) daemon: Option<u32>,
    /// One row per plugin.
    pub(crate) rows: Vec<Listed>,
}

impl Listing {
    /// Asks a running daemon (never starts one), else checks the files.
    ///
    /// # Errors
    /// When a daemon answers but its answer cannot be read.
    pub(crate) async fn current(home: &Home, config: &Config) -> anyhow::Result<Listing> {
        if let Ok(Some(mut client)) = Client::try_connect(home).await
            && client.hello.serves(CAPABILITY)
        {
            let answer = client.ask::<Plugins>(&NoParams {}).await?;
            let pid = client.hello.pid;
            return Ok(Listing {
                daemon: Some(pid),
                rows: with_pending(home, config, answer),
            });
        }
        let reports = herd_hooks::check_plugins(&home.plugins_dir(), &config.plugins.enabled);
        Ok(Listing {
            daemon: None,
            rows: reports
                .iter()
                .map(|r| Listed {
                    row: super::row(r),
                    pending: None,
                })
                .collect(),
        })
    }

    /// The rows as `herd plugins list --json` prints them: herd-protocol's
    /// `PluginRow`, plus `pending` for a daemon's, as JSON objects (whose keys
    /// print in order, as they always have).
    pub(crate) fn json_rows(&self) -> Vec<Value> {
        self.rows
            .iter()
            .map(|listed| match self.daemon {
                Some(_) => as_value(listed),
                None => as_value(&listed.row),
            })
            .collect()
    }
}

/// A row as the JSON the listing prints (a row always serialises).
fn as_value<T: serde::Serialize>(row: &T) -> Value {
    serde_json::to_value(row).unwrap_or_default()
}

/// The daemon's rows, each with `pending` (what a restart would change, or null),
/// and a row for each plugin installed since the daemon started.
fn with_pending(home: &Home, config: &Config, answer: PluginsAnswer) -> Vec<Listed> {
    let started_at = answer.started_at.unwrap_or(0.0);
    let was_enabled = |name: &str| answer.enabled.iter().any(|n| n == name);
    let enabled_now = |name: &str| config.plugins.enabled.iter().any(|n| n == name);
    let mut rows = answer.plugins.clone();
    // What is installed now, no library opened.
    for report in herd_hooks::check_plugins(&home.plugins_dir(), &[]) {
        if !rows.iter().any(|r| r.name == report.name) {
            let mut row = super::row(&report);
            "not loaded".clone_into(&mut row.status);
            row.reason = Some("installed after the daemon started".to_owned());
            rows.push(row);
        }
    }
    rows.into_iter()
        .map(|row| {
            let running = matches!(row.status.as_str(), "loaded" | "starting");
            let changed = std::fs::metadata(&row.path)
                .and_then(|m| m.modified())
                .is_ok_and(|m| unix_seconds(m) > started_at);
            let pending = if enabled_now(&row.name) && !was_enabled(&row.name) {
                Some("enabled after the daemon started; restart to apply (herd shutdown)")
            } else if !enabled_now(&row.name) && was_enabled(&row.name) {
                Some("disabled after the daemon started; it runs until a restart (herd shutdown)")
            } else if running && changed {
                Some("its library changed after the daemon loaded it; restart to apply (herd shutdown)")
            } else {
                None
            };
            Listed { row, pending }
        })
        .collect()
}
