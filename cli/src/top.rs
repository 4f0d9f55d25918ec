//! `herd top`: a live full-screen view of the home's sessions.

use herd_persistence::Home;

/// `herd top`.
#[derive(Debug, clap::Args)]
pub(crate) struct TopArgs {}

/// Runs `herd top`.
pub(crate) fn run(_home: &Home, _args: TopArgs) -> anyhow::Result<()> {
    anyhow::bail!("herd top is not built yet")
}
