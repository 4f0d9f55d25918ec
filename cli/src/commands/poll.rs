//! `herd poll`: one session's state and output preview.

use herd_persistence::Home;
use herd_protocol::methods::Poll;
use herd_protocol::params::IdParams;

use crate::args::IdArgs;
use crate::client::{Client, answer_of};
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
    let answer = answer_of::<Poll>(&answer)?;
    let text = |s: &str| Some(s.to_owned());
    print_fields(&[
        ("session_id", text(&answer.session_id)),
        ("status", text(answer.status.as_str())),
        ("pid", Some(answer.pid.to_string())),
        ("uptime_seconds", Some(answer.uptime_seconds.to_string())),
        ("exit_code", answer.exit_code.map(|c| c.to_string())),
        ("signal", answer.signal.map(|s| s.to_string())),
        (
            "completion_reason",
            answer.completion_reason.map(|r| r.as_str().to_owned()),
        ),
        ("termination_source", answer.termination_source.clone()),
        // Absent from a daemon older than containment.
        (
            "containment",
            Some(answer.containment.clone()).filter(|c| !c.is_empty()),
        ),
        ("command", text(&answer.command)),
        ("log_path", text(&answer.log_path.to_string_lossy())),
    ])?;
    if !answer.leftovers.is_empty() {
        output::line(&format!(
            "leftovers: {} process(es) of its tree still run, held by the session (`herd kill` ends them)",
            answer.leftovers.len()
        ))?;
        for l in &answer.leftovers {
            output::line(&format!("  {} {}", l.pid, output::visible(&l.command)))?;
        }
    }
    if !answer.output_preview.is_empty() {
        output::line("output:")?;
        output::line(&output::visible_lines(answer.output_preview.trim_end()))?;
    }
    super::warn_not_kept(answer.bytes_not_kept, &answer.log_path);
    Ok(())
}

/// Prints `key: value` for the fields that are present, each value rendered safe
/// for a terminal.
fn print_fields(fields: &[(&str, Option<String>)]) -> anyhow::Result<()> {
    for (key, value) in fields {
        if let Some(value) = value {
            output::line(&format!("{key}: {}", output::visible(value)))?;
        }
    }
    Ok(())
}
