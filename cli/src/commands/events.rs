//! `herd events`: the owner's notifications, taken once or followed.

use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;
use std::time::Duration;

use herd_persistence::Home;
use herd_protocol::Method;
use herd_protocol::answers::CompletionReason;
use herd_protocol::events::{DrainAnswer, Event, EventEnvelope};
use herd_protocol::methods::{Drain, DrainAck, DrainRelease, EventsAck, EventsFollow, List};
use herd_protocol::params::{
    AckParams, DrainParams, EventsParams, LeaseParams, ListParams, ListState,
};
use serde_json::Value;

use super::{Ended, ending, truncate};
use crate::args::EventsArgs;
use crate::client::{CallError, Client, params_of, read_part};
use crate::exit::{Code, Failure};
use crate::output;

/// `herd events`.
pub(crate) async fn events(home: &Home, args: EventsArgs) -> anyhow::Result<()> {
    let owner = args.owner.resolve("cli");
    let style = EventStyle::new(&args);
    let mut names = Names::new(home, &owner, style.human);
    let mut client = Client::connect(home).await?;
    if !args.follow {
        // Taken as a lease, acknowledged only once printed (or given back for
        // --peek): a write to a closed pipe loses nothing.
        let leased = client.hello.serves("drain.lease");
        if args.peek && !leased {
            return Err(Failure::new(
                Code::Failed,
                "this daemon cannot show notifications without taking them (it predates drain leases); \
                 restart it with `herd shutdown --keep-jobs`",
            )
            .into());
        }
        let answer = client
            .send_typed::<Drain>(&DrainParams {
                owner: owner.clone(),
                lease: leased,
                answered: Vec::new(),
            })
            .await?;
        let DrainAnswer { events, lease, .. } = drained(answer)?;
        for event in &events {
            let name = names.of(event).await;
            print_event(event, name.as_deref(), &style)?;
        }
        let Some(lease) = lease else {
            return Ok(());
        };
        if args.peek {
            client
                .send_typed::<DrainRelease>(&LeaseParams { lease })
                .await?;
        } else if client.hello.serves("events.ack") {
            let ids = event_ids(&events)?;
            acknowledge(home, client, &owner, &ids).await?;
        } else {
            client
                .send_typed::<DrainAck>(&LeaseParams { lease })
                .await?;
        }
        return Ok(());
    }
    if client.hello.serves("drain.lease") && client.hello.serves("events.ack") {
        return follow_acked(home, client, &owner, &style, &mut names).await;
    }
    let request = client
        .send(
            EventsFollow::NAME,
            params_of(&EventsParams {
                owner: owner.clone(),
                peek: false,
            })?,
        )
        .await
        .map_err(|e| CallError::Io(e).into_anyhow())?;
    loop {
        let Some(message) = client
            .next_message()
            .await
            .map_err(|e| CallError::Io(e).into_anyhow())?
        else {
            return Ok(());
        };
        if message.method.as_deref() == Some("event") {
            let event = Received::read(EventsFollow::NAME, message.params.unwrap_or(Value::Null))?;
            let name = names.of(&event).await;
            print_event(&event, name.as_deref(), &style)?;
        } else if message.id == request
            && let Some(error) = message.error
        {
            return Err(crate::client::rpc_failure(error));
        }
    }
}

/// `herd events --follow` as `herd events` takes them, again and again: the
/// stream (`events.follow` with `peek`) only says when something waits; each
/// batch is then taken as a lease, printed, and acknowledged by id once
/// printed. When the daemon goes away the follow connects again and carries
/// on: what was printed was acknowledged (on the next daemon if need be), and
/// what was not printed is still queued, so nothing is lost or printed twice.
async fn follow_acked(
    home: &Home,
    mut watcher: Client,
    owner: &str,
    style: &EventStyle,
    names: &mut Names<'_>,
) -> anyhow::Result<()> {
    loop {
        let request = watcher
            .send(
                EventsFollow::NAME,
                params_of(&EventsParams {
                    owner: owner.to_owned(),
                    peek: true,
                })?,
            )
            .await
            .map_err(|e| CallError::Io(e).into_anyhow());
        let ended = match request {
            Ok(request) => loop {
                match watcher.next_note("events.follow").await {
                    Ok(Some(message)) if message.method.as_deref() == Some("pending") => {
                        take_batch(home, owner, style, names).await?;
                    }
                    Ok(Some(message)) if message.id == request => {
                        if let Some(error) = message.error {
                            return Err(crate::client::rpc_failure(error));
                        }
                        break crate::client::lost("the daemon ended the event stream");
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break crate::client::lost("the daemon closed the event stream"),
                    Err(err) => break CallError::Io(err).into_anyhow(),
                }
            },
            Err(err) => err,
        };
        if !crate::client::is_lost(&ended) {
            return Err(ended);
        }
        tracing::debug!(error = %format!("{ended:#}"), "the daemon went away; following again");
        watcher = crate::client::reconnect(home).await?;
    }
}

/// Takes what waits for `owner` as a lease, prints it and acknowledges it by id
/// (the next daemon takes the acknowledgement should this one go meanwhile). A
/// daemon that went away before the batch was taken leaves it queued: the
/// follow's next connection is told it waits.
async fn take_batch(
    home: &Home,
    owner: &str,
    style: &EventStyle,
    names: &mut Names<'_>,
) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    let drain = DrainParams {
        owner: owner.to_owned(),
        lease: true,
        answered: Vec::new(),
    };
    let answer = match client.send_typed::<Drain>(&drain).await {
        Ok(answer) => answer,
        Err(err) if crate::client::is_lost(&err) => return Ok(()),
        Err(err) => return Err(err),
    };
    let events = drained(answer)?.events;
    for event in &events {
        let name = names.of(event).await;
        print_event(event, name.as_deref(), style)?;
    }
    let ids = event_ids(&events)?;
    if ids.is_empty() {
        return Ok(());
    }
    acknowledge(home, client, owner, &ids).await
}

/// An event as the daemon sent it, read: `--json` prints it unchanged (the keys in
/// their order, as always), a person reads it from its envelope and, for a type
/// herd-protocol knows, the event itself. An event type a later daemon adds is
/// printed from its envelope, as any other: never an error.
struct Received {
    /// As the daemon sent it.
    raw: Value,
    /// What every event carries.
    envelope: EventEnvelope,
    /// The event, when herd-protocol knows its type.
    known: Option<Event>,
}

impl Received {
    /// `raw`, an event of `method`'s (`drain`'s answer or an `events.follow` note).
    ///
    /// # Errors
    /// An event without its `type`, or of a type herd-protocol knows that does not
    /// read as that event: the error names the method, the type and the field.
    fn read(method: &'static str, raw: Value) -> anyhow::Result<Received> {
        let envelope: EventEnvelope = read_part(method, "an event's ", &raw)?;
        let known = if Event::knows(&envelope.kind) {
            let part = format!("a `{}` event's ", envelope.kind);
            Some(read_part::<Event>(method, &part, &raw)?)
        } else {
            None
        };
        Ok(Received {
            raw,
            envelope,
            known,
        })
    }
}

/// `drain`'s answer as herd-protocol's type, each event read as [`Received`].
fn drained(answer: Value) -> anyhow::Result<DrainAnswer<Received>> {
    let DrainAnswer {
        events,
        rendered,
        lease,
    } = read_part::<DrainAnswer<Value>>(Drain::NAME, "", &answer)?;
    let events = events
        .into_iter()
        .map(|raw| Received::read(Drain::NAME, raw))
        .collect::<anyhow::Result<_>>()?;
    Ok(DrainAnswer {
        events,
        rendered,
        lease,
    })
}

/// The `event_id` of each event, which `events.ack` names it by: an event without
/// one is an error (it could never be acknowledged), not left out.
fn event_ids(events: &[Received]) -> anyhow::Result<Vec<&str>> {
    events
        .iter()
        .map(|e| {
            e.envelope.event_id.as_deref().ok_or_else(|| {
                anyhow::anyhow!(
                    "the daemon sent an event without its event_id, which events.ack needs: {}",
                    e.raw
                )
            })
        })
        .collect()
}

/// How long `herd events` keeps trying to acknowledge what it printed when its
/// daemon went away meanwhile (a new one is started, as for any command).
const ACK_DEADLINE: Duration = Duration::from_secs(30);

/// Acknowledges the printed events by id. When the daemon died between the print
/// and the acknowledgement, the next daemon (started if none runs) takes it: the
/// completions it would replay from the ledger are marked delivered there, so a
/// printed completion is never printed again by a later `herd events`.
async fn acknowledge(home: &Home, client: Client, owner: &str, ids: &[&str]) -> anyhow::Result<()> {
    let params = params_of(&AckParams {
        owner: owner.to_owned(),
        ids: ids.iter().map(|id| (*id).to_owned()).collect(),
    })?;
    let deadline = tokio::time::Instant::now() + ACK_DEADLINE;
    let mut client = Some(client);
    let mut last: Option<anyhow::Error> = None;
    loop {
        if tokio::time::Instant::now() >= deadline {
            let why = last.map_or_else(String::new, |e| format!(": {e:#}"));
            return Err(Failure::new(
                Code::Unreachable,
                format!(
                    "printed {} events but could not acknowledge them within {}s{why}; \
                     the next `herd events` may print the completions among them again \
                     (each line carries its `event_id`)",
                    ids.len(),
                    ACK_DEADLINE.as_secs()
                ),
            )
            .into());
        }
        let mut current = match client.take() {
            Some(c) => c,
            None => match tokio::time::timeout_at(deadline, Client::connect(home)).await {
                Ok(Ok(c)) => c,
                Ok(Err(err)) => {
                    last = Some(err);
                    retry_pause().await;
                    continue;
                }
                Err(_) => continue,
            },
        };
        if !current.hello.serves("events.ack") {
            return Err(Failure::new(
                Code::Unreachable,
                "printed events, but the daemon now running cannot acknowledge them by id \
                 (it predates events.ack); the next `herd events` may print them again",
            )
            .into());
        }
        match tokio::time::timeout_at(deadline, current.call(EventsAck::NAME, params.clone())).await
        {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(CallError::Io(err))) => {
                tracing::debug!(%err, "the daemon went away before the acknowledgement; reconnecting");
                last = Some(err.into());
            }
            Ok(Err(CallError::Rpc(err))) => return Err(crate::client::rpc_failure(err)),
            Err(_) => {}
        }
    }
}

/// The pause between two tries to reach a daemon for an acknowledgement.
#[expect(
    clippy::disallowed_methods,
    reason = "a back-off between reconnects, not a synchronisation"
)]
async fn retry_pause() {
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// How `herd events` prints: JSON lines, or one line for a person, in colour or not.
#[derive(Debug, Clone, Copy)]
struct EventStyle {
    human: bool,
    color: bool,
}

impl EventStyle {
    fn new(args: &EventsArgs) -> EventStyle {
        let terminal = std::io::stdout().is_terminal();
        let color = match args.color {
            crate::args::ColorChoice::Always => true,
            crate::args::ColorChoice::Never => false,
            crate::args::ColorChoice::Auto => {
                terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        };
        EventStyle {
            human: terminal && !args.json,
            color,
        }
    }
}

/// The names of the owner's sessions, for the lines a person reads: listed on a
/// connection of their own (the first may be holding a stream) when an event
/// names a session not seen yet.
struct Names<'a> {
    home: &'a Home,
    owner: &'a str,
    /// Off for JSON lines, which carry ids only, as the daemon sent them.
    wanted: bool,
    client: Option<Client>,
    known: HashMap<String, String>,
    /// Sessions listed and found without a name.
    unnamed: HashSet<String>,
}

impl<'a> Names<'a> {
    fn new(home: &'a Home, owner: &'a str, wanted: bool) -> Names<'a> {
        Names {
            home,
            owner,
            wanted,
            client: None,
            known: HashMap::new(),
            unnamed: HashSet::new(),
        }
    }

    /// The name of the session `event` is about, if it has one. A name that
    /// cannot be learned (the daemon went away) is simply not shown.
    async fn of(&mut self, event: &Received) -> Option<String> {
        let id = event.envelope.session_id.as_deref()?;
        if !self.wanted || self.unnamed.contains(id) {
            return None;
        }
        if let Some(name) = self.known.get(id) {
            return Some(name.clone());
        }
        if self.client.is_none() {
            self.client = Client::connect(self.home).await.ok();
        }
        let client = self.client.as_mut()?;
        let params = ListParams {
            owner: Some(self.owner.to_owned()),
            all: true,
            state: client.hello.serves("list.filter").then_some(ListState::All),
            ..ListParams::default()
        };
        let rows = client.ask::<List>(&params).await.ok()?;
        for row in rows.processes {
            if let Some(name) = row.name {
                self.known.insert(row.session_id, name);
            }
        }
        let name = self.known.get(id).cloned();
        if name.is_none() {
            self.unnamed.insert(id.to_owned());
        }
        name
    }
}

/// One event: a JSON line, or for a person `HH:MM:SS proc_… [name] what  command —
/// first line`.
fn print_event(event: &Received, name: Option<&str>, style: &EventStyle) -> std::io::Result<()> {
    if !style.human {
        return output::json_line(&event.raw);
    }
    let paint = |code: &str, text: &str| {
        if style.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    };
    let envelope = &event.envelope;
    let id = output::visible(envelope.session_id.as_deref().unwrap_or("herd")).into_owned();
    let (what, colour) = match &event.known {
        Some(Event::Completion {
            about,
            exit_code,
            signal,
            completion_reason,
            termination_source,
            leftovers,
            ..
        }) => {
            let how = ending(Ended {
                session_id: &about.session_id,
                // An event has no status: shown when nothing else says how it ended.
                status: "unknown",
                completion_reason: Some(*completion_reason),
                exit_code: *exit_code,
                signal: *signal,
                termination_source: termination_source.as_deref(),
                time_limit_seconds: None,
                n_leftovers: leftovers.len(),
            })
            .split_once(' ')
            .map(|(_, how)| how.to_owned())
            .unwrap_or_default();
            let ok = *exit_code == Some(0) && *completion_reason == CompletionReason::Exited;
            (how, if ok { "32" } else { "31" })
        }
        Some(Event::Heartbeat { elapsed, seq, .. }) => {
            (format!("still running ({elapsed}s, beat {seq})"), "36")
        }
        Some(Event::WatchMatch { pattern, .. }) => {
            (format!("matched {:?}", output::visible(pattern)), "33")
        }
        // Any other type, known or a later daemon's, by its name.
        _ => (output::visible(&envelope.kind).into_owned(), "35"),
    };
    let time = clock_now();
    let command = truncate(envelope.command.as_deref().unwrap_or_default(), 40);
    let first = envelope
        .output
        .as_deref()
        .or(envelope.message.as_deref())
        .and_then(|o| o.lines().find(|l| !l.trim().is_empty()))
        .map(|l| truncate(l, 60))
        .unwrap_or_default();
    let mut line = match name {
        Some(name) => format!(
            "{time} {id} {} {}",
            output::visible(name),
            paint(colour, &what)
        ),
        None => format!("{time} {id} {}", paint(colour, &what)),
    };
    if !command.is_empty() {
        line.push_str(&format!("  {command}"));
    }
    if !first.is_empty() {
        line.push_str(&format!(" — {first}"));
    }
    output::line(&line)
}

/// The wall-clock time as `HH:MM:SS` (UTC, as the rest of herd's times).
fn clock_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let day = secs % 86_400;
    format!("{:02}:{:02}:{:02}", day / 3600, day % 3600 / 60, day % 60)
}

#[cfg(test)]
mod tests;
