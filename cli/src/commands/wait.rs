//! `herd wait`: block until a session ends, with a spinner for a person.

use std::io::IsTerminal;
use std::time::Duration;

use herd_persistence::Home;
use herd_protocol::answers::WaitStatus;
use herd_protocol::methods::{Lookup, Wait};
use herd_protocol::params::{IdParams, WaitParams};
use serde_json::Value;

use super::{ending, follow};
use crate::args::WaitArgs;
use crate::client::{Backoff, Client, Gone, answer_of, gone};
use crate::exit::{Code, Failure};
use crate::output;

/// `herd wait`.
pub(crate) async fn wait(home: &Home, args: WaitArgs) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    if args.follow {
        let id = client
            .ask::<Lookup>(&IdParams::new(args.id.as_str()))
            .await?
            .session_id;
        if args.json {
            return follow::finished(home, Some(client), None, &id, true).await;
        }
        let result = follow::one(home, client, &id, 0).await?;
        return follow::finished(home, None, result, &id, false).await;
    }
    if args.ready && !client.hello.serves("spawn.ready") {
        return Err(super::run::old_daemon_for("--ready", &client.hello.daemon));
    }
    let call = wait_through_restarts(home, client, &args.id, args.timeout, args.ready);
    let answer = if std::io::stderr().is_terminal() && !args.json {
        with_spinner(call, &args.id).await?
    } else {
        call.await?
    };
    let typed = answer_of::<Wait>(&answer)?;
    let is_ready = typed.ready_at.is_some();
    let exited = typed.status == WaitStatus::Exited;
    let succeeded = if args.ready {
        is_ready
    } else {
        typed.succeeded()
    };
    if args.json {
        output::json_pretty(&answer)?;
    } else {
        let line = if args.ready && is_ready {
            format!(
                "{} ready at {}",
                output::visible(&typed.session_id),
                output::visible(typed.ready_at.as_deref().unwrap_or_default())
            )
        } else if exited {
            // How it ended, in the words ps uses: `exited 0`, `killed (SIGTERM)`,
            // `killed (time limit 5m, SIGTERM)`.
            ending(&typed)
        } else {
            format!(
                "{} {}",
                output::visible(&typed.session_id),
                output::visible(typed.status.as_str())
            )
        };
        output::line(&line)?;
        if let Some(note) = &typed.note {
            output::line(&output::visible(note))?;
        }
        if let Some(text) = Some(typed.output.as_str()).filter(|t| !t.is_empty()) {
            let text = output::visible_lines(text);
            output::raw(&text)?;
            if !text.ends_with('\n') {
                output::raw("\n")?;
            }
        }
        super::warn_not_kept(typed.bytes_not_kept, &typed.log_path);
    }
    if succeeded {
        Ok(())
    } else if args.ready && exited {
        Err(Failure::silent(Code::NotReady).into())
    } else {
        Err(Failure::silent(Code::Failed).into())
    }
}

/// The `wait` answer for `id`, asked again of the next daemon (with what is left
/// of `timeout`) when this one goes away meanwhile, and of the far host when it
/// does not answer (its door blinked, its daemon restarted): asked again with
/// pauses ([`Backoff`]) until it answers, for up to
/// [`RECONNECT_DEADLINE`](crate::client::RECONNECT_DEADLINE) from the first
/// failure of a blip.
async fn wait_through_restarts(
    home: &Home,
    mut client: Client,
    id: &str,
    timeout: Option<f64>,
    ready: bool,
) -> anyhow::Result<Value> {
    let started = tokio::time::Instant::now();
    // The pace of the tries while the far host does not answer (none while it does).
    let mut far: Option<Backoff> = None;
    loop {
        let left = timeout.map(|t| (t - started.elapsed().as_secs_f64()).max(0.001));
        let asked = tokio::time::Instant::now();
        match client
            .send_typed::<Wait>(&WaitParams {
                id: id.to_owned(),
                timeout_seconds: left,
                ready,
            })
            .await
        {
            Err(err) if crate::client::is_lost(&err) => {
                client = crate::client::reconnect(home).await.map_err(|e| {
                    e.context(format!(
                        "lost the daemon while waiting for {id}, which was running then"
                    ))
                })?;
            }
            Err(err) if gone(&err) == Some(Gone::Host) => {
                // A wait the host served for a while before failing is a new blip.
                if asked.elapsed() >= FAR_SERVED {
                    far = None;
                }
                let pace = far.get_or_insert_with(|| {
                    Backoff::new(
                        asked + crate::client::RECONNECT_DEADLINE,
                        Duration::from_millis(100),
                    )
                });
                tracing::debug!(error = %format!("{err:#}"), "the far host did not answer; asking again");
                if !pace.pause().await {
                    return Err(err.context(format!(
                        "the host of {id} did not answer again within {} s; `herd wait {id}` asks again",
                        crate::client::RECONNECT_DEADLINE.as_secs()
                    )));
                }
            }
            answer => return answer,
        }
    }
}

/// A far wait that failed after this long had been served by the host: its
/// failure starts a new blip's deadline.
const FAR_SERVED: Duration = Duration::from_secs(2);

/// Awaits `call` while drawing a spinner on stderr.
async fn with_spinner<F: std::future::Future<Output = anyhow::Result<Value>>>(
    call: F,
    id: &str,
) -> anyhow::Result<Value> {
    use std::io::Write;
    const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
    let mut tick = tokio::time::interval(Duration::from_millis(120));
    let mut frame = 0usize;
    tokio::pin!(call);
    let result = loop {
        tokio::select! {
            result = &mut call => break result,
            _ = tick.tick() => {
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r{} waiting for {id}", FRAMES[frame % FRAMES.len()]);
                let _ = err.flush();
                frame += 1;
            }
        }
    };
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\x1b[2K");
    let _ = err.flush();
    result
}
