//! `herd plugins list|enable|disable`.
//!
//! A plugin is a directory `<home>/plugins/<name>/` with a `plugin.toml`. Until
//! herd-hooks' loader is wired in, the status comes from the config alone
//! (`enabled` / `disabled`), and a directory without a readable manifest is
//! `failed` with the reason.

use herd_persistence::Home;
use serde::Serialize;
use serde_json::json;

use crate::args::PluginsCommand;
use crate::config::{Config, set_plugin_enabled};
use crate::exit::{Code, Failure};
use crate::output;

/// One row of `herd plugins list`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PluginRow {
    /// The plugin's name (its directory name).
    pub(crate) name: String,
    /// Its version from the manifest, when readable.
    pub(crate) version: Option<String>,
    /// Its directory.
    pub(crate) path: String,
    /// `enabled`, `disabled` or `failed`.
    pub(crate) status: String,
    /// Why it failed, when it did.
    pub(crate) reason: Option<String>,
}

/// Lists the home's plugins.
///
/// # Errors
/// An unreadable plugins directory.
pub(crate) fn rows(home: &Home, config: &Config) -> anyhow::Result<Vec<PluginRow>> {
    let dir = home.plugins_dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => {
            return Err(
                anyhow::Error::new(err).context(format!("failed to read {}", dir.display()))
            );
        }
    };
    let mut rows = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let enabled = config.plugins.enabled.contains(&name);
        let manifest = path.join("plugin.toml");
        let (version, failure) = match std::fs::read_to_string(&manifest) {
            Ok(text) => match toml::from_str::<toml::Table>(&text) {
                Ok(table) => (
                    table
                        .get("version")
                        .and_then(|v| v.as_str())
                        .map(str::to_owned),
                    None,
                ),
                Err(err) => (
                    None,
                    Some(format!(
                        "invalid manifest {}: {}",
                        manifest.display(),
                        err.message()
                    )),
                ),
            },
            Err(err) => (
                None,
                Some(format!(
                    "cannot read manifest {}: {err}",
                    manifest.display()
                )),
            ),
        };
        let status = match (&failure, enabled) {
            (Some(_), true) => "failed",
            (_, true) => "enabled",
            (_, false) => "disabled",
        };
        rows.push(PluginRow {
            name,
            version,
            path: path.display().to_string(),
            status: status.to_owned(),
            reason: if enabled { failure } else { None },
        });
    }
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(rows)
}

/// Runs a `herd plugins` subcommand.
///
/// # Errors
/// Unknown plugin names (exit 2) and config errors.
pub(crate) fn run(home: &Home, config: &Config, command: &PluginsCommand) -> anyhow::Result<()> {
    match command {
        PluginsCommand::List(flag) => {
            let rows = rows(home, config)?;
            if flag.json {
                output::json_pretty(&json!({"plugins": rows}))?;
            } else if rows.is_empty() {
                output::line(&format!(
                    "no plugins installed in {}",
                    home.plugins_dir().display()
                ))?;
            } else {
                let mut table = comfy_table::Table::new();
                table
                    .load_preset(comfy_table::presets::NOTHING)
                    .set_header(["NAME", "STATUS", "VERSION", "REASON"]);
                for row in rows {
                    table.add_row([
                        row.name,
                        row.status,
                        row.version.unwrap_or_default(),
                        row.reason.unwrap_or_default(),
                    ]);
                }
                output::line(&table.to_string())?;
                output::line(
                    "plugins are opt-in: only enabled plugins load, when the daemon starts",
                )?;
            }
            Ok(())
        }
        PluginsCommand::Enable(p) | PluginsCommand::Disable(p) => {
            let enable = matches!(command, PluginsCommand::Enable(_));
            if enable && !home.plugins_dir().join(&p.name).is_dir() {
                return Err(Failure::new(
                    Code::Usage,
                    format!(
                        "plugin `{}` is not installed: no directory {}",
                        p.name,
                        home.plugins_dir().join(&p.name).display()
                    ),
                )
                .into());
            }
            let changed = set_plugin_enabled(home, &p.name, enable)?;
            let verb = if enable { "enabled" } else { "disabled" };
            if changed {
                output::line(&format!(
                    "plugin {} {verb}; restart the daemon (herd shutdown) for it to take effect",
                    p.name
                ))?;
            } else {
                output::line(&format!("plugin {} was already {verb}", p.name))?;
            }
            Ok(())
        }
    }
}
