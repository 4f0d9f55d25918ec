//! `herd hosts list` and `herd hosts check NAME`.
//!
//! `list` prints config's `[hosts.NAME]` tables. The STATUS column is the local
//! daemon's view of each host (connected, unreachable since ...), shown only when
//! a running daemon serves the `hosts` capability: its `hosts` method answers
//! `{"hosts": [{"name": "build1", "status": "connected", ...}]}`, and `list` copies
//! `status` (and, in `--json`, the whole entry as `daemon`). Listing never starts a
//! daemon and never opens a door.
//!
//! `check` opens the host's door itself (not through the daemon), so it tells what
//! a fresh connection meets: the far herd's versions, its home and user, and the
//! round trip of a few `status` calls through the door (p50). It fails (exit 1)
//! on a far daemon that runs jobs without herd-shim (its `status` says
//! `supervisor`), as `herd doctor` warns there: such far jobs end with a crash of
//! the far daemon and their completions never arrive.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use herd_protocol::answers::StatusAnswer;
use herd_protocol::daemon::{HostState, LinkStatus};
use herd_protocol::methods::{Hosts, Status};
use herd_protocol::params::NoParams;
use serde::Serialize;

use super::door;
use crate::client::Client;
use crate::config::{Config, HostConfig, is_host_name};
use crate::exit::{Code, Failure};
use crate::output;
use crate::protocol::PROTOCOL_VERSION;

/// The capability a daemon announces when it answers the `hosts` method.
pub(crate) const HOSTS_CAPABILITY: &str = "hosts";

/// The host `name` from config, or exit 2 naming the configured ones.
///
/// # Errors
/// [`Code::Usage`] for a name that is not a host name or not configured.
pub(crate) fn configured<'c>(config: &'c Config, name: &str) -> anyhow::Result<&'c HostConfig> {
    if !is_host_name(name) {
        return Err(Failure::new(
            Code::Usage,
            format!(
                "`{name}` is not a host name: use 1 to 32 of a-z, 0-9, `_` and `-`, starting with a letter or digit"
            ),
        )
        .into());
    }
    config.hosts.get(name).ok_or_else(|| {
        let known: Vec<&str> = config.hosts.keys().map(String::as_str).collect();
        let listed = if known.is_empty() {
            "config.toml defines no hosts".to_owned()
        } else {
            format!("config.toml defines {}", known.join(", "))
        };
        Failure::new(
            Code::Usage,
            format!(
                "unknown host `{name}`: {listed}; add a [hosts.{name}] table with command = [\"ssh\", \"{name}\", \"herd\", \"proxy\"]"
            ),
        )
        .into()
    })
}

/// `herd hosts list`.
///
/// # Errors
/// A bad config (exit 2) or a closed stdout.
pub(crate) async fn list(home: &herd_persistence::Home, json: bool) -> anyhow::Result<()> {
    let config = Config::load(home)?;
    let states = daemon_states(home).await;
    if json {
        let hosts: Vec<Listed<'_>> = config
            .hosts
            .iter()
            .map(|(name, host)| {
                let daemon = states.as_ref().and_then(|s| s.get(name)).cloned();
                Listed {
                    name,
                    command: &host.command,
                    install: host.install.as_ref(),
                    status: daemon.as_ref().map(|d| d.status),
                    daemon,
                }
            })
            .collect();
        output::json_line(&ListedHosts { hosts })?;
        return Ok(());
    }
    if config.hosts.is_empty() {
        output::line(
            "no hosts: add [hosts.NAME] tables to config.toml, e.g. command = [\"ssh\", \"build1\", \"herd\", \"proxy\"]",
        )?;
        return Ok(());
    }
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::NOTHING);
    let mut header = vec!["NAME", "COMMAND"];
    if states.is_some() {
        header.push("STATUS");
    }
    table.set_header(header);
    for (name, host) in &config.hosts {
        let mut row = vec![
            name.clone(),
            output::visible(&shell_words::join(&host.command)).into_owned(),
        ];
        if let Some(states) = &states {
            let status = states
                .get(name)
                .and_then(|d| serde_json::to_value(d.status).ok())
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| "-".to_owned());
            row.push(output::visible(&status).into_owned());
        }
        table.add_row(row);
    }
    output::line(table.to_string().trim_end())?;
    Ok(())
}

/// Each host's entry in the running daemon's `hosts` answer; none when no daemon
/// runs or it does not serve `hosts` (the seam for the daemon's connections).
async fn daemon_states(home: &herd_persistence::Home) -> Option<BTreeMap<String, HostState>> {
    let mut client = Client::try_connect(home).await.ok().flatten()?;
    if !client.hello.serves(HOSTS_CAPABILITY) {
        return None;
    }
    let answer = client.ask::<Hosts>(&NoParams {}).await.ok()?;
    Some(
        answer
            .hosts
            .into_iter()
            .map(|state| (state.name.clone(), state))
            .collect(),
    )
}

/// A door that did not open: exit 3, after the JSON answer with `--json`.
fn unreachable(name: &str, err: door::DoorError, json: bool) -> anyhow::Result<()> {
    if json {
        output::json_line(&Unreachable {
            host: name,
            reachable: false,
            error: err.to_string(),
            fix: err.fix().map(ToString::to_string),
        })?;
        return Err(Failure::silent(Code::Unreachable).into());
    }
    Err(err.into_failure())
}

/// The round trips of `pings` `status` calls through `door`, and the last answer.
async fn ping(
    door: &mut door::Door,
    pings: u32,
) -> anyhow::Result<(Vec<Duration>, Option<StatusAnswer>)> {
    let mut samples = Vec::new();
    let mut status = None;
    for _ in 0..pings {
        let sent = Instant::now();
        status = Some(door.ask::<Status>(&NoParams {}).await?);
        samples.push(sent.elapsed());
    }
    Ok((samples, status))
}

/// `herd hosts check NAME`.
///
/// # Errors
/// Exit 2 for an unknown host, 3 when its door does not open (after printing the
/// answer with `--json`).
pub(crate) async fn check(
    home: &herd_persistence::Home,
    name: &str,
    pings: u32,
    json: bool,
) -> anyhow::Result<()> {
    let config = Config::load(home)?;
    let host = configured(&config, name)?;
    let started = Instant::now();
    let mut door = match door::open(name, host, door::HELLO_DEADLINE).await {
        Ok(door) => door,
        Err(err) => return unreachable(name, err, json),
    };
    let handshake = started.elapsed();
    let (mut samples, status) = ping(&mut door, pings).await?;
    // What doctor checks on that side: jobs survive the far daemon's crash only
    // under herd-shim.
    let supervisor = status
        .map(|s| s.supervisor)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    let survives = supervisor == "shim";
    samples.sort();
    let p50 = samples.get(samples.len() / 2).copied().unwrap_or_default();
    let hello = door.hello.clone();
    door.close().await;
    let proxy = hello.proxy.as_ref();
    let ms = |d: Duration| (d.as_secs_f64() * 1_000_000.0).round() / 1_000.0;
    if json {
        output::json_line(&Checked {
            host: name,
            reachable: true,
            local: Versions {
                version: env!("CARGO_PKG_VERSION"),
                protocol: PROTOCOL_VERSION,
            },
            far: Far {
                version: &hello.daemon,
                protocol: hello.protocol,
                proxy_version: proxy.map(|p| p.version.as_str()),
                home: &hello.home,
                user: proxy.and_then(|p| p.user.as_deref()),
                uid: proxy.map(|p| p.uid),
                os: proxy.map(|p| p.os.as_str()),
                arch: proxy.map(|p| p.arch.as_str()),
                glibc: proxy.and_then(|p| p.glibc.as_deref()),
                capabilities: &hello.capabilities,
                supervisor: &supervisor,
                shim: proxy.and_then(|p| p.shim.as_ref()).map(|s| s.path.as_str()),
            },
            crash_survival: survives,
            error: (!survives).then(|| super::install::without_survival(name, &supervisor)),
            handshake_ms: ms(handshake),
            latency_ms: Latency {
                p50: ms(p50),
                pings: samples.len(),
            },
        })?;
        if !survives {
            return Err(Failure::silent(Code::Failed).into());
        }
        return Ok(());
    }
    let user = proxy
        .map(|p| p.user.clone().unwrap_or_else(|| format!("uid {}", p.uid)))
        .unwrap_or_else(|| "unknown".to_owned());
    let lines = [
        format!("host {name}: reachable"),
        format!(
            "  versions   here herd {} (protocol {PROTOCOL_VERSION}), far herd {} (protocol {})",
            env!("CARGO_PKG_VERSION"),
            output::visible(&hello.daemon),
            hello.protocol
        ),
        format!("  far home   {}", output::visible(&hello.home)),
        format!("  far user   {}", output::visible(&user)),
        format!(
            "  round trip {:.1} ms p50 over {} pings (door opened and greeted in {:.0} ms)",
            ms(p50),
            samples.len(),
            ms(handshake)
        ),
    ];
    for line in lines {
        output::line(&line)?;
    }
    if !survives {
        return Err(Failure::new(
            Code::Failed,
            super::install::without_survival(name, &supervisor),
        )
        .into());
    }
    output::line("  far jobs   run under herd-shim: they outlive a far daemon's crash")?;
    Ok(())
}

/// `herd hosts list --json`.
#[derive(Serialize)]
struct ListedHosts<'a> {
    hosts: Vec<Listed<'a>>,
}

/// A configured host, and the running daemon's view of it (`daemon`, and its
/// `status`; null without a daemon that serves `hosts`).
#[derive(Serialize)]
struct Listed<'a> {
    name: &'a str,
    command: &'a [String],
    install: Option<&'a Vec<String>>,
    status: Option<LinkStatus>,
    daemon: Option<HostState>,
}

/// `herd hosts check --json` for a door that did not open.
#[derive(Serialize)]
struct Unreachable<'a> {
    host: &'a str,
    reachable: bool,
    error: String,
    fix: Option<String>,
}

/// `herd hosts check --json`.
#[derive(Serialize)]
struct Checked<'a> {
    host: &'a str,
    reachable: bool,
    local: Versions,
    far: Far<'a>,
    crash_survival: bool,
    error: Option<String>,
    handshake_ms: f64,
    latency_ms: Latency,
}

/// This herd's versions.
#[derive(Serialize)]
struct Versions {
    version: &'static str,
    protocol: u32,
}

/// The far herd as its door's `hello` and `status` describe it.
#[derive(Serialize)]
struct Far<'a> {
    version: &'a str,
    protocol: u32,
    proxy_version: Option<&'a str>,
    home: &'a str,
    user: Option<&'a str>,
    uid: Option<u32>,
    os: Option<&'a str>,
    arch: Option<&'a str>,
    glibc: Option<&'a str>,
    capabilities: &'a [String],
    supervisor: &'a str,
    shim: Option<&'a str>,
}

/// The round trips of the pings.
#[derive(Serialize)]
struct Latency {
    p50: f64,
    pings: usize,
}

#[cfg(test)]
mod tests;
