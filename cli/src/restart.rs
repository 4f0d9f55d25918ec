//! `herd restart`: a session started again.

use herd_persistence::Home;

/// `herd restart`.
#[derive(Debug, clap::Args)]
pub(crate) struct RestartArgs {
    /// The session id, a unique prefix, or a name.
    pub(crate) id: String,
}

/// Runs `herd restart`.
pub(crate) async fn run(_home: &Home, _args: RestartArgs) -> anyhow::Result<()> {
    anyhow::bail!("herd restart is not built yet")
}
