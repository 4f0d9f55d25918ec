//! The daemon feed of `herd top`: the session rows, redrawn when the daemon says
//! they changed, the followed session's output, and the actions keys ask for.
//!
//! Three kinds of connection, each its own task, all sending [`Feed`] messages
//! to the UI loop:
//! - the **watcher** holds `sessions.follow` (capability `sessions.follow`) and
//!   wakes the lister whenever the daemon counts a change (a session started,
//!   finished, changed owner or was forgotten);
//! - the **lister** answers each wake-up with one `list`, at most one every
//!   [`MIN_LIST_GAP`] (wake-ups that come together are one list), and runs the
//!   actions (kill, handoff, restart through `restart::restart`) in order on the
//!   same connection. While a
//!   session runs it also lists once a [`REFRESH`], with the `/proc` sample: the
//!   last line of output is not a change the daemon announces (it would be one
//!   per chunk). A daemon without `sessions.follow` is listed once a [`REFRESH`]
//!   and the title line says so;
//! - the **pane follower** holds `logs.follow` for the selected session from the
//!   last [`PANE_TAIL_BYTES`] of its log, and is replaced when the selection moves;
//!   when the daemon goes away it connects again and starts over from the tail.

use std::time::Duration;

use anyhow::Context;
use herd_persistence::Home;
use herd_protocol::Method;
use herd_protocol::methods as m;
use herd_protocol::params::{FollowParams, HandoffParams, IdParams, ListParams, NoParams};
use serde_json::Value;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::model::Row;
use crate::client::Client;

/// The shortest time between two listings.
pub(crate) const MIN_LIST_GAP: Duration = Duration::from_millis(100);
/// How often running sessions are listed again for their last line.
pub(crate) const REFRESH: Duration = Duration::from_secs(1);
/// How much of the log's end the pane starts with.
pub(crate) const PANE_TAIL_BYTES: u64 = 64 * 1024;

/// What the feed tells the UI.
#[derive(Debug)]
pub(crate) enum Feed {
    /// A fresh listing.
    Rows(Vec<Row>),
    /// What an action did (or why it failed), for the status line.
    Said(String),
    /// A standing note for the title line.
    Note(String),
    /// Output of the followed session.
    Output { session_id: String, text: String },
    /// The followed session's output ended (it finished and all was sent).
    OutputEnd { session_id: String },
    /// The followed session's output starts over from its log's tail (the
    /// follower connected again after the daemon went away): the pane is cleared.
    OutputRestart { session_id: String },
    /// The daemon is gone: `top` ends with this message.
    Lost(String),
}

/// An action a key asked for.
#[derive(Debug)]
pub(crate) enum Action {
    /// Kill the session's tree.
    Kill { session_id: String },
    /// Hand the session from its owner to `to`.
    Handoff {
        session_id: String,
        from: String,
        to: String,
    },
    /// Run it again, as `herd restart` does (in this process's environment).
    Restart { session_id: String },
}

/// Runs the watcher and the lister until the UI is gone.
pub(crate) async fn run(
    home: Home,
    mut client: Client,
    tx: UnboundedSender<Feed>,
    mut actions: UnboundedReceiver<Action>,
) {
    let wake = std::sync::Arc::new(tokio::sync::Notify::new());
    let follows = client.hello.serves("sessions.follow");
    let watcher = if follows {
        Some(tokio::spawn(watch(
            home.clone(),
            std::sync::Arc::clone(&wake),
            tx.clone(),
        )))
    } else {
        let _ = tx.send(Feed::Note(format!(
            "daemon {} has no sessions.follow: listing every second (`herd shutdown` to run the new daemon)",
            client.hello.daemon
        )));
        None
    };
    let mut gap = tokio::time::interval(MIN_LIST_GAP);
    gap.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut refresh = tokio::time::interval(REFRESH);
    refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut any_running = true;
    // The first listing comes from the watcher's first note, or right away.
    let mut due = !follows;
    loop {
        if due {
            gap.tick().await;
            match list(&mut client, &home).await {
                Ok(rows) => {
                    any_running = rows.iter().any(Row::is_running);
                    if tx.send(Feed::Rows(rows)).is_err() {
                        break;
                    }
                }
                // The daemon went away (a crash, a restart): list again from the next.
                Err(err) if crate::client::is_lost(&err) => {
                    let _ = tx.send(Feed::Note(
                        "the daemon went away; connecting again".to_owned(),
                    ));
                    match crate::client::reconnect(&home).await {
                        Ok(next) => {
                            client = next;
                            let _ = tx.send(Feed::Note(String::new()));
                            continue;
                        }
                        Err(err) => {
                            let _ = tx.send(Feed::Lost(format!("{err:#}")));
                            break;
                        }
                    }
                }
                Err(err) => {
                    let _ = tx.send(Feed::Lost(format!("{err:#}")));
                    break;
                }
            }
            due = false;
        }
        tokio::select! {
            () = wake.notified() => due = true,
            _ = refresh.tick() => due = any_running || !follows,
            action = actions.recv() => match action {
                Some(action) => {
                    let said = act(&mut client, action).await;
                    if tx.send(Feed::Said(said)).is_err() {
                        break;
                    }
                }
                None => break,
            },
        }
    }
    if let Some(watcher) = watcher {
        watcher.abort();
    }
}

/// One `list` of every session of every owner, oldest first, then this home's
/// far jobs on every configured host (a host that does not answer within the
/// daemon's listing budget shows its jobs' last known rows).
async fn list(client: &mut Client, home: &Home) -> anyhow::Result<Vec<Row>> {
    let params = ListParams {
        all: true,
        all_hosts: client.hello.serves("hosts") && has_hosts(home),
        ..ListParams::default()
    };
    let answer = client.send_typed::<m::List>(&params).await?;
    let rows = answer
        .get("processes")
        .cloned()
        .unwrap_or(Value::Array(Vec::new()));
    serde_json::from_value(rows).context("the daemon sent a list this herd cannot read")
}

/// Whether this home's config names any host (its far jobs are listed too).
fn has_hosts(home: &Home) -> bool {
    crate::config::Config::load(home).is_ok_and(|config| !config.hosts.is_empty())
}

/// Holds `sessions.follow` and wakes the lister on every note; follows again
/// from the next daemon when this one goes away (the first note of the new
/// stream wakes the lister, which lists what the restart changed).
async fn watch(home: Home, wake: std::sync::Arc<tokio::sync::Notify>, tx: UnboundedSender<Feed>) {
    let lost = |message: String| {
        let _ = tx.send(Feed::Lost(message));
    };
    let mut client = match Client::connect(&home).await {
        Ok(client) => client,
        Err(err) => return lost(format!("{err:#}")),
    };
    loop {
        let params = herd_protocol::to_params(&NoParams {}).unwrap_or_default();
        let gone = match client.send(m::SessionsFollow::NAME, params).await {
            Ok(_) => loop {
                match client.next_note("sessions.follow").await {
                    Ok(Some(message)) if message.method.as_deref() == Some("sessions") => {
                        wake.notify_one();
                    }
                    Ok(Some(message)) => {
                        if let Some(error) = message.error {
                            return lost(format!(
                                "the daemon refused sessions.follow: {}",
                                error.message
                            ));
                        }
                    }
                    Ok(None) => break "the daemon closed the connection".to_owned(),
                    Err(err) if err.kind() == std::io::ErrorKind::TimedOut => {
                        return lost(err.to_string());
                    }
                    Err(err) => break format!("lost the connection to the daemon: {err}"),
                }
            },
            Err(err) => format!("lost the connection to the daemon: {err}"),
        };
        tracing::debug!(gone, "following the sessions again");
        client = match crate::client::reconnect(&home).await {
            Ok(client) => client,
            Err(err) => return lost(format!("{gone}; {err:#}")),
        };
    }
}

/// Runs one action and says what it did.
async fn act(client: &mut Client, action: Action) -> String {
    match action {
        Action::Kill { session_id } => {
            match client
                .ask::<m::Kill>(&IdParams::new(session_id.as_str()))
                .await
            {
                Ok(answer) => {
                    format!(
                        "kill {session_id}: {}",
                        answer.status.as_str().replace('_', " ")
                    )
                }
                Err(err) => format!("kill {session_id} failed: {err:#}"),
            }
        }
        Action::Handoff {
            session_id,
            from,
            to,
        } => {
            let params = HandoffParams {
                id: session_id.clone(),
                from: from.clone(),
                to: Some(to.clone()),
                note: format!("handed off from {from} in herd top"),
            };
            match client.send_typed::<m::Handoff>(&params).await {
                Ok(_) => format!("{session_id} handed off from {from} to {to}"),
                Err(err) => format!("handoff of {session_id} failed: {err:#}"),
            }
        }
        Action::Restart { session_id } => {
            let restarted = crate::restart::restart(client, &session_id)
                .await
                .and_then(crate::client::answer_of::<m::Restart>);
            match restarted {
                Ok(info) => format!("restarted {session_id} as {}", info.session_id),
                Err(err) => format!("restart {session_id} failed: {err:#}"),
            }
        }
    }
}

/// Follows one session's output into the pane until it ends. When the daemon
/// goes away (a crash, a restart) it connects again and follows anew from the
/// log's tail, the pane started over ([`Feed::OutputRestart`]), so the pane
/// resumes without the selection having to move.
pub(crate) async fn follow(home: Home, session_id: String, tx: UnboundedSender<Feed>) {
    let said = |message: String| {
        let _ = tx.send(Feed::Said(message));
    };
    let mut client = match Client::connect(&home).await {
        Ok(client) => client,
        Err(err) => return said(format!("cannot follow {session_id}: {err:#}")),
    };
    // The pace of the tries while a far job's host does not answer.
    let mut far: Option<crate::client::Backoff> = None;
    loop {
        let started = tokio::time::Instant::now();
        let followed = follow_once(&mut client, &session_id, &tx).await;
        if started.elapsed() >= Duration::from_secs(2) {
            // It was followed a while: a later blip has a deadline of its own.
            far = None;
        }
        match followed {
            Followed::UiGone => return,
            Followed::Ended => break,
            Followed::Refused(why) => {
                said(format!("cannot follow {session_id}: {why}"));
                break;
            }
            Followed::HostLost(why) => {
                // A far job's host blinked: asked again, with pauses, until it answers.
                let pace = far.get_or_insert_with(|| {
                    crate::client::Backoff::new(
                        tokio::time::Instant::now() + crate::client::RECONNECT_DEADLINE,
                        Duration::from_millis(100),
                    )
                });
                if !pace.pause().await {
                    said(format!("lost {session_id}'s output: {why}"));
                    break;
                }
                let restart = Feed::OutputRestart {
                    session_id: session_id.clone(),
                };
                if tx.send(restart).is_err() {
                    return;
                }
            }
            Followed::Lost => {
                client = match crate::client::reconnect(&home).await {
                    Ok(client) => client,
                    Err(err) => {
                        said(format!("lost {session_id}'s output: {err:#}"));
                        break;
                    }
                };
                let restart = Feed::OutputRestart {
                    session_id: session_id.clone(),
                };
                if tx.send(restart).is_err() {
                    return;
                }
            }
        }
    }
    let _ = tx.send(Feed::OutputEnd { session_id });
}

/// How one `logs.follow` of the pane ended.
enum Followed {
    /// The session ended and all of its output was sent.
    Ended,
    /// The daemon refused (the session is unknown).
    Refused(String),
    /// The connection broke: the daemon went away.
    Lost,
    /// A far job's host did not answer (its door blinked, its daemon restarted).
    HostLost(String),
    /// Nobody reads the feed any more.
    UiGone,
}

/// Follows the session from the last [`PANE_TAIL_BYTES`] of its log, on `client`.
async fn follow_once(
    client: &mut Client,
    session_id: &str,
    tx: &UnboundedSender<Feed>,
) -> Followed {
    // The log's end now (a read far past it answers where it ends), then its tail.
    let end = match client.log_end(session_id).await {
        Ok(end) => end,
        Err(err) if crate::client::is_lost(&err) => return Followed::Lost,
        Err(err) if crate::client::gone(&err) == Some(crate::client::Gone::Host) => {
            return Followed::HostLost(format!("{err:#}"));
        }
        Err(err) => return Followed::Refused(format!("{err:#}")),
    };
    let from_byte = end.saturating_sub(PANE_TAIL_BYTES);
    let params = herd_protocol::to_params(&FollowParams::new(session_id, from_byte));
    let Ok(request) = client
        .send(m::LogsFollow::NAME, params.unwrap_or_default())
        .await
    else {
        return Followed::Lost;
    };
    loop {
        match client.next_message().await {
            Ok(Some(message)) if message.method.as_deref() == Some("log") => {
                let text = message
                    .params
                    .as_ref()
                    .and_then(|p| p.get("output"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let out = Feed::Output {
                    session_id: session_id.to_owned(),
                    text,
                };
                if tx.send(out).is_err() {
                    return Followed::UiGone;
                }
            }
            Ok(Some(message)) if message.id == request => {
                return match message.error {
                    Some(error) if error.code == crate::protocol::HOST_UNREACHABLE => {
                        Followed::HostLost(error.message)
                    }
                    Some(error) => Followed::Refused(error.message),
                    None => Followed::Ended,
                };
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return Followed::Lost,
        }
    }
}
