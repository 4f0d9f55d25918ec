//! `herd plugins list|enable|disable|new|install`.
//!
//! A plugin is a directory `<home>/plugins/<name>/` with a `plugin.toml` naming a
//! library built against the plugin ABI. Listing asks the running daemon what it
//! loaded (`live.rs`: status, counts, last failure, and "restart to apply" for a
//! change it does not run yet); without a daemon it checks the files with
//! herd-hooks' loader short of running any plugin's init, so a plugin that would
//! fail to open shows up as `failed` with the loader's reason (B32). Enabling and
//! disabling edit `plugins.enabled` in `config.toml` and take effect when the
//! daemon restarts.

mod live;
mod scaffold;

pub(crate) use live::{Listed, Listing, Started, report};

use herd_hooks::{PluginReport, resolve_plugin};
use herd_persistence::Home;
use herd_protocol::daemon::{PluginCounts, PluginRow};
use serde_json::Value;

use crate::args::PluginsCommand;
use crate::config::{Config, set_plugin_enabled};
use crate::exit::{Code, Failure};
use crate::output;

/// One report as the row of `plugins` and `herd plugins list --json`.
pub(crate) fn row(report: &PluginReport) -> PluginRow {
    PluginRow {
        name: report.name.clone(),
        version: report.version.clone(),
        description: report.description.clone(),
        path: report.path.display().to_string(),
        status: report.status.as_str().to_owned(),
        reason: report.reason.clone(),
        loaded_at: None,
        counts: None,
    }
}

/// What `herd plugins list --json` prints.
#[derive(Debug, serde::Serialize)]
struct ListingJson<'a> {
    /// `daemon` or `files`.
    source: &'static str,
    /// The daemon's pid (null for the files').
    daemon_pid: Option<u32>,
    /// The rows.
    plugins: &'a [Value],
}

/// Runs a `herd plugins` subcommand.
///
/// # Errors
/// Unknown plugin names (exit 2) and config errors.
pub(crate) fn run(home: &Home, config: &Config, command: &PluginsCommand) -> anyhow::Result<()> {
    match command {
        PluginsCommand::List(flag) => {
            let listing = crate::client_runtime()?.block_on(Listing::current(home, config))?;
            print_listing(home, &listing, flag.json)
        }
        PluginsCommand::New(args) => scaffold::new(&args.name, args.path.as_deref()),
        PluginsCommand::Install(args) => scaffold::install(home, &args.path),
        PluginsCommand::Enable(p) | PluginsCommand::Disable(p) => {
            let enable = matches!(command, PluginsCommand::Enable(_));
            let name = match resolve_plugin(&home.plugins_dir(), &p.name) {
                Ok(name) => name,
                // Disabling a plugin that is gone must still clean the config.
                Err(_) if !enable => p.name.clone(),
                Err(err) => {
                    return Err(Failure::new(
                        Code::Usage,
                        format!("plugin `{}` is not installed: {err}", p.name),
                    )
                    .into());
                }
            };
            let changed = set_plugin_enabled(home, &name, enable)?;
            let verb = if enable { "enabled" } else { "disabled" };
            if changed {
                output::line(&format!(
                    "plugin {name} {verb}; it takes effect when the daemon restarts (herd shutdown)"
                ))?;
            } else {
                output::line(&format!("plugin {name} was already {verb}"))?;
            }
            Ok(())
        }
    }
}

/// Prints `herd plugins list`.
fn print_listing(home: &Home, listing: &Listing, json: bool) -> anyhow::Result<()> {
    if json {
        output::json_pretty(&ListingJson {
            source: if listing.daemon.is_some() {
                "daemon"
            } else {
                "files"
            },
            daemon_pid: listing.daemon,
            plugins: &listing.json_rows(),
        })?;
        return Ok(());
    }
    if listing.rows.is_empty() {
        output::line(&format!(
            "no plugins installed in {}",
            home.plugins_dir().display()
        ))?;
        return Ok(());
    }
    let mut table = comfy_table::Table::new();
    table
        .load_preset(comfy_table::presets::NOTHING)
        .set_content_arrangement(comfy_table::ContentArrangement::Dynamic);
    if listing.daemon.is_some() {
        table.set_header([
            "NAME",
            "STATUS",
            "VERSION",
            "CALLS",
            "ERR/PANIC/TIMEOUT",
            "REASON",
        ]);
    } else {
        table.set_header(["NAME", "STATUS", "VERSION", "REASON"]);
    }
    for Listed { row, pending } in &listing.rows {
        let counts = row.counts.as_ref();
        let reason = [
            row.reason.as_deref(),
            counts.and_then(|c| c.last_failure.as_deref()),
            *pending,
        ]
        .into_iter()
        .flatten()
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
        let mut cells = vec![row.name.clone(), row.status.clone(), row.version.clone()];
        if listing.daemon.is_some() {
            // A row without counters (a plugin the daemon did not chain) shows none.
            let count = |n: fn(&PluginCounts) -> u64| counts.map(|c| n(c).to_string());
            cells.push(count(|c| c.calls).unwrap_or_default());
            cells.push(format!(
                "{}/{}/{}",
                count(|c| c.errors).unwrap_or_default(),
                count(|c| c.panics).unwrap_or_default(),
                count(|c| c.timeouts).unwrap_or_default()
            ));
        }
        cells.push(reason);
        table.add_row(cells);
    }
    output::line(&table.to_string())?;
    match listing.daemon {
        Some(pid) => output::line(&format!(
            "as loaded by the running daemon (pid {pid}); a change marked \"restart to apply\" takes effect after `herd shutdown`"
        ))?,
        None => output::line(
            "no daemon is running: checked the files without running any plugin's init; enabled plugins load when the daemon starts",
        )?,
    }
    Ok(())
}
