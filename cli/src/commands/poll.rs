//! `herd poll`: one session's state and output preview.

use herd_persistence::Home;
use herd_protocol::methods::Poll;
use herd_protocol::params::IdParams;
use serde_json::Value;

use crate::args::IdArgs;
use crate::client::Client;
use crate::output;

/// `herd poll`.
pub(crate) async fn poll(home: &Home, args: IdArgs) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    let answer = client
        .send_typed::<Poll>(&IdParams::new(args.id.as_str()))
        .await?;
    if args.json {
        return Ok(output::json_pretty(&answer)?);
    }
    print_fields(
        &answer,
        &[
            "session_id",
            "status",
            "pid",
            "uptime_seconds",
            "exit_code",
            "signal",
            "completion_reason",
            "termination_source",
            "containment",
            "command",
            "log_path",
        ],
    )?;
    if let Some(leftovers) = answer["leftovers"].as_array().filter(|l| !l.is_empty()) {
        output::line(&format!(
            "leftovers: {} process(es) of its tree still run, held by the session (`herd kill` ends them)",
            leftovers.len()
        ))?;
        for l in leftovers {
            output::line(&format!(
                "  {} {}",
                l["pid"],
                output::visible(l["command"].as_str().unwrap_or_default())
            ))?;
        }
    }
    if let Some(preview) = answer["output_preview"].as_str().filter(|p| !p.is_empty()) {
        output::line("output:")?;
        output::line(&output::visible_lines(preview.trim_end()))?;
    }
    super::warn_not_kept(&answer);
    Ok(())
}

/// Prints `key: value` for the keys that are present and not null, each value
/// rendered safe for a terminal.
fn print_fields(answer: &Value, keys: &[&str]) -> anyhow::Result<()> {
    for key in keys {
        match &answer[*key] {
            Value::Null => {}
            Value::String(s) => output::line(&format!("{key}: {}", output::visible(s)))?,
            other => output::line(&format!("{key}: {other}"))?,
        }
    }
    Ok(())
}
