//! `herd restart`: a session started again.
//!
//! Restart is a daemon method (capability `restart`), not a composition of lookup,
//! kill and spawn in the client: only the daemon knows how the session was started
//! (its command, working directory, mode and options, kept in memory and in the
//! checkpoint), and doing the kill, the wait for its end and the spawn in one call
//! keeps the name free for the new session without a window where a second client
//! could take it. The client adds what only it has: its *current* environment, which
//! the new job runs in as a new `herd run` would (forwarded credentials come from
//! it again; the daemon never stored their values).
//!
//! `herd top` calls [`restart`] for its restart key.

use herd_persistence::Home;
use herd_protocol::methods::Restart;
use herd_protocol::params::RestartParams;
use serde_json::Value;

use crate::client::{Client, answer_of};
use crate::exit::{Code, Failure};
use crate::output;

// `herd restart`.
#[derive(Debug, clap::Args)]
pub(crate) struct RestartArgs {
    /// The session id, a unique prefix, or a name. A running session is killed
    /// first (its whole tree, reason `restarted`); a finished one is started again.
    #[arg(value_name = "ID", add = clap_complete::ArgValueCandidates::new(crate::complete::sessions))]
    pub(crate) id: String,
    /// Print the new session's spawn answer as JSON (with `replaces`, the old id).
    #[arg(long)]
    pub(crate) json: bool,
}

/// Runs `herd restart`.
pub(crate) async fn run(home: &Home, args: RestartArgs) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    let info = restart(&mut client, &args.id).await?;
    if args.json {
        return Ok(output::json_line(&info)?);
    }
    let info = answer_of::<Restart>(info)?;
    output::line(&output::visible(&info.session_id))?;
    for note in [&info.pty_note, &info.note].into_iter().flatten() {
        output::err_line(&format!("note: {}", output::visible(note)));
    }
    Ok(())
}

/// Restarts session `id` (id, prefix or name) over `client`, in this process's
/// environment; answers the new session's spawn info, whose `replaces` is the old
/// id.
///
/// # Errors
/// Exit 2 naming `herd ps --all` for an unknown id, exit 2 naming the need to
/// restart the daemon when it does not serve `restart`, and the daemon's error
/// with its exit code otherwise.
pub(crate) async fn restart(client: &mut Client, id: &str) -> anyhow::Result<Value> {
    if !client.hello.serves("restart") {
        return Err(Failure::new(
            Code::Usage,
            format!(
                "the running daemon (herd {}) cannot restart sessions; run `herd shutdown --keep-jobs` to replace it with this version, then retry",
                client.hello.daemon
            ),
        )
        .into());
    }
    let params = RestartParams {
        id: id.to_owned(),
        caller_env: Some(herd_core::utf8_environment().into_iter().collect()),
    };
    client.send_typed::<Restart>(&params).await
}
