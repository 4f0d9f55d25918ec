//! Other machines: `herd proxy` (the far side of a host's door) and `herd hosts`.
//!
//! A host is reached through a door that already exists and is already secured
//! (`ssh build1 herd proxy`, `docker exec -i ctr herd proxy`): herd opens no
//! network port of its own. `proxy.rs` is the far end, a byte bridge from
//! stdin/stdout to the far home's daemon; `door.rs` starts a host's configured
//! argv as written and greets the far herd, turning a door that fails into the
//! door's own words and a fix; `hosts.rs` lists and checks hosts; `install.rs`
//! copies this binary to a host through its `install` argv.

pub(crate) mod door;
pub(crate) mod hosts;
mod install;
mod proxy;

pub(crate) use proxy::mux::MUX_LINE;

use herd_persistence::Home;

// `herd proxy`.
#[derive(Debug, clap::Args)]
pub(crate) struct ProxyArgs {}

// `herd hosts`.
#[derive(Debug, clap::Args)]
pub(crate) struct HostsArgs {
    #[command(subcommand)]
    pub(crate) command: HostsCommand,
}

// `herd hosts …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum HostsCommand {
    /// The hosts of config.toml's [hosts.NAME] tables, with the daemon's view of
    /// each (STATUS) when it has one. With --json: `{"hosts": [{"name", "command",
    /// "install", "status"}]}`.
    List {
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Open the host's door and greet the far herd: reachable, both versions, the
    /// round trip (p50 of a few pings), the far home and user. Exit 2 for an
    /// unknown host, 3 when the door does not open (its own message and a fix).
    Check {
        /// The host's name in config.toml.
        name: String,
        /// How many pings to time.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
        pings: u32,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Copy this herd binary to the host through its `install` argv (which
    /// receives it on stdin), after checking the far OS, architecture and glibc
    /// (learned through the host's own command; a probe script stands in when no
    /// herd answers there). Refused, naming both versions, when the far glibc is
    /// older than this binary needs. Then checks the host.
    Install {
        /// The host's name in config.toml.
        name: String,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `herd proxy`.
///
/// # Errors
/// Exit 3 with a one-line reason when the daemon cannot be reached.
pub(crate) fn proxy(home: &Home, _args: ProxyArgs) -> anyhow::Result<()> {
    proxy::run(home)
}

/// Runs `herd hosts`.
///
/// # Errors
/// Those of the subcommand.
pub(crate) async fn hosts(home: &Home, args: HostsArgs) -> anyhow::Result<()> {
    match args.command {
        HostsCommand::List { json } => hosts::list(home, json).await,
        HostsCommand::Check { name, pings, json } => hosts::check(home, &name, pings, json).await,
        HostsCommand::Install { name, json } => {
            let config = crate::config::Config::load(home)?;
            let host = hosts::configured(&config, &name)?;
            install::run(&name, host, json).await
        }
    }
}
