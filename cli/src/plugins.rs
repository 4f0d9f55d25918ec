//! `herd plugins list|enable|disable|new|install`.
//!
//! A plugin is a directory `<home>/plugins/<name>/` with a `plugin.toml` naming a
//! library built against the plugin ABI. Listing runs herd-hooks' real loader in
//! this process with the config's enabled list, so a plugin that would fail in the
//! daemon shows up here as `failed` with the loader's reason (B32); the daemon runs
//! the same loader at start-up. Enabling and disabling edit `plugins.enabled` in
//! `config.toml` and take effect when the daemon restarts.

mod scaffold;

use herd_hooks::{PluginReport, load_plugins, resolve_plugin};
use herd_persistence::Home;
use serde_json::{Value, json};

use crate::args::PluginsCommand;
use crate::config::{Config, set_plugin_enabled};
use crate::exit::{Code, Failure};
use crate::output;

/// The load report for the home's plugins with the config's enabled list.
pub(crate) fn reports(home: &Home, config: &Config) -> Vec<PluginReport> {
    let (_chain, reports) = load_plugins(&home.plugins_dir(), &config.plugins.enabled);
    reports
}

/// One report as the JSON row of `herd plugins list --json`.
pub(crate) fn row_json(report: &PluginReport) -> Value {
    json!({
        "name": report.name,
        "version": report.version,
        "description": report.description,
        "path": report.path.display().to_string(),
        "status": report.status.as_str(),
        "reason": report.reason,
    })
}

/// Runs a `herd plugins` subcommand.
///
/// # Errors
/// Unknown plugin names (exit 2) and config errors.
pub(crate) fn run(home: &Home, config: &Config, command: &PluginsCommand) -> anyhow::Result<()> {
    match command {
        PluginsCommand::List(flag) => {
            let reports = reports(home, config);
            if flag.json {
                let rows: Vec<Value> = reports.iter().map(row_json).collect();
                output::json_pretty(&json!({"plugins": rows}))?;
            } else if reports.is_empty() {
                output::line(&format!(
                    "no plugins installed in {}",
                    home.plugins_dir().display()
                ))?;
            } else {
                let mut table = comfy_table::Table::new();
                table
                    .load_preset(comfy_table::presets::NOTHING)
                    .set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
                    .set_header(["NAME", "STATUS", "VERSION", "REASON"]);
                for report in &reports {
                    table.add_row([
                        report.name.clone(),
                        report.status.as_str().to_owned(),
                        report.version.clone(),
                        report.reason.clone().unwrap_or_default(),
                    ]);
                }
                output::line(&table.to_string())?;
                output::line(
                    "plugins are opt-in: enabled plugins load when the daemon starts (herd shutdown restarts it on the next command)",
                )?;
            }
            Ok(())
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
