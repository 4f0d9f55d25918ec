//! The client side of the socket: connect (starting a daemon when none answers),
//! handshake, call, and read streams.
//!
//! Autostart re-executes this binary as `herd serve --detached` with its stdio on
//! `<home>/logs/daemon.log`; the daemon puts itself in a new session (setsid), so
//! it outlives the client and no terminal signal reaches it, and first closes every
//! other descriptor it inherited from the client (`herd_core::hygiene`), so a pipe the
//! client's caller left open (`herd ps 7>&1 | cat`) is not held open by the daemon. The client then
//! retries connecting until the socket answers or a deadline passes, watching the
//! daemon process so a daemon that dies at start-up is reported at once with the
//! end of its log, rather than after the deadline.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use herd_persistence::Home;
use herd_protocol::Method;
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

mod answer;
mod liveness;
mod pipelined;
mod raw;

pub(crate) use answer::{answer_of, read_answer, read_part};
pub(crate) use liveness::{is_stopped, pid_from_file, state_of, stopped_message};
pub(crate) use pipelined::Pipelined;

use crate::exit::{Code, Failure};
use crate::protocol::{
    self, Line, MAX_RESPONSE_BYTES, PROTOCOL_VERSION, Request, Response, RpcError,
};

/// The offset a read far past any log's end asks from ([`Client::log_end`]).
const PAST_THE_END: u64 = u64::MAX / 2;

/// How long autostart waits for a new daemon's socket.
const START_DEADLINE: Duration = Duration::from_secs(15);

/// The longest socket path `bind`/`connect` accept (`sun_path` is 108 bytes with the NUL).
pub(crate) const MAX_SOCKET_PATH_BYTES: usize = 107;

/// What the daemon said in the handshake: herd-protocol's `hello` answer.
pub(crate) type Hello = herd_protocol::answers::HelloAnswer;

/// One connection to the daemon.
#[derive(Debug)]
pub(crate) struct Client {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    next_id: u64,
    buf: Vec<u8>,
    /// The daemon, watched while a call waits ([`liveness`]): its pid (the pid
    /// file's until the handshake names it) and its socket (for the liveness
    /// check of a long call).
    daemon: liveness::Watched,
    /// The handshake answer.
    pub(crate) hello: Hello,
    /// Binary frames go to stdout by splice, not through the caller's `emit`
    /// ([`Client::frames_to_stdout`]).
    stdout: Option<Box<crate::logframes::StdoutSink>>,
}

/// Checks that the home's socket path fits the OS limit.
///
/// # Errors
/// A [`Failure`] naming the path, its length and the limit.
pub(crate) fn check_socket_path(path: &Path) -> anyhow::Result<()> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH_BYTES {
        return Err(Failure::new(
            Code::Usage,
            format!(
                "socket path {} is {len} bytes, over the OS limit of {MAX_SOCKET_PATH_BYTES} bytes \
                 for a Unix socket path; point HERD_HOME at a shorter directory",
                path.display()
            ),
        )
        .into());
    }
    Ok(())
}

/// Turns a daemon error into an error carrying the right exit code.
pub(crate) fn rpc_failure(err: RpcError) -> anyhow::Error {
    let code = match err.code {
        protocol::NOT_FOUND
        | protocol::INVALID_PARAMS
        | protocol::METHOD_NOT_FOUND
        | protocol::UNSUPPORTED
        | protocol::REFUSED
        | protocol::INVALID_REQUEST => Code::Usage,
        protocol::VERSION_MISMATCH
        | protocol::PEER_REFUSED
        | protocol::HOST_UNREACHABLE
        | protocol::TOO_MANY_CONNECTIONS => Code::Unreachable,
        _ => Code::Failed,
    };
    // The daemon's words are the library's; a person at the CLI is told the command.
    let message = if err.code == protocol::NOT_FOUND {
        err.message.replace(
            "list sessions to see the ids that exist",
            "`herd ps --all` lists the ids that exist",
        )
    } else {
        err.message
    };
    let mut failure = Failure::new(code, message);
    // A far host's door failed: a follower asks again (`gone`).
    failure.host_lost = err.code == protocol::HOST_UNREACHABLE;
    failure.into()
}

impl Client {
    /// Connects to the home's daemon, starting one when none answers.
    ///
    /// # Errors
    /// [`Code::Unreachable`] when no daemon answers and none could be started.
    pub(crate) async fn connect(home: &Home) -> anyhow::Result<Client> {
        let socket = home.socket_path();
        check_socket_path(&socket)?;
        if let Some(client) = Client::try_connect(home).await? {
            return Ok(client);
        }
        autostart(home).await
    }

    /// Connects to a running daemon; `None` when none answers. Never starts one.
    ///
    /// # Errors
    /// A handshake failure (e.g. a version mismatch).
    pub(crate) async fn try_connect(home: &Home) -> anyhow::Result<Option<Client>> {
        let socket = home.socket_path();
        check_socket_path(&socket)?;
        match UnixStream::connect(&socket).await {
            // A daemon that is dying right now may still take the connection and
            // then reset it: that is no daemon, and the caller starts one.
            Ok(stream) => {
                let watched = liveness::Watched {
                    pid: liveness::pid_from_file(home),
                    socket: Some(socket.clone()),
                };
                Client::handshake(stream, watched).await
            }
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::NotFound
                        | std::io::ErrorKind::ConnectionRefused
                        // A daemon exiting right now: its listener is going away.
                        | std::io::ErrorKind::ConnectionReset
                ) =>
            {
                Ok(None)
            }
            Err(err) => Err(Failure::new(
                Code::Unreachable,
                format!(
                    "cannot connect to the daemon at {}: {err}",
                    socket.display()
                ),
            )
            .into()),
        }
    }

    /// Performs the `hello` handshake on a fresh connection. `None` when the
    /// connection broke before the answer (reset, closed): a daemon that is exiting
    /// right now took it, which is no daemon, and the caller starts one.
    async fn handshake(
        stream: UnixStream,
        daemon: liveness::Watched,
    ) -> anyhow::Result<Option<Client>> {
        let mut client = Client::admitted(stream, daemon)?;
        let answer = match client.call("hello", hello_params()).await {
            Ok(answer) => answer,
            Err(err) => return handshake_failure(err).map(|()| None),
        };
        client.greeted(answer)?;
        Ok(Some(client))
    }

    /// Takes the handshake's answer.
    fn greeted(&mut self, answer: Value) -> anyhow::Result<()> {
        self.hello = serde_json::from_value(answer).context("the daemon sent a malformed hello")?;
        self.daemon.pid = Some(self.hello.pid);
        Ok(())
    }

    /// A client on `stream` once its peer is seen to be this user's; nothing sent yet.
    fn admitted(stream: UnixStream, daemon: liveness::Watched) -> anyhow::Result<Client> {
        // Nothing is sent (a spawn may carry secrets in its environment) to a
        // socket another user serves, e.g. one planted in a home they can write.
        let ours = nix::unistd::getuid().as_raw();
        let theirs = stream
            .peer_cred()
            .context("cannot read the daemon socket's peer credentials")?
            .uid();
        if theirs != ours {
            return Err(Failure::new(
                Code::Unreachable,
                format!(
                    "the daemon socket is served by uid {theirs}, not by you (uid {ours}); herd talks \
                     only to a daemon of your own: check who owns the home and its run/ directory"
                ),
            )
            .into());
        }
        let (read, writer) = stream.into_split();
        Ok(Client {
            // Log chunks are up to 1 MiB a line; a small buffer costs a syscall per 8 KiB.
            reader: BufReader::with_capacity(256 * 1024, read),
            writer,
            next_id: 1,
            buf: Vec::new(),
            stdout: None,
            daemon,
            hello: Hello {
                protocol: 0,
                daemon: String::new(),
                pid: 0,
                home: String::new(),
                capabilities: Vec::new(),
            },
        })
    }

    /// Sends one request and returns its id.
    ///
    /// # Errors
    /// The write error.
    pub(crate) async fn send(&mut self, method: &str, params: Value) -> std::io::Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        let request = Request {
            jsonrpc: "2.0".into(),
            id: Some(Value::from(id)),
            method: method.to_owned(),
            params,
        };
        let mut line = serde_json::to_vec(&request).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.writer.write_all(&line).await?;
        Ok(id)
    }

    /// Reads the next message (response or stream notification); `None` at EOF.
    ///
    /// # Errors
    /// A read error or a line that is not a JSON-RPC message.
    pub(crate) async fn next_message(&mut self) -> std::io::Result<Option<Response>> {
        match protocol::read_line(&mut self.reader, &mut self.buf, MAX_RESPONSE_BYTES).await? {
            Line::Eof => Ok(None),
            Line::TooLong => Err(std::io::Error::other("the daemon sent an oversized line")),
            Line::Complete => serde_json::from_slice(&self.buf)
                .map(Some)
                .map_err(std::io::Error::other),
        }
    }

    /// The `len` bytes after a `log.bytes` frame's header (capability `logs.raw`).
    ///
    /// # Errors
    /// A read error, or the connection closed inside the frame.
    pub(crate) async fn frame_body(&mut self, len: usize) -> std::io::Result<&[u8]> {
        use tokio::io::AsyncReadExt;
        if len > MAX_RESPONSE_BYTES {
            return Err(std::io::Error::other("the daemon sent an oversized frame"));
        }
        self.buf.resize(len, 0);
        self.reader.read_exact(&mut self.buf).await?;
        Ok(&self.buf)
    }

    /// The next binary frame of a `logs.frames` stream (`crate::logframes`): its
    /// bytes, `None` at the frames' end; failing (`TimedOut`) should the daemon be
    /// seen stopped while the frame is awaited.
    ///
    /// # Errors
    /// A read error, an oversized frame, or the daemon stopped.
    pub(crate) async fn next_frame(&mut self, method: &str) -> std::io::Result<Option<&[u8]>> {
        use tokio::io::AsyncReadExt;
        let daemon = self.daemon.clone();
        let mut head = [0u8; 4];
        tokio::select! {
            read = self.reader.read_exact(&mut head) => { read?; }
            why = liveness::watch(&daemon, method, None) => {
                return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, why));
            }
        }
        let len = crate::logframes::length(head);
        if len == 0 {
            return Ok(None);
        }
        if len > crate::logframes::MAX_FRAME_BYTES {
            return Err(std::io::Error::other("the daemon sent an oversized frame"));
        }
        self.buf.resize(len, 0);
        self.reader.read_exact(&mut self.buf).await?;
        Ok(Some(&self.buf))
    }

    /// Sends the binary frames of this connection's log streams straight to
    /// stdout (`crate::logframes::StdoutSink`) rather than handing their text to
    /// the stream's `emit`: only for a caller whose `emit` prints the text
    /// unchanged to stdout (`crate::output::raw`). Nothing changes when stdout is
    /// a terminal.
    pub(crate) fn frames_to_stdout(&mut self) {
        self.stdout = crate::logframes::StdoutSink::new().map(Box::new);
    }

    /// Whether frames go to stdout ([`Client::frames_to_stdout`]).
    pub(crate) fn moves_frames(&self) -> bool {
        self.stdout.is_some()
    }

    /// Moves the next binary frame to stdout ([`Client::frames_to_stdout`]);
    /// `false` at the frames' end. As [`Client::next_frame`], it fails should the
    /// daemon be seen stopped while the frame is awaited.
    ///
    /// # Errors
    /// A read or write error, an oversized frame, or the daemon stopped.
    pub(crate) async fn move_frame(&mut self, method: &str) -> std::io::Result<bool> {
        let Some(sink) = self.stdout.as_mut() else {
            return Err(std::io::Error::other("frames are not moved to stdout"));
        };
        let watch = liveness::watch(&self.daemon, method, None);
        crate::logframes::move_frame(&mut self.reader, watch, sink).await
    }

    /// [`Client::next_message`], failing (`TimedOut`) should the daemon be seen
    /// stopped meanwhile: a stream's next note, which may be long in coming.
    ///
    /// # Errors
    /// As [`Client::next_message`]'s, or the daemon stopped.
    pub(crate) async fn next_note(&mut self, method: &str) -> std::io::Result<Option<Response>> {
        let daemon = self.daemon.clone();
        tokio::select! {
            message = self.next_message() => message,
            why = liveness::watch(&daemon, method, None) => {
                Err(std::io::Error::new(std::io::ErrorKind::TimedOut, why))
            }
        }
    }

    /// Calls `method` and waits for its answer: within [`liveness::deadline_of`]
    /// for a simple call, and never past the moment the daemon is seen stopped.
    ///
    /// # Errors
    /// [`CallError::Rpc`] for an error answer, [`CallError::Io`] when the connection
    /// broke or the daemon did not answer (`TimedOut`, saying why).
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Result<Value, CallError> {
        let daemon = self.daemon.clone();
        let deadline = liveness::deadline_for(method, &params);
        tokio::select! {
            answer = self.call_unwatched(method, params) => answer,
            why = liveness::watch(&daemon, method, deadline) => {
                Err(CallError::Io(std::io::Error::new(std::io::ErrorKind::TimedOut, why)))
            }
        }
    }

    /// [`Client::call`] without the watch.
    async fn call_unwatched(&mut self, method: &str, params: Value) -> Result<Value, CallError> {
        let id = match self.send(method, params).await {
            Ok(id) => id,
            Err(err) => {
                // The daemon may have answered and hung up before reading (a
                // refused peer): its error is still in our receive buffer.
                if let Ok(Some(message)) = self.next_message().await
                    && let Some(error) = message.error
                {
                    return Err(CallError::Rpc(error));
                }
                return Err(CallError::Io(err));
            }
        };
        loop {
            let Some(message) = self.next_message().await.map_err(CallError::Io)? else {
                return Err(CallError::Io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the daemon closed the connection",
                )));
            };
            // An error with a null id answers the request in flight (the daemon
            // could not read its id: oversized line, refused peer).
            let ours = message.id == id || (message.id.is_null() && message.error.is_some());
            if message.method.is_some() || !ours {
                continue;
            }
            if let Some(error) = message.error {
                return Err(CallError::Rpc(error));
            }
            return Ok(message.result.unwrap_or(Value::Null));
        }
    }

    /// Where session `id`'s log ends now: a read far past it answers its end. A
    /// log not created yet (no output so far) is empty: its end is 0, whatever
    /// offset a daemon with no file to clamp the read to echoes back, so a
    /// follower that starts there sees the first byte the job writes.
    ///
    /// # Errors
    /// As [`Client::request`]'s.
    pub(crate) async fn log_end(&mut self, id: &str) -> anyhow::Result<u64> {
        let mut params = herd_protocol::params::FollowParams::new(id, PAST_THE_END);
        params.max_bytes = Some(1);
        let chunk = self
            .ask::<herd_protocol::methods::LogChunk>(&params)
            .await?;
        Ok(Some(chunk.next_byte)
            .filter(|end| *end < PAST_THE_END)
            .unwrap_or(0))
    }

    /// [`Client::call`] with errors mapped to exit codes.
    ///
    /// # Errors
    /// A [`Failure`] with the code the daemon's error maps to.
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.call(method, params)
            .await
            .map_err(CallError::into_anyhow)
    }

    /// Method `M` with typed params; its answer as the daemon wrote it (for a
    /// caller that prints it whole).
    ///
    /// # Errors
    /// As [`Client::request`]'s.
    pub(crate) async fn send_typed<M: Method>(
        &mut self,
        params: &M::Params,
    ) -> anyhow::Result<Value> {
        let params = params_of(params)?;
        self.request(M::NAME, params).await
    }

    /// Method `M` with typed params; its answer read as the protocol's type.
    ///
    /// # Errors
    /// As [`Client::request`]'s, and [`answer_of`]'s.
    pub(crate) async fn ask<M: Method>(&mut self, params: &M::Params) -> anyhow::Result<M::Answer> {
        let answer = self.send_typed::<M>(params).await?;
        answer_of::<M>(answer)
    }
}

/// Marks an error as the daemon gone (a connection that broke or closed, not a
/// refusal nor a stopped daemon): a long-lived client connects again
/// ([`reconnect`]) and carries on.
#[derive(Debug)]
pub(crate) struct Lost;

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the connection to the daemon broke")
    }
}

impl std::error::Error for Lost {}

/// `message` as an unreachable-daemon failure marked [`Lost`].
pub(crate) fn lost(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Lost).context(Failure::new(Code::Unreachable, message))
}

/// What went away, as an error's chain says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gone {
    /// The daemon ([`Lost`]): connect again.
    Daemon,
    /// A far host did not answer (error -32020): the local daemon answered, the
    /// host's door failed (a blip, a far daemon restarting); ask again.
    Host,
}

/// What `err` says went away, if anything.
pub(crate) fn gone(err: &anyhow::Error) -> Option<Gone> {
    err.chain().find_map(|cause| {
        if cause.downcast_ref::<Lost>().is_some() {
            Some(Gone::Daemon)
        } else if cause.downcast_ref::<Failure>().is_some_and(|f| f.host_lost) {
            Some(Gone::Host)
        } else {
            None
        }
    })
}

/// Whether `err` says the daemon went away ([`Lost`]).
pub(crate) fn is_lost(err: &anyhow::Error) -> bool {
    gone(err) == Some(Gone::Daemon)
}

/// How long a long-lived client waits for a daemon to come back.
pub(crate) const RECONNECT_DEADLINE: Duration = Duration::from_secs(30);

/// The longest pause between two tries to connect again.
const RECONNECT_PAUSE_MAX: Duration = Duration::from_secs(1);

/// The pace of a client's tries to get something back (its daemon, a far
/// host): pauses that double up to 1 s, never past a deadline.
#[derive(Debug)]
pub(crate) struct Backoff {
    until: tokio::time::Instant,
    pause: Duration,
}

impl Backoff {
    /// Tries until `until`, the first pause `first`.
    pub(crate) fn new(until: tokio::time::Instant, first: Duration) -> Backoff {
        Backoff {
            until,
            pause: first,
        }
    }

    /// Waits the next pause; false, at once, when it would end at or past the
    /// deadline (the tries are over).
    pub(crate) async fn pause(&mut self) -> bool {
        let now = tokio::time::Instant::now();
        if now + self.pause >= self.until {
            return false;
        }
        let mut tick = tokio::time::interval_at(now + self.pause, self.pause);
        tick.tick().await;
        self.pause = (self.pause * 2).min(RECONNECT_PAUSE_MAX);
        true
    }

    /// `work`, cut off at the deadline (none then).
    pub(crate) async fn bound<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        tokio::time::timeout_at(self.until, work).await.ok()
    }
}

/// Connects again after the daemon went away (a crash, a restart): tries at
/// once, then after pauses that double from 50 ms to 1 s, starting a daemon
/// when none answers, until [`RECONNECT_DEADLINE`].
///
/// # Errors
/// The last failure, once the deadline has passed.
pub(crate) async fn reconnect(home: &Home) -> anyhow::Result<Client> {
    let until = tokio::time::Instant::now() + RECONNECT_DEADLINE;
    let mut pace = Backoff::new(until, Duration::from_millis(50));
    loop {
        let err = match pace.bound(Client::connect(home)).await {
            Some(Ok(client)) => return Ok(client),
            Some(Err(err)) => err,
            None => anyhow::anyhow!("the last try to connect had not finished"),
        };
        if !pace.pause().await {
            return Err(err.context(format!(
                "no daemon came back within {} s",
                RECONNECT_DEADLINE.as_secs()
            )));
        }
        tracing::debug!(error = %format!("{err:#}"), "no daemon yet; trying again");
    }
}

/// Why a call failed.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The daemon answered with an error.
    Rpc(RpcError),
    /// The connection failed.
    Io(std::io::Error),
}

impl CallError {
    /// Whether the daemon did not answer in time, or was seen stopped.
    pub(crate) fn is_unanswered(&self) -> bool {
        matches!(self, CallError::Io(io) if io.kind() == std::io::ErrorKind::TimedOut)
    }

    /// The error with its exit code.
    pub(crate) fn into_anyhow(self) -> anyhow::Error {
        match self {
            CallError::Rpc(rpc) => rpc_failure(rpc),
            CallError::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
                Failure::new(Code::Unreachable, io.to_string()).into()
            }
            CallError::Io(io) if is_broken_connection(&io) => {
                lost(format!("lost the connection to the daemon: {io}"))
            }
            CallError::Io(io) => Failure::new(
                Code::Unreachable,
                format!("lost the connection to the daemon: {io}"),
            )
            .into(),
        }
    }
}

/// Starts a daemon for `home` and connects to it.
async fn autostart(home: &Home) -> anyhow::Result<Client> {
    let unreachable =
        |message: String| -> anyhow::Error { Failure::new(Code::Unreachable, message).into() };
    // A bad config would only kill the new daemon; refuse it here, with exit 2.
    crate::config::Config::load(home)?.check_shim_path()?;
    crate::config::checked_plugins_dir(home)?;
    crate::config::create_home(home)?;
    let log_path = home.daemon_log_path();
    let (exit_tx, mut exit_rx) = tokio::sync::oneshot::channel();
    let child = spawn_daemon(home)
        .map_err(|err| unreachable(format!("failed to start the daemon: {err:#}")))?;
    let mut child_pid = child.id();
    tracing::debug!(pid = child_pid, "daemon started");
    reap_in_background(child, exit_tx);
    // A daemon that lost the home's lock to one that is exiting right now exits 0
    // and nobody serves: another is started, a few times at most.
    let mut restarts_left = 3u32;
    let mut exited_at: Option<Instant> = None;
    let deadline = Instant::now() + START_DEADLINE;
    let mut tick = tokio::time::interval(Duration::from_millis(2));
    let mut exited = None;
    loop {
        tick.tick().await;
        if let Some(client) = Client::try_connect(home).await? {
            return Ok(client);
        }
        if exited.is_none()
            && let Ok(status) = exit_rx.try_recv()
        {
            exited = Some(status);
            // Exit 0 means another daemon holds the home's lock and is still
            // starting; keep retrying. Anything else is a failed start.
            exited_at = Some(Instant::now());
            if status != Some(0) {
                return Err(unreachable(format!(
                    "the daemon exited during start-up ({}); its log {} ends with:\n{}",
                    status.map_or("killed by a signal".to_owned(), |c| format!(
                        "exit code {c}"
                    )),
                    log_path.display(),
                    log_tail(&log_path)
                )));
            }
        }
        if restarts_left > 0
            && exited_at.is_some_and(|at| at.elapsed() > Duration::from_millis(200))
        {
            restarts_left -= 1;
            let (tx, rx) = tokio::sync::oneshot::channel();
            exit_rx = rx;
            exited = None;
            exited_at = None;
            let child = spawn_daemon(home)
                .map_err(|err| unreachable(format!("failed to start the daemon: {err:#}")))?;
            child_pid = child.id();
            tracing::debug!(pid = child_pid, "daemon started again");
            reap_in_background(child, tx);
        }
        if Instant::now() > deadline {
            return Err(unreachable(format!(
                "the daemon (pid {child_pid}) did not open {} within {}s; see {}",
                home.socket_path().display(),
                START_DEADLINE.as_secs(),
                log_path.display()
            )));
        }
    }
}

/// Whether a connection broke (reset, or closed before the answer): the daemon was
/// exiting, not refusing.
/// `hello`'s params.
fn hello_params() -> Value {
    params_of(&herd_protocol::params::HelloParams {
        protocol: Some(u64::from(PROTOCOL_VERSION)),
        client: Some(env!("CARGO_PKG_VERSION").to_owned()),
    })
    .unwrap_or_default()
}

/// A typed params value as the JSON a request carries.
///
/// # Errors
/// When it does not serialise (none of herd-protocol's params types can fail).
pub(crate) fn params_of<P: serde::Serialize>(params: &P) -> anyhow::Result<Value> {
    herd_protocol::to_params(params).context("cannot encode the request's params")
}

/// What a failed handshake comes to: `Ok(())` when the connection broke before the
/// answer (a daemon exiting right now took it: no daemon, the caller starts one),
/// else the error to report.
fn handshake_failure(err: CallError) -> anyhow::Result<()> {
    match err {
        CallError::Io(io) if is_broken_connection(&io) => Ok(()),
        CallError::Rpc(rpc) => Err(rpc_failure(rpc)),
        err @ CallError::Io(_) if err.is_unanswered() => Err(err.into_anyhow()),
        CallError::Io(io) => Err(Failure::new(
            Code::Unreachable,
            format!(
                "the daemon did not complete the handshake: {io}; run `herd doctor`, or `herd shutdown` and retry"
            ),
        )
        .into()),
    }
}

fn is_broken_connection(io: &std::io::Error) -> bool {
    matches!(
        io.kind(),
        std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::BrokenPipe
    )
}

/// Re-executes this binary as a detached daemon for `home`.
fn spawn_daemon(home: &Home) -> anyhow::Result<std::process::Child> {
    let exe = std::env::current_exe().context("cannot find the herd executable")?;
    let logs = home.daemon_log_path();
    if let Some(dir) = logs.parent() {
        home.ensure_dir(dir)?;
    }
    // The daemon opens (and rotates) its log itself once detached; its stdio goes
    // there first, for what it prints before. A log that cannot be opened (a full
    // disk) does not keep the daemon from starting.
    let (out, err) = match crate::config::open_private(&logs, crate::config::Private::Append)
        .and_then(|log| Ok((log.try_clone()?, log)))
    {
        Ok((out, err)) => (out.into(), err.into()),
        Err(error) => {
            tracing::warn!(path = %logs.display(), %error, "the daemon log cannot be opened; starting the daemon without it");
            (std::process::Stdio::null(), std::process::Stdio::null())
        }
    };
    crate::auxiliary::command(exe)
        .args(["serve", "--detached"])
        .env(crate::config::HOME_ENV, home.root())
        .current_dir(home.root())
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .context("failed to execute herd serve")
}

/// Reaps the daemon launcher child so it never lingers as a zombie, reporting its
/// exit code (`None` for a signal) if it ends.
fn reap_in_background(
    mut child: std::process::Child,
    exit_tx: tokio::sync::oneshot::Sender<Option<i32>>,
) {
    std::thread::spawn(move || {
        if let Ok(status) = child.wait() {
            let _ = exit_tx.send(status.code());
        }
    });
}

/// The last lines of the daemon log, for start-up failures.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(10);
    lines[start..].join("\n")
}

#[cfg(test)]
mod tests;
