//! Reading one log stream on one connection: `logs.follow` to the session's
//! end, or `logs.dump` to the log's current end. Used by the followers
//! (`follow`, `resume`, `attach`) and `herd logs`; a broken connection comes
//! back marked lost (`crate::client::lost`), for the caller to connect again.

use herd_protocol::events::{LogBytes, LogNote};
use herd_protocol::methods::Wait;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::client::{CallError, Client};
use crate::logframes;
use crate::protocol::{LOG_BYTES, Response};

/// The params of stream note `message` as herd-protocol's type: a missing or
/// mistyped field is an error naming the note and the field, never an empty piece.
fn note<T: DeserializeOwned>(message: &Response) -> anyhow::Result<T> {
    let method = message.method.as_deref().unwrap_or_default();
    let params = message.params.as_ref().unwrap_or(&Value::Null);
    T::deserialize(params).map_err(|err| {
        anyhow::anyhow!("the daemon's `{method}` note does not read as the protocol says ({err})")
    })
}

/// Reads a `logs.follow` stream, handing each piece of output to `emit`, until
/// the daemon's final answer (the session ended), and returns the result that
/// answer carries (daemons with `logs.follow.result`).
pub(crate) async fn stream(
    client: &mut Client,
    id: &str,
    from_byte: u64,
    emit: impl FnMut(&str) -> std::io::Result<()>,
) -> anyhow::Result<Option<Value>> {
    stream_with(client, id, from_byte, false, emit).await
}

/// As [`stream`]; with `terminal`, a real terminal shows the stream (`herd
/// attach`): the session's PTY queries come in it, unanswered, for that terminal
/// to answer (daemons with `logs.follow.terminal`, for a session of this host;
/// otherwise the session's supervisor answers them).
pub(crate) async fn stream_with(
    client: &mut Client,
    id: &str,
    from_byte: u64,
    terminal: bool,
    mut emit: impl FnMut(&str) -> std::io::Result<()>,
) -> anyhow::Result<Option<Value>> {
    let params = herd_protocol::params::FollowParams {
        result: client.hello.serves("logs.follow.result"),
        // A far host's session (`NAME:proc_…`) is followed through its door, by a
        // daemon that may not know `terminal`: its queries stay answered there.
        terminal: terminal && !id.contains(':') && client.hello.serves("logs.follow.terminal"),
        raw: client.hello.serves("logs.raw"),
        frames: client.hello.serves(logframes::CAPABILITY),
        ..herd_protocol::params::FollowParams::new(id, from_byte)
    };
    let params = crate::client::params_of(&params)?;
    let answer = log_stream(client, "logs.follow", params, &mut emit).await?;
    follow_end(answer)
}

/// Reads on a `logs.follow` stream already asked for as request `request` (a
/// `spawn` with `follow`, capability `spawn.follow`), as [`stream`] does.
pub(crate) async fn stream_started(
    client: &mut Client,
    request: u64,
    mut emit: impl FnMut(&str) -> std::io::Result<()>,
) -> anyhow::Result<Option<Value>> {
    let answer = read_stream(client, request, "logs.follow", &mut emit).await?;
    follow_end(answer)
}

/// The result a `logs.follow` stream's answer carries, or its error.
fn follow_end(answer: Response) -> anyhow::Result<Option<Value>> {
    if let Some(error) = answer.error {
        return Err(crate::client::rpc_failure(error));
    }
    Ok(answer
        .result
        .and_then(|mut answer| answer.get_mut("result").map(Value::take))
        // The session's result as `wait` answers it, or `{"error"}` when the
        // daemon could not tell it: the caller then asks `wait` itself.
        .filter(|result| crate::client::read_answer::<Wait>(result).is_ok()))
}

/// Starts the log stream `method` with `params`, hands the output of each `log`
/// note or `log.bytes` frame (`raw`, capability `logs.raw`) to `emit`, and
/// returns the message that answers the request (the stream's end, or its
/// refusal).
pub(crate) async fn log_stream(
    client: &mut Client,
    method: &str,
    params: Value,
    emit: &mut impl FnMut(&str) -> std::io::Result<()>,
) -> anyhow::Result<Response> {
    let request = client
        .send(method, params)
        .await
        .map_err(|e| CallError::Io(e).into_anyhow())?;
    read_stream(client, request, method, emit).await
}

/// Reads the stream of request `request` (of `method`) to its answer, as
/// [`log_stream`] does: its `log` notes, `log.bytes` frames, or binary frames
/// (an answer `{"frames": 1}` first, capability `logs.frames`, then the answer
/// that ends the stream).
pub(crate) async fn read_stream(
    client: &mut Client,
    request: u64,
    method: &str,
    emit: &mut impl FnMut(&str) -> std::io::Result<()>,
) -> anyhow::Result<Response> {
    let io = |e: std::io::Error| CallError::Io(e).into_anyhow();
    let mut framed = false;
    loop {
        let Some(message) = client.next_note(method).await.map_err(io)? else {
            return Err(crate::client::lost("the daemon closed the log stream"));
        };
        if message.method.as_deref() == Some(LOG_BYTES) {
            let len = note::<LogBytes>(&message)?.len;
            let len = usize::try_from(len).map_err(|_| {
                anyhow::anyhow!("a `{LOG_BYTES}` frame of {len} bytes does not fit in memory")
            })?;
            let body = client.frame_body(len).await.map_err(io)?;
            // The daemon sends text; anything else is shown, not refused.
            match std::str::from_utf8(body) {
                Ok(text) => emit(text)?,
                Err(_) => emit(&String::from_utf8_lossy(body))?,
            }
        } else if message.method.as_deref() == Some("log") {
            emit(&note::<LogNote>(&message)?.output)?;
        } else if message.id == request {
            let opens = message.result.as_ref().is_some_and(logframes::opens_frames);
            if framed || !opens {
                return Ok(message);
            }
            framed = true;
            read_frames(client, method, emit).await?;
        }
    }
}

/// Reads binary frames to their end, handing their text to `emit` (a character
/// cut between two frames is put together first).
async fn read_frames(
    client: &mut Client,
    method: &str,
    emit: &mut impl FnMut(&str) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    if client.moves_frames() {
        // Straight to stdout (`Client::frames_to_stdout`): `emit` prints there.
        // A closed stdout (`herd logs ID | head`) is a quiet end, as `emit`'s is.
        while client.move_frame(method).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                anyhow::Error::from(e)
            } else {
                CallError::Io(e).into_anyhow()
            }
        })? {}
        return Ok(());
    }
    let mut held: Vec<u8> = Vec::new();
    while let Some(body) = client
        .next_frame(method)
        .await
        .map_err(|e| CallError::Io(e).into_anyhow())?
    {
        if held.is_empty() {
            let rest = emit_text(body, emit)?;
            held.extend_from_slice(rest);
        } else {
            held.extend_from_slice(body);
            let taken = std::mem::take(&mut held);
            let rest = emit_text(&taken, emit)?;
            held.extend_from_slice(rest);
        }
    }
    if !held.is_empty() {
        emit(&String::from_utf8_lossy(&held))?;
    }
    Ok(())
}

/// Hands the text of `bytes` to `emit`, up to a character its end cuts: that
/// rest comes back, to be put in front of the next frame. Bytes that are not
/// UTF-8 are shown as U+FFFD.
fn emit_text<'b>(
    bytes: &'b [u8],
    emit: &mut impl FnMut(&str) -> std::io::Result<()>,
) -> std::io::Result<&'b [u8]> {
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            emit(text)?;
            Ok(&[])
        }
        Err(err) if err.error_len().is_none() => {
            let (text, rest) = bytes.split_at(err.valid_up_to());
            emit(&String::from_utf8_lossy(text))?;
            Ok(rest)
        }
        Err(_) => {
            emit(&String::from_utf8_lossy(bytes))?;
            Ok(&[])
        }
    }
}
