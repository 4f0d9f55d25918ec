//! Other machines: `herd proxy` (the far side of a host's door) and `herd hosts`.

use herd_persistence::Home;

/// `herd proxy`.
#[derive(Debug, clap::Args)]
pub(crate) struct ProxyArgs {}

/// `herd hosts`.
#[derive(Debug, clap::Args)]
pub(crate) struct HostsArgs {}

/// Runs `herd proxy`.
pub(crate) fn proxy(_home: &Home, _args: ProxyArgs) -> anyhow::Result<()> {
    anyhow::bail!("herd proxy is not built yet")
}

/// Runs `herd hosts`.
pub(crate) async fn hosts(_home: &Home, _args: HostsArgs) -> anyhow::Result<()> {
    anyhow::bail!("herd hosts is not built yet")
}
