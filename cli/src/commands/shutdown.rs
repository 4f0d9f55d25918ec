//! `herd shutdown`: stop the daemon, asking a person first when jobs would die
//! (and refusing, with no terminal to ask on, unless `--yes` or `--keep-jobs`).

use std::io::IsTerminal;

use herd_persistence::Home;
use herd_protocol::methods::{Shutdown, Status};
use herd_protocol::params::{NoParams, ShutdownParams};
use serde_json::json;

use crate::client::Client;
use crate::exit::{Code, Failure};
use crate::output;

/// `herd shutdown`: stops the daemon and waits until it has gone.
pub(crate) async fn shutdown(
    home: &Home,
    json: bool,
    keep_jobs: bool,
    yes: bool,
) -> anyhow::Result<()> {
    let Some(mut client) = Client::try_connect(home).await? else {
        if json {
            output::json_line(&json!({"status": "not_running"}))?;
        } else {
            output::line(&format!(
                "no daemon is running for {}",
                home.root().display()
            ))?;
        }
        return Ok(());
    };
    let pid = client.hello.pid;
    // A status without its count is an error, never "no job runs" (which would
    // kill them unasked).
    let running = client.ask::<Status>(&NoParams {}).await?.running;
    // Running jobs are killed only when that was asked for: --yes, or a person
    // at a terminal who answers yes. A script or an agent's shell tool (no
    // terminal, or --json) is refused and told how to say which it meant.
    let asks = running > 0 && !keep_jobs && !yes;
    if asks && (json || !std::io::stdin().is_terminal()) {
        return Err(Failure::new(
            Code::Usage,
            format!(
                "nothing stopped: {running} job{} running and shutting down kills {}; with no \
                 terminal to ask on, add `--yes` to kill {} or `--keep-jobs` to stop the \
                 daemon and leave {} running",
                if running == 1 { " is" } else { "s are" },
                if running == 1 { "it" } else { "them all" },
                if running == 1 { "it" } else { "them" },
                if running == 1 { "it" } else { "them" },
            ),
        )
        .into());
    }
    if asks {
        let question = format!(
            "{running} job{} running; shutting down kills {}. Continue? [y/N] ",
            if running == 1 { " is" } else { "s are" },
            if running == 1 { "it" } else { "them all" }
        );
        if !output::confirm(&question)? {
            return Err(Failure::new(
                Code::Usage,
                "nothing stopped; `herd shutdown --keep-jobs` stops the daemon and leaves the jobs running",
            )
            .into());
        }
    }
    client
        .send_typed::<Shutdown>(&ShutdownParams { keep_jobs })
        .await?;
    // The daemon keeps this connection open until its process ends.
    while let Ok(Some(_)) = client.next_message().await {}
    let jobs = if keep_jobs { "kept" } else { "killed" };
    let plural = if running == 1 { "" } else { "s" };
    if json {
        output::json_line(
            &json!({"status": "stopped", "pid": pid, "jobs": jobs, "running_jobs": running}),
        )?;
    } else if keep_jobs {
        output::line(&format!(
            "daemon stopped (pid {pid}); its {running} running job{plural} keep running and the next daemon re-attaches them"
        ))?;
    } else {
        output::line(&format!(
            "daemon stopped (pid {pid}); {running} running job{plural} killed"
        ))?;
    }
    Ok(())
}
