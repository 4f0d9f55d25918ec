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
use serde_json::{Value, json};

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
pub(crate) fn report(started: Option<&Started>, pipeline: &Pipeline) -> Value {
    let Some(started) = started else {
        return json!({"started_at": null, "enabled": [], "plugins": []});
    };
    let stats = pipeline.hook_stats();
    let rows: Vec<Value> = started
        .reports
        .iter()
        .map(|report| {
            let mut row = super::row_json(report);
            if let Some(stats) = stats.iter().find(|s| s.name == report.name) {
                live_fields(&mut row, stats);
            }
            row
        })
        .collect();
    json!({
        "started_at": unix_seconds(started.at),
        "enabled": started.enabled,
        "init_deadline_seconds": herd_hooks::INIT_DEADLINE.as_secs_f64(),
        "plugins": rows,
    })
}

/// A chained plugin's live status and counters, on its report row.
fn live_fields(row: &mut Value, stats: &HookStats) {
    match &stats.start {
        HookStart::Ready { since } => {
            row["status"] = json!(PluginStatus::Loaded.as_str());
            row["reason"] = Value::Null;
            row["loaded_at"] = json!(since.map(unix_seconds));
        }
        HookStart::Starting => row["status"] = json!(PluginStatus::Starting.as_str()),
        HookStart::Failed { reason } => {
            row["status"] = json!(PluginStatus::Failed.as_str());
            row["reason"] = json!(reason);
        }
        _ => {}
    }
    row["calls"] = json!(stats.n_calls);
    row["errors"] = json!(stats.n_errors);
    row["panics"] = json!(stats.n_panics);
    row["timeouts"] = json!(stats.n_timeouts);
    row["suppressed"] = json!(stats.n_suppressed);
    row["last_failure"] = json!(stats.last_failure);
    let routes: serde_json::Map<String, Value> = stats
        .routes
        .iter()
        .map(|(route, c)| {
            (
                (*route).to_owned(),
                json!({"calls": c.calls, "errors": c.errors, "panics": c.panics, "timeouts": c.timeouts}),
            )
        })
        .collect();
    row["routes"] = Value::Object(routes);
}

/// The listing: the daemon's rows when one runs and answers `plugins`, with what
/// it does not apply yet; otherwise the files, checked without running any init.
#[derive(Debug)]
pub(crate) struct Listing {
    /// The daemon's pid, when the rows are the daemon's.
    pub(crate) daemon: Option<u32>,
    /// One row per plugin (see `row_json`, plus the daemon's fields and `pending`).
    pub(crate) rows: Vec<Value>,
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
            let answer = client.request("plugins", json!({})).await?;
            let pid = client.hello.pid;
            return Ok(Listing {
                daemon: Some(pid),
                rows: with_pending(home, config, &answer),
            });
        }
        let reports = herd_hooks::check_plugins(&home.plugins_dir(), &config.plugins.enabled);
        Ok(Listing {
            daemon: None,
            rows: reports.iter().map(super::row_json).collect(),
        })
    }
}

/// The daemon's rows, each with `pending` (what a restart would change, or null),
/// and a row for each plugin installed since the daemon started.
fn with_pending(home: &Home, config: &Config, answer: &Value) -> Vec<Value> {
    let started_at = answer["started_at"].as_f64().unwrap_or(0.0);
    let was_enabled = |name: &str| {
        answer["enabled"]
            .as_array()
            .is_some_and(|list| list.iter().any(|n| n == name))
    };
    let enabled_now = |name: &str| config.plugins.enabled.iter().any(|n| n == name);
    let mut rows: Vec<Value> = answer["plugins"].as_array().cloned().unwrap_or_default();
    // What is installed now, no library opened.
    for report in herd_hooks::check_plugins(&home.plugins_dir(), &[]) {
        if !rows.iter().any(|r| r["name"] == report.name.as_str()) {
            let mut row = super::row_json(&report);
            row["status"] = json!("not loaded");
            row["reason"] = json!("installed after the daemon started");
            rows.push(row);
        }
    }
    for row in &mut rows {
        let name = row["name"].as_str().unwrap_or_default().to_owned();
        let running = matches!(row["status"].as_str(), Some("loaded" | "starting"));
        let changed = std::fs::metadata(row["path"].as_str().unwrap_or_default())
            .and_then(|m| m.modified())
            .is_ok_and(|m| unix_seconds(m) > started_at);
        let pending = if enabled_now(&name) && !was_enabled(&name) {
            Some("enabled after the daemon started; restart to apply (herd shutdown)")
        } else if !enabled_now(&name) && was_enabled(&name) {
            Some("disabled after the daemon started; it runs until a restart (herd shutdown)")
        } else if running && changed {
            Some("its library changed after the daemon loaded it; restart to apply (herd shutdown)")
        } else {
            None
        };
        row["pending"] = json!(pending);
    }
    rows
}
