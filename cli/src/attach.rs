//! `herd attach`: a session on this terminal, as dtach or abduco put one there.
//!
//! A PTY session takes the terminal over: raw mode, the job's current screen,
//! then its live output; every key goes to the job's stdin as the bytes the
//! terminal sent (Ctrl-C is byte 3, which the job's own terminal turns into its
//! SIGINT), and the window size goes with it, at attach and on every SIGWINCH.
//! The detach key (Ctrl-\ unless `--detach-key` names another) gives the
//! terminal back and leaves the job running. A pipe session has no terminal to
//! share: it attaches read-only for output, in the terminal's ordinary line
//! mode, and each line typed is submitted to the job's stdin.
//!
//! The current screen. A full-screen program drew its screen long ago and only
//! changes since, so replaying the last few lines would show fragments. Sending
//! the program a redraw is not sound either: only a size that changes raises
//! SIGWINCH, and not every program repaints on one. Instead the log's tail (the
//! last [`REPLAY_BYTES`]) is parsed by a terminal emulator (`vt100`) of the
//! window's size, and that emulator's screen is painted, with its modes
//! (alternate screen, hidden cursor, keypad, bracketed paste, mouse). The live
//! stream then continues from the exact byte the replay ended at, so nothing
//! is shown twice or skipped. When the attach changed the window size the job
//! also gets SIGWINCH and repaints at the new size.
//!
//! Redaction. Both the replay (`log_chunk`) and the live stream (`logs.follow`)
//! are the daemon's redacted log routes: what the person sees is masked as in
//! `herd logs`, and the escapes outside the masks come through byte for byte.
//! The same emulator keeps following the live output, so the terminal is put
//! back (alternate screen left, cursor shown, input modes reset) however the
//! job left it.
//!
//! Every way out restores the terminal: detach, the job ending (which says how,
//! and exits 0 or 1 as `logs --follow` does), a lost daemon, SIGTERM, SIGHUP,
//! SIGINT and SIGQUIT (which detach), a panic (the hook restores before the
//! report), and the guard's `Drop` on an error.

mod terminal;

use std::io::{IsTerminal, Read};
use std::num::NonZeroU16;
use std::time::Duration;

use anyhow::Context;
use herd_persistence::Home;
use herd_protocol::answers::{SessionStatus, StdinAnswer};
use herd_protocol::methods as m;
use herd_protocol::params::{
    FollowParams, IdParams, ListParams, ListState, ResizeParams, StdinParams, WaitParams,
};
use herd_protocol::{Method, to_params};
use serde::Deserialize as _;
use serde_json::Value;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use self::terminal::RawTerminal;
use crate::args::{AttachArgs, DetachKey};
use crate::client::{CallError, Client, answer_of};
use crate::commands::ending;
use crate::exit::{Code, Failure};
use crate::output;

/// How much of a PTY session's log is replayed to rebuild its screen. Enough
/// for many full repaints of a large terminal (a 300x100 screen of coloured
/// cells is under 200 KiB).
const REPLAY_BYTES: u64 = 2 << 20;

/// How long the live stream may be silent before the catch-up counts the
/// backlog as taken (it comes without a pause: the daemon sends a log's
/// unread bytes at once).
const CATCH_UP_QUIET: Duration = Duration::from_millis(100);

/// The longest catch-up, for a job whose output never pauses.
const CATCH_UP_MAX: Duration = Duration::from_secs(1);

/// How many lines of a pipe session's output are shown before it is followed.
const PIPE_TAIL_LINES: u64 = 10;

/// The largest window the daemon's `resize` takes, each way.
const MAX_WINDOW_CELLS: u16 = 10_000;

/// Runs `herd attach`.
///
/// # Errors
/// No terminal on stdin or stdout, an unknown or finished session (exit 2), an
/// unreachable daemon (3), or a job that did not exit 0 (1).
pub(crate) fn run(home: &Home, args: AttachArgs) -> anyhow::Result<()> {
    let not_a_terminal = match (
        std::io::stdin().is_terminal(),
        std::io::stdout().is_terminal(),
    ) {
        (true, true) => None,
        (false, _) => Some(
            "stdin is not a terminal; `herd send ID TEXT` or `herd submit ID LINE` give a job \
             input from a script",
        ),
        (true, false) => Some(
            "stdout is not a terminal; `herd logs --follow ID` follows a job's output into a \
             pipe or a file",
        ),
    };
    if let Some(why) = not_a_terminal {
        return Err(Failure::new(Code::Usage, format!("attach needs a terminal: {why}")).into());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    let outcome = runtime.block_on(attach(home, &args));
    // The stdin reader may still be blocked in a read: do not wait for it.
    runtime.shutdown_background();
    outcome
}

/// The session to attach to, as the daemon knows it.
#[derive(Debug)]
struct Target {
    id: String,
    name: Option<String>,
    is_pty: bool,
}

impl Target {
    /// The id, with the name when it has one: `proc_… (web)`.
    fn label(&self) -> String {
        match &self.name {
            Some(name) => format!("{} ({})", self.id, output::visible(name)),
            None => self.id.clone(),
        }
    }
}

async fn attach(home: &Home, args: &AttachArgs) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    let target = find(&mut client, &args.id).await?;
    through_restarts(home, client, &target, args.detach_key, false).await
}

/// Attaches to `target`, and again each time the daemon goes away meanwhile (a
/// crash, a restart): the job runs on under its supervisor, so the next daemon
/// (started if none answers within the reconnect's deadline) is asked for its
/// screen, which is painted again. A job that ended meanwhile is said as ended.
async fn through_restarts(
    home: &Home,
    mut client: Client,
    target: &Target,
    detach: DetachKey,
    shows_early_end: bool,
) -> anyhow::Result<()> {
    let mut readers = Readers::default();
    loop {
        let attempt = if target.is_pty {
            pty(home, client, target, detach, shows_early_end, &mut readers).await
        } else {
            pipe(home, client, target, &mut readers).await
        };
        match attempt {
            Err(err) if crate::client::is_lost(&err) => {
                let id = &target.id;
                output::err_line(&format!(
                    "herd: the daemon went away; {id} runs on under its supervisor; attaching again"
                ));
                client = crate::client::reconnect(home).await.map_err(|e| {
                    e.context(format!(
                        "lost the daemon while attached to {id}, which was running then"
                    ))
                })?;
                let polled = client.ask::<m::Poll>(&IdParams::new(id)).await?;
                if polled.status != SessionStatus::Running {
                    let answer = crate::commands::follow::ended(home, &mut client, id).await?;
                    return conclude(home, target, Ending::Finished(Some(answer)), "").await;
                }
            }
            other => return other,
        }
    }
}

/// `herd run --pty --wait` on a terminal: attaches to the PTY session `id` it
/// has just started, to its end (Ctrl-\ detaches). A job that ended before
/// there was a terminal to hand over has its output printed as it came.
///
/// # Errors
/// As [`run`]'s: an unreachable daemon (3), or a job that did not exit 0 (1).
pub(crate) async fn started(home: &Home, id: &str) -> anyhow::Result<()> {
    let client = Client::connect(home).await?;
    let target = Target {
        id: id.to_owned(),
        name: None,
        is_pty: true,
    };
    through_restarts(home, client, &target, DetachKey::DEFAULT, true).await
}

/// Looks the session up; a finished one is refused, saying how it ended.
async fn find(client: &mut Client, wanted: &str) -> anyhow::Result<Target> {
    let found = client.ask::<m::Lookup>(&IdParams::new(wanted)).await?;
    let id = found.session_id;
    let owner = found.owner_task_id.unwrap_or_default();
    let params = ListParams {
        owner: Some(owner),
        state: client.hello.serves("list.filter").then_some(ListState::All),
        // A far job (`HOST:ID`) is listed among its host's rows, not the local ones.
        host: id
            .split_once(':')
            .filter(|_| client.hello.serves("hosts"))
            .map(|(host, _)| host.to_owned()),
        ..ListParams::default()
    };
    let listed = client.ask::<m::List>(&params).await?;
    let row = listed.processes.iter().find(|row| row.session_id == id);
    match row {
        Some(row) if row.status == SessionStatus::Running => Ok(Target {
            is_pty: row.mode == "pty",
            name: row.name.clone().filter(|n| !n.is_empty()),
            id,
        }),
        _ => {
            let answer = client.ask::<m::Wait>(&wait_on(&id)).await?;
            Err(Failure::new(
                Code::Usage,
                format!(
                    "cannot attach: the session has finished ({}); `herd logs {id}` shows its output",
                    ending(&answer)
                ),
            )
            .into())
        }
    }
}

/// What the output follower tells the attach loop.
enum Piece {
    /// Output, redacted, escapes kept.
    Output(String),
    /// The stream ended: the session ended (with its result when the daemon
    /// sends it along), or the stream broke.
    End(anyhow::Result<Option<Value>>),
}

/// What goes to the daemon on the request connection.
enum Input {
    /// Bytes for the job's stdin, as typed.
    Write(String),
    /// A line for the job's stdin (Enter added by the daemon).
    Submit(String),
    /// The window's new size.
    Resize { rows: u16, cols: u16 },
}

/// Follows the session's log from `from_byte` on its own connection; with
/// `terminal`, as the real terminal that answers the job's queries (a PTY).
fn spawn_follower(
    mut follower: Client,
    id: String,
    from_byte: u64,
    terminal: bool,
) -> mpsc::UnboundedReceiver<Piece> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let sent = tx.clone();
        let end = follow(&mut follower, &id, from_byte, terminal, |text| {
            // The loop is gone only when attach is ending: nothing to keep.
            sent.send(Piece::Output(text.to_owned())).ok();
        })
        .await;
        tx.send(Piece::End(end)).ok();
    });
    rx
}

/// Reads a `logs.follow` stream to its end, handing each piece of output to
/// `emit`; the session's result when the daemon sends it with the end.
async fn follow(
    client: &mut Client,
    id: &str,
    from_byte: u64,
    terminal: bool,
    mut emit: impl FnMut(&str),
) -> anyhow::Result<Option<Value>> {
    crate::commands::logstream::stream_with(client, id, from_byte, terminal, |text| {
        emit(text);
        Ok(())
    })
    .await
}

/// Sends what the person types, in order, on the request connection. A refused
/// write (the job closed its stdin) is logged, not fatal: the job's end comes
/// through the log stream. A broken connection ends the task, which the loop
/// sees as its input channel closing.
fn spawn_sender(mut client: Client, id: String) -> mpsc::UnboundedSender<Input> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Input>();
    tokio::spawn(async move {
        while let Some(input) = rx.recv().await {
            let stdin = |data| {
                to_params(&StdinParams {
                    id: id.clone(),
                    data,
                })
            };
            let (method, params) = match input {
                Input::Write(data) => (m::Write::NAME, stdin(data)),
                Input::Submit(data) => (m::Submit::NAME, stdin(data)),
                Input::Resize { rows, cols } => (
                    m::Resize::NAME,
                    to_params(&ResizeParams {
                        id: id.clone(),
                        rows,
                        cols,
                    }),
                ),
            };
            // herd-protocol's params always serialise.
            let params = params.unwrap_or_default();
            match client.call(method, params).await {
                Ok(answer) => {
                    let taken = StdinAnswer::deserialize(&answer).is_ok_and(|a| a.status == "ok");
                    if !taken {
                        tracing::debug!(method, answer = %answer, "input not taken");
                    }
                }
                Err(CallError::Rpc(err)) => {
                    tracing::debug!(method, error = %err.message, "input refused");
                }
                Err(CallError::Io(err)) => {
                    tracing::debug!(error = %err, "the request connection broke");
                    return;
                }
            }
        }
    });
    tx
}

/// The window's size as `(rows, cols)`, within what `resize` takes.
fn window_size() -> anyhow::Result<(NonZeroU16, NonZeroU16)> {
    let (cols, rows) =
        ratatui::crossterm::terminal::size().context("cannot read the terminal's size")?;
    let cells = |n: u16| NonZeroU16::new(n.min(MAX_WINDOW_CELLS)).unwrap_or(NonZeroU16::MIN);
    Ok((cells(rows), cells(cols)))
}

/// Why an attach loop ended.
enum Ending {
    /// The detach key, a signal, or stdin closed.
    Detached(Option<&'static str>),
    /// The job ended (its result when the stream carried it).
    Finished(Option<Value>),
    /// The daemon went away, or the stream failed.
    Broken(anyhow::Error),
}

/// The signals that detach, as one stream of their names.
struct Signals {
    term: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> anyhow::Result<Signals> {
        let on = |kind, name| signal(kind).with_context(|| format!("cannot handle {name}"));
        Ok(Signals {
            term: on(SignalKind::terminate(), "SIGTERM")?,
            hangup: on(SignalKind::hangup(), "SIGHUP")?,
            interrupt: on(SignalKind::interrupt(), "SIGINT")?,
            quit: on(SignalKind::quit(), "SIGQUIT")?,
        })
    }

    /// The next one's name.
    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.hangup.recv() => "SIGHUP",
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.quit.recv() => "SIGQUIT",
        }
    }
}

/// Attaches to a PTY session; `shows_early_end`: a job that ended before the
/// terminal was taken has its output printed (`run --pty --wait`).
async fn pty(
    home: &Home,
    mut client: Client,
    target: &Target,
    detach: DetachKey,
    shows_early_end: bool,
    readers: &mut Readers,
) -> anyhow::Result<()> {
    let id = target.id.as_str();
    let (rows, cols) = window_size()?;
    // The job learns the size first, so what it draws from now on fits.
    let size = ResizeParams {
        id: id.to_owned(),
        rows: rows.get(),
        cols: cols.get(),
    };
    client.send_typed::<m::Resize>(&size).await?;
    let mut screen = vt100::Parser::new(rows, cols, 0);
    let mut seen = String::new();
    let from_byte = replay(&mut client, id, &mut screen, &mut seen).await?;
    let follower = Client::connect(home).await?;
    let mut signals = Signals::new()?;
    let mut winch = signal(SignalKind::window_change()).context("cannot handle SIGWINCH")?;
    let mut pieces = spawn_follower(follower, id.to_owned(), from_byte, true);
    let mut queries = String::new();
    if let Some(end) = catch_up(&mut pieces, &mut screen, &mut seen, &mut queries).await {
        // The job ended before there was anything to attach to.
        if shows_early_end {
            output::raw(&seen)?;
        }
        let end = match end {
            Ok(result) => Ending::Finished(result),
            Err(err) => Ending::Broken(err),
        };
        return conclude(home, target, end, "").await;
    }
    output::err_line(&format!(
        "herd: attached to {}; {} detaches",
        target.label(),
        detach.name()
    ));
    let mut terminal = RawTerminal::take()?;
    terminal.paint(screen.screen())?;
    // Asked while the screen was rebuilt: the terminal answers now, where the
    // painted cursor is.
    terminal.write(&queries)?;
    let sender = spawn_sender(client, id.to_owned());
    let keys = readers.keys();
    let mut carry = Vec::new();
    let ending = loop {
        tokio::select! {
            piece = pieces.recv() => match piece {
                Some(Piece::Output(text)) => {
                    screen.process(text.as_bytes());
                    if terminal.write(&text).is_err() {
                        // The terminal is gone (a closed window): nothing to show it on.
                        break Ending::Detached(Some("the terminal closed"));
                    }
                }
                Some(Piece::End(Ok(result))) => break Ending::Finished(result),
                Some(Piece::End(Err(err))) => break Ending::Broken(err),
                None => break Ending::Broken(anyhow::anyhow!("the log stream stopped")),
            },
            bytes = keys.recv() => {
                let Some(bytes) = bytes else {
                    break Ending::Detached(Some("stdin closed"));
                };
                #[cfg(debug_assertions)]
                if bytes.contains(&0x07) && std::env::var_os("HERD_ATTACH_TEST_PANIC").is_some() {
                    // Debug builds only: the tests prove the panic hook gives the terminal back.
                    panic!("herd attach: the panic HERD_ATTACH_TEST_PANIC asked for (Ctrl-G)");
                }
                let (typed, detached) = match bytes.iter().position(|b| *b == detach.byte()) {
                    Some(at) => (&bytes[..at], true),
                    None => (&bytes[..], false),
                };
                let text = decode_keys(&mut carry, typed);
                if !text.is_empty() && sender.send(Input::Write(text)).is_err() {
                    break Ending::Broken(lost_daemon());
                }
                if detached {
                    break Ending::Detached(None);
                }
            }
            _ = winch.recv() => {
                if let Ok((rows, cols)) = window_size() {
                    screen.screen_mut().set_size(rows, cols);
                    let (rows, cols) = (rows.get(), cols.get());
                    if sender.send(Input::Resize { rows, cols }).is_err() {
                        break Ending::Broken(lost_daemon());
                    }
                }
            }
            name = signals.recv() => break Ending::Detached(Some(name)),
        }
    };
    terminal.give_back(screen.screen());
    drop(terminal);
    conclude(home, target, ending, &key_option(detach)).await
}

/// ` --detach-key '^X'` for a key chosen, nothing for the default (the
/// re-attach hint).
fn key_option(key: DetachKey) -> String {
    if key == DetachKey::DEFAULT {
        return String::new();
    }
    format!(" --detach-key '^{}'", char::from(key.byte() | 0x40))
}

/// Feeds the last [`REPLAY_BYTES`] of the log into `screen`; the byte offset the
/// replay reached, where the live stream starts.
/// `seen` gets the text as well.
async fn replay(
    client: &mut Client,
    id: &str,
    screen: &mut vt100::Parser,
    seen: &mut String,
) -> anyhow::Result<u64> {
    // An empty log (the job has printed nothing yet) ends at 0: the live
    // stream then starts at the first byte the job writes.
    let end = client.log_end(id).await?;
    let mut from = end.saturating_sub(REPLAY_BYTES);
    while from < end {
        let chunk = client
            .ask::<m::LogChunk>(&FollowParams::new(id, from))
            .await?;
        screen.process(chunk.output.as_bytes());
        seen.push_str(&chunk.output);
        // A running session's chunk ends at its last line end: the rest (a
        // prompt, a half-drawn line) comes with the live stream.
        if chunk.next_byte > from {
            from = chunk.next_byte;
        } else {
            break;
        }
    }
    Ok(from)
}

/// Takes what the live stream sends at once into `screen` as well, before it is
/// painted: the end of the log that [`replay`] leaves to the stream (a running
/// session's chunks end at a line end, and a full-screen program's last frame
/// rarely has one, nor, often, its switch to the alternate screen). The backlog
/// comes in a few messages at once; the catch-up ends after
/// [`CATCH_UP_QUIET`] without one, or after [`CATCH_UP_MAX`] for a job that
/// never pauses. Where it ends does not change what the person sees, only how
/// it gets there: what the screen took is painted, the rest is shown as it
/// comes. `Some` when the stream ended meanwhile (the job's end). `seen` gets
/// the text as well, and `queries` the queries to the terminal it held.
async fn catch_up(
    pieces: &mut mpsc::UnboundedReceiver<Piece>,
    screen: &mut vt100::Parser,
    seen: &mut String,
    queries: &mut String,
) -> Option<anyhow::Result<Option<Value>>> {
    let until = tokio::time::Instant::now() + CATCH_UP_MAX;
    loop {
        let quiet = tokio::time::Instant::now() + CATCH_UP_QUIET;
        match tokio::time::timeout_at(quiet.min(until), pieces.recv()).await {
            Ok(Some(Piece::Output(text))) => {
                screen.process(text.as_bytes());
                terminal::queries_in(&text, queries);
                seen.push_str(&text);
            }
            Ok(Some(Piece::End(end))) => return Some(end),
            Ok(None) => return Some(Err(anyhow::anyhow!("the log stream stopped"))),
            Err(_) => return None,
        }
    }
}

/// The keyboard's readers, started at the first attach and kept for the next
/// (after a daemon restart): a reader blocked in a read cannot be stopped, and a
/// second one would race it for the keys.
#[derive(Default)]
struct Readers {
    keys: Option<mpsc::UnboundedReceiver<Vec<u8>>>,
    lines: Option<mpsc::UnboundedReceiver<String>>,
}

impl Readers {
    /// The raw key chunks (a PTY session).
    fn keys(&mut self) -> &mut mpsc::UnboundedReceiver<Vec<u8>> {
        self.keys.get_or_insert_with(spawn_key_reader)
    }

    /// The typed lines (a pipe session).
    fn lines(&mut self) -> &mut mpsc::UnboundedReceiver<String> {
        self.lines.get_or_insert_with(spawn_line_reader)
    }
}

/// Reads the keyboard on a thread of its own (a blocking read of a terminal
/// cannot be cancelled; the process exits around it), chunk by chunk.
fn spawn_key_reader() -> mpsc::UnboundedReceiver<Vec<u8>> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = [0_u8; 4096];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        return;
                    }
                }
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    });
    rx
}

/// Reads lines typed on a thread of its own, each without its newline.
fn spawn_line_reader() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut line = String::new();
        loop {
            line.clear();
            match stdin.read_line(&mut line) {
                Ok(0) => return,
                Ok(_) => {
                    let text = line.strip_suffix('\n').unwrap_or(&line);
                    if tx.send(text.to_owned()).is_err() {
                        return;
                    }
                }
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    });
    rx
}

/// The text of key bytes for `write` (a JSON string): `carry` holds the start
/// of a character a read cut, for the next read; bytes that are no UTF-8 at
/// all (a terminal sending Latin-1 for Alt) become U+FFFD.
pub(crate) fn decode_keys(carry: &mut Vec<u8>, bytes: &[u8]) -> String {
    carry.extend_from_slice(bytes);
    let mut text = String::new();
    let mut start = 0;
    while start < carry.len() {
        match std::str::from_utf8(&carry[start..]) {
            Ok(rest) => {
                text.push_str(rest);
                start = carry.len();
            }
            Err(err) => {
                let valid = err.valid_up_to();
                text.push_str(
                    std::str::from_utf8(&carry[start..start + valid]).unwrap_or_default(),
                );
                start += valid;
                match err.error_len() {
                    Some(bad) => {
                        text.push(char::REPLACEMENT_CHARACTER);
                        start += bad;
                    }
                    // A character still arriving.
                    None => break,
                }
            }
        }
    }
    carry.drain(..start);
    text
}

fn lost_daemon() -> anyhow::Error {
    crate::client::lost("lost the connection to the daemon")
}

/// Attaches to a pipe session: its output, and each line typed submitted.
async fn pipe(
    home: &Home,
    mut client: Client,
    target: &Target,
    readers: &mut Readers,
) -> anyhow::Result<()> {
    let id = target.id.as_str();
    // Ctrl-C detaches from the moment the notice says so.
    let mut signals = Signals::new()?;
    output::err_line(&format!(
        "herd: attached to {}, a pipe session: its output follows, read-only; each line you type \
         is sent to its stdin; Ctrl-D or Ctrl-C detaches",
        target.label()
    ));
    let from_byte = crate::commands::print_last_lines(&mut client, id, PIPE_TAIL_LINES).await?;
    let follower = Client::connect(home).await?;
    let mut pieces = spawn_follower(follower, id.to_owned(), from_byte, false);
    let sender = spawn_sender(client, id.to_owned());
    let lines = readers.lines();
    let ending = loop {
        tokio::select! {
            piece = pieces.recv() => match piece {
                Some(Piece::Output(text)) => {
                    if output::raw(&text).is_err() {
                        break Ending::Detached(Some("the terminal closed"));
                    }
                }
                Some(Piece::End(Ok(result))) => break Ending::Finished(result),
                Some(Piece::End(Err(err))) => break Ending::Broken(err),
                None => break Ending::Broken(anyhow::anyhow!("the log stream stopped")),
            },
            line = lines.recv() => match line {
                Some(line) => {
                    if sender.send(Input::Submit(line)).is_err() {
                        break Ending::Broken(lost_daemon());
                    }
                }
                None => break Ending::Detached(None),
            },
            name = signals.recv() => break Ending::Detached(Some(name)),
        }
    };
    // Typed lines still on their way go out before the process ends.
    drop(sender);
    conclude(home, target, ending, "").await
}

/// Says why the attach ended; the exit status: 0 on a detach, the job's
/// verdict when it ended (0 only when it exited 0), 3 when the daemon went.
async fn conclude(home: &Home, target: &Target, end: Ending, key_hint: &str) -> anyhow::Result<()> {
    let id = &target.id;
    match end {
        Ending::Detached(why) => {
            let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
            output::err_line(&format!(
                "herd: detached from {}{why}, still running; `herd attach{key_hint} {id}` \
                 attaches again",
                target.label()
            ));
            Ok(())
        }
        Ending::Broken(err) => Err(err),
        Ending::Finished(result) => {
            let answer = match result {
                Some(answer) => answer,
                None => ended(&mut Client::connect(home).await?, id).await?,
            };
            let answer = answer_of::<m::Wait>(answer)?;
            output::err_line(&ending(&answer));
            if answer.succeeded() {
                Ok(())
            } else {
                Err(Failure::silent(Code::Failed).into())
            }
        }
    }
}

/// `wait`'s params: until `id` ends, as long as the daemon lets a wait last.
fn wait_on(id: &str) -> WaitParams {
    WaitParams {
        id: id.to_owned(),
        timeout_seconds: None,
        ready: false,
    }
}

/// The wait answer of a session that has ended.
/// Without a timeout the daemon answers once the session has ended.
async fn ended(client: &mut Client, id: &str) -> anyhow::Result<Value> {
    let answer = client.send_typed::<m::Wait>(&wait_on(id)).await?;
    answer_of::<m::Wait>(&answer)?;
    Ok(answer)
}

#[cfg(test)]
mod tests;
