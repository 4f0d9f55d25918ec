//! `herd logs`: a page of a log, or all of it (`--follow` is `follow`'s); and the
//! last lines of a log, where following starts.

use herd_persistence::Home;
use herd_protocol::answers::PollAnswer;
use herd_protocol::methods::{Log, LogChunk, LogsDump, Lookup, Poll};
use herd_protocol::params::{FollowParams, IdParams, LogParams};
use serde::Serialize;

use super::follow;
use crate::args::LogsArgs;
use crate::client::{Client, answer_of};
use crate::exit::{Code, Failure};
use crate::output;
use crate::protocol::METHOD_NOT_FOUND;

/// `herd logs`.
pub(crate) async fn logs(home: &Home, args: LogsArgs) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    if !args.follow && (args.offset.is_some() || args.limit.is_some()) {
        let [single] = args.ids.as_slice() else {
            return Err(Failure::new(
                Code::Usage,
                "--offset and --limit page one session's log: give one id (several need --follow)",
            )
            .into());
        };
        let answer = client
            .send_typed::<Log>(&LogParams {
                id: single.clone(),
                offset: args.offset,
                limit: args.limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX)),
            })
            .await?;
        if args.json {
            return Ok(output::json_pretty(&answer)?);
        }
        let answer = answer_of::<Log>(&answer)?;
        let text = answer.output.as_str();
        output::raw(text)?;
        if !text.is_empty() && !text.ends_with('\n') {
            output::raw("\n")?;
        }
        if let Some(note) = &answer.note {
            output::err_line(&format!("note: {note}"));
        }
        return Ok(());
    }
    if args.follow {
        return follow::logs(home, client, &args).await;
    }
    let [single] = args.ids.as_slice() else {
        return Err(Failure::new(
            Code::Usage,
            "several ids (or --all) need --follow: `herd logs -f ID ID...` interleaves them",
        )
        .into());
    };
    let id = client
        .ask::<Lookup>(&IdParams::new(single.as_str()))
        .await?
        .session_id;
    if !args.json {
        // What `emit` prints goes to stdout unchanged: frames may go there
        // without passing through this process.
        client.frames_to_stdout();
    }
    let mut whole = String::new();
    let mut emit = |text: &str| {
        if args.json {
            whole.push_str(text);
            Ok(())
        } else {
            output::raw(text)
        }
    };
    let from_byte = read_whole(home, client, &id, &mut emit).await?;
    let poll = kept_of(home, &id).await;
    if args.json {
        output::json_pretty(&WholeLog {
            bytes_not_kept: poll.as_ref().map(|p| p.bytes_not_kept).filter(|n| *n > 0),
            next_byte: from_byte,
            output: &whole,
            session_id: &id,
        })?;
    } else {
        if let Some(poll) = &poll {
            super::warn_not_kept(poll.bytes_not_kept, &poll.log_path);
        }
    }
    Ok(())
}

/// Reads session `id`'s whole log through `emit`: one framed stream from the start
/// where the daemon serves `logs.frames`, else chunk by chunk, with the rest as one
/// stream once a chunk shows the log is long. Returns the offset it reached.
async fn read_whole(
    home: &Home,
    mut client: Client,
    id: &str,
    emit: &mut impl FnMut(&str) -> std::io::Result<()>,
) -> anyhow::Result<u64> {
    let mut from_byte = 0u64;
    let mut can_dump = client.hello.serves("logs.dump");
    // With binary frames (capability `logs.frames`) the whole log is one stream
    // from its start, read out on every core: no first chunk.
    let mut done = false;
    if can_dump && client.hello.serves(crate::logframes::CAPABILITY) {
        match dump(&mut client, id, 0, emit).await? {
            Some(end) => {
                from_byte = end;
                done = true;
            }
            None => {
                can_dump = false;
                client = Client::connect(home).await?;
            }
        }
    }
    if !done {
        loop {
            let chunk = client
                .ask::<LogChunk>(&FollowParams::new(id, from_byte))
                .await?;
            let (text, next) = (chunk.output.as_str(), chunk.next_byte);
            emit(text)?;
            if next <= from_byte {
                break;
            }
            let long = next - from_byte >= DUMP_AFTER_BYTES;
            from_byte = next;
            // A long log: the rest comes as one stream, with no round trip per chunk.
            if long && can_dump {
                match dump(&mut client, id, from_byte, emit).await? {
                    Some(end) => {
                        from_byte = end;
                        break;
                    }
                    // A far herd without `logs.dump`: chunk by chunk, on a new
                    // connection (the refused stream ended this one).
                    None => {
                        can_dump = false;
                        client = Client::connect(home).await?;
                    }
                }
            }
        }
    }
    Ok(from_byte)
}

/// What `herd logs --json` prints of a whole log (fields in the order the JSON
/// object printed before had them).
#[derive(Serialize)]
struct WholeLog<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_not_kept: Option<u64>,
    next_byte: u64,
    output: &'a str,
    session_id: &'a str,
}

/// The session's poll answer, for whether the log kept every byte (a full disk, or
/// its cap): asked on a fresh connection, since a dump stream uses its connection
/// up; none when it cannot be asked (a best-effort warning, never a failure).
async fn kept_of(home: &Home, id: &str) -> Option<PollAnswer> {
    let mut client = Client::connect(home).await.ok()?;
    client.ask::<Poll>(&IdParams::new(id)).await.ok()
}

/// A first chunk this long means a long log: the rest is asked for as a
/// `logs.dump` stream (half the daemon's largest chunk).
const DUMP_AFTER_BYTES: u64 = 512 << 10;

/// Streams the log from `from_byte` to its current end through `logs.dump`,
/// handing the output to `emit`; the offset reached, or `None` when the session's
/// daemon (a far herd of an older version) does not serve the stream, before any
/// output. The stream uses the connection up.
async fn dump(
    client: &mut Client,
    id: &str,
    from_byte: u64,
    emit: &mut impl FnMut(&str) -> std::io::Result<()>,
) -> anyhow::Result<Option<u64>> {
    let params = crate::client::params_of(&herd_protocol::params::DumpParams {
        id: id.to_owned(),
        from_byte,
        raw: client.hello.serves("logs.raw"),
        frames: client.hello.serves(crate::logframes::CAPABILITY),
    })?;
    let message = super::logstream::log_stream(client, "logs.dump", params, emit).await?;
    match message.error {
        Some(error) if error.code == METHOD_NOT_FOUND => Ok(None),
        Some(error) => Err(crate::client::rpc_failure(error)),
        None => match message.result {
            Some(end) => Ok(Some(answer_of::<LogsDump>(end)?.next_byte)),
            None => Ok(Some(from_byte)),
        },
    }
}

/// How far back `-n N -f` looks for the last N lines.
const TAIL_WINDOW_BYTES: u64 = 1 << 20;

/// Prints the last `n` lines of the log as it is now; the byte offset after them,
/// where following starts (so nothing is printed twice or skipped).
pub(crate) async fn print_last_lines(client: &mut Client, id: &str, n: u64) -> anyhow::Result<u64> {
    let (text, from) = last_lines(client, id, n).await?;
    output::raw(&text)?;
    Ok(from)
}

/// The last `n` lines of the log as it is now, and the byte offset after them.
pub(crate) async fn last_lines(
    client: &mut Client,
    id: &str,
    n: u64,
) -> anyhow::Result<(String, u64)> {
    // The log's current end, then its last window.
    let end = client.log_end(id).await?;
    let mut from = end.saturating_sub(TAIL_WINDOW_BYTES);
    let mut text = String::new();
    while from < end {
        let chunk = client.ask::<LogChunk>(&FollowParams::new(id, from)).await?;
        text.push_str(&chunk.output);
        let next = chunk.next_byte;
        if next <= from {
            break;
        }
        from = next;
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let keep = usize::try_from(n).unwrap_or(usize::MAX).min(lines.len());
    Ok((lines[lines.len() - keep..].concat(), from))
}
