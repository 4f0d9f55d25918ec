//! `herd attach`: a session on this terminal.

use herd_persistence::Home;

/// `herd attach`.
#[derive(Debug, clap::Args)]
pub(crate) struct AttachArgs {
    /// The session id, a unique prefix, or a name.
    pub(crate) id: String,
}

/// Runs `herd attach`.
pub(crate) fn run(_home: &Home, _args: AttachArgs) -> anyhow::Result<()> {
    anyhow::bail!("herd attach is not built yet")
}
