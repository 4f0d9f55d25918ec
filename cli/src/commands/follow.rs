//! Following output as it comes: `logs -f`, `wait -f`, `run --wait`, and several
//! sessions at once (`logs -f ID ID...`, `logs -f --all`), interleaved line by line
//! after each session's label.

use std::io::IsTerminal;

use herd_protocol::answers::SessionStatus;
use herd_protocol::methods::{List, Lookup, Wait};
use herd_protocol::params::{IdParams, ListParams, ListState, WaitParams};
use serde_json::Value;
use tokio::sync::mpsc;

use super::{ending, print_last_lines};
use crate::args::LogsArgs;
use crate::client::{Client, answer_of};
use crate::exit::{Code, Failure};
use crate::output;
use herd_persistence::Home;

/// A partial line longer than this is printed without waiting for its end.
const MAX_HELD_LINE_BYTES: usize = 64 * 1024;

/// The colours labels cycle through (ANSI SGR codes: cyan, yellow, green,
/// magenta, blue, red).
const LABEL_COLOURS: [&str; 6] = ["36", "33", "32", "35", "34", "31"];

/// `herd logs --follow`: one session as `tail -f` does, several interleaved.
pub(crate) async fn logs(home: &Home, mut client: Client, args: &LogsArgs) -> anyhow::Result<()> {
    // The daemon may go away before the stream starts, too: it is looked up again
    // on the next daemon, as a stream rides through a restart.
    let mut tries = 0;
    let sessions = loop {
        match resolve(&mut client, args).await {
            Err(err) if crate::client::is_lost(&err) && tries < 3 => {
                tries += 1;
                tracing::debug!(error = %format!("{err:#}"), "the daemon went away; reconnecting");
                client = crate::client::reconnect(home).await?;
            }
            other => break other?,
        }
    };
    if let ([(id, _)], false) = (sessions.as_slice(), args.all) {
        let from_byte = match args.limit {
            Some(n) => print_last_lines(&mut client, id, n).await?,
            None => 0,
        };
        let result = one(home, client, id, from_byte).await?;
        return finished(home, None, result, id, args.json).await;
    }
    if sessions.is_empty() {
        output::err_line("no running sessions to follow (see `herd ps --all`)");
        return Ok(());
    }
    many(home, client, &sessions, args.limit, args.json).await
}

/// The sessions to follow, as `(id, label)`: the ids given (looked up, so a
/// prefix or a name works), or with --all the owner's running sessions.
async fn resolve(client: &mut Client, args: &LogsArgs) -> anyhow::Result<Vec<(String, String)>> {
    let mut found: Vec<(String, String)> = Vec::new();
    if args.all {
        let owner = args.owner.resolve("cli");
        let listed = client
            .ask::<List>(&ListParams::by_owner(Some(owner)))
            .await?;
        for row in &listed.processes {
            if row.status == SessionStatus::Running {
                found.push((
                    row.session_id.clone(),
                    label(&row.session_id, row.name.as_deref()),
                ));
            }
        }
        return Ok(found);
    }
    for wanted in &args.ids {
        let id = client
            .ask::<Lookup>(&IdParams::new(wanted.as_str()))
            .await?
            .session_id;
        if !found.iter().any(|(known, _)| *known == id) {
            found.push((id, String::new()));
        }
    }
    // Names, for the labels: one listing of every session.
    let every = ListParams {
        state: Some(ListState::All),
        ..ListParams::default()
    };
    let rows = client.ask::<List>(&every).await?.processes;
    for (id, shown) in &mut found {
        let name = rows
            .iter()
            .find(|row| row.session_id == *id)
            .and_then(|row| row.name.as_deref());
        *shown = label(id, name);
    }
    Ok(found)
}

/// A session's label: its name, else its id without `proc_`, cut to 8.
fn label(id: &str, name: Option<&str>) -> String {
    match name.filter(|n| !n.is_empty()) {
        Some(name) => output::visible(name).into_owned(),
        None => {
            let hex = id.rsplit('_').next().unwrap_or(id);
            hex.chars().take(8).collect()
        }
    }
}

/// Prints one session's log stream from `from_byte` until the session exits,
/// through daemon restarts ([`super::resume`]); the session's result when the
/// daemon sends it with the stream's end. The stream takes the connection
/// over, so the client is used up.
pub(crate) async fn one(
    home: &Home,
    client: Client,
    id: &str,
    from_byte: u64,
) -> anyhow::Result<Option<Value>> {
    // The frames pass through `emit` (not straight to stdout): the resume after a
    // daemon restart counts what was printed to go on from there.
    super::resume::stream(home, client, id, from_byte, output::raw).await
}

/// After a follow: says how the job ended (stderr, or the wait answer as JSON),
/// and fails with exit code 1 unless it exited 0. `result` is what the stream's
/// end carried; without it, the session is waited for on `client`, or on a new
/// connection when the stream used the last one up.
pub(crate) async fn finished(
    home: &Home,
    client: Option<Client>,
    result: Option<Value>,
    id: &str,
    json: bool,
) -> anyhow::Result<()> {
    let answer = match (result, client) {
        (Some(result), _) => result,
        (None, Some(mut client)) => ended(home, &mut client, id).await?,
        (None, None) => ended(home, &mut Client::connect(home).await?, id).await?,
    };
    let typed = answer_of::<Wait>(&answer)?;
    if json {
        output::json_pretty(&answer)?;
    } else {
        output::err_line(&ending(&typed));
    }
    if typed.succeeded() {
        Ok(())
    } else {
        Err(Failure::silent(Code::Failed).into())
    }
}

/// The wait answer of a session that has ended, asked again of the next
/// daemon when this one goes away meanwhile.
pub(crate) async fn ended(home: &Home, client: &mut Client, id: &str) -> anyhow::Result<Value> {
    loop {
        let until_it_ends = WaitParams {
            id: id.to_owned(),
            timeout_seconds: None,
            ready: false,
        };
        // Without a timeout the daemon answers once the session has ended.
        match client.send_typed::<Wait>(&until_it_ends).await {
            Ok(answer) => {
                answer_of::<Wait>(&answer)?;
                return Ok(answer);
            }
            Err(err) if crate::client::is_lost(&err) => {
                *client = crate::client::reconnect(home).await.map_err(|e| {
                    e.context(format!(
                        "lost the daemon while waiting for {id}, which was running then"
                    ))
                })?;
            }
            Err(err) => return Err(err),
        }
    }
}

/// What a follower task tells the printer.
enum Piece {
    /// Output of session `index`.
    Text(usize, String),
    /// Session `index`'s stream ended, with the result it carried (`Err`: it
    /// broke, with the reason).
    End(usize, Result<Option<Value>, String>),
}

/// Follows several sessions at once, one connection each, and prints their lines
/// interleaved as they complete, each after the session's label; each session's
/// ending goes to stderr as it comes. Exit 0 when every one exited 0.
async fn many(
    home: &Home,
    mut client: Client,
    sessions: &[(String, String)],
    tail: Option<u64>,
    json: bool,
) -> anyhow::Result<()> {
    let prefixes = label_prefixes(sessions);
    let (tx, mut rx) = mpsc::channel::<Piece>(256);
    for (index, (id, _)) in sessions.iter().enumerate() {
        let mut follower = Client::connect(home).await?;
        let from_byte = match tail {
            Some(n) => {
                let (text, from) = super::last_lines(&mut follower, id, n).await?;
                if !text.is_empty() {
                    tx.send(Piece::Text(index, text)).await.ok();
                }
                from
            }
            None => 0,
        };
        let tx = tx.clone();
        let id = id.clone();
        let home = home.clone();
        tokio::spawn(async move {
            let sender = tx.clone();
            let result = super::resume::stream(&home, follower, &id, from_byte, move |text| {
                // The printer is gone only when herd is ending; nothing to keep.
                sender.try_send(Piece::Text(index, text.to_owned())).ok();
                Ok(())
            })
            .await;
            tx.send(Piece::End(index, result.map_err(|e| format!("{e:#}"))))
                .await
                .ok();
        });
    }
    drop(tx);
    let mut held: Vec<String> = vec![String::new(); sessions.len()];
    let mut all_zero = true;
    while let Some(piece) = rx.recv().await {
        match piece {
            Piece::Text(index, text) => {
                let buffer = &mut held[index];
                buffer.push_str(&text);
                let cut = match buffer.rfind('\n') {
                    Some(at) => at + 1,
                    None if buffer.len() > MAX_HELD_LINE_BYTES => buffer.len(),
                    None => continue,
                };
                let ready: String = buffer.drain(..cut).collect();
                output::raw(&prefixed(&prefixes[index], &ready))?;
            }
            Piece::End(index, result) => {
                let rest = std::mem::take(&mut held[index]);
                if !rest.is_empty() {
                    output::raw(&prefixed(&prefixes[index], &rest))?;
                }
                let id = &sessions[index].0;
                let result = match result {
                    Ok(result) => result,
                    Err(reason) => {
                        output::err_line(&format!("{id}: {reason}"));
                        all_zero = false;
                        continue;
                    }
                };
                let answer = match result {
                    Some(answer) => answer,
                    None => ended(home, &mut client, id).await?,
                };
                let typed = answer_of::<Wait>(&answer)?;
                all_zero &= typed.succeeded();
                if json {
                    output::json_line(&answer)?;
                } else {
                    output::err_line(&ending(&typed));
                }
            }
        }
    }
    if all_zero {
        Ok(())
    } else {
        Err(Failure::silent(Code::Failed).into())
    }
}

/// Each session's label padded to the widest, then ` | `, coloured on a terminal
/// (unless `NO_COLOR`).
fn label_prefixes(sessions: &[(String, String)]) -> Vec<String> {
    let colour = std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let width = sessions
        .iter()
        .map(|(_, l)| l.chars().count())
        .max()
        .unwrap_or(0);
    sessions
        .iter()
        .enumerate()
        .map(|(i, (_, l))| {
            let padded = format!("{l:<width$} | ");
            if colour {
                format!(
                    "\x1b[{}m{padded}\x1b[0m",
                    LABEL_COLOURS[i % LABEL_COLOURS.len()]
                )
            } else {
                padded
            }
        })
        .collect()
}

/// `text` with `prefix` before every line, each ended by a newline.
fn prefixed(prefix: &str, text: &str) -> String {
    let mut out = String::with_capacity(text.len() + prefix.len() * 4);
    for line in text.split_inclusive('\n') {
        out.push_str(prefix);
        out.push_str(line);
        if !line.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{label, prefixed};

    #[test]
    fn every_line_gets_the_prefix_and_an_end() {
        assert_eq!(prefixed("web | ", "a\nb\n"), "web | a\nweb | b\n");
        assert_eq!(prefixed("w | ", "partial"), "w | partial\n");
    }

    #[test]
    fn a_label_is_the_name_else_the_short_id() {
        assert_eq!(label("proc_0123456789ab", Some("web")), "web");
        assert_eq!(label("proc_0123456789ab", None), "01234567");
        assert_eq!(label("build1:proc_0123456789ab", None), "01234567");
    }
}
