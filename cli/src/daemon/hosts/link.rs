//! The link's doors: opening one (and refusing a far herd that lacks what the
//! link needs), the shared control door that multiplexes short requests, a long
//! call's door of its own, and the status those leave behind (reachable, or
//! unreachable since when and why).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use herd_protocol::daemon::{HostState, LinkStatus};
use herd_protocol::errors::HostUnreachableData;
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};

use super::{
    Answer, Control, FAR_NEEDS, IDLE_CLOSE, KEPT_DOORS, Link, OPEN_DEADLINE, Outgoing, RETRY_AFTER,
    Sent, Status, lock, since,
};
use crate::protocol;
use crate::protocol::{HOST_UNREACHABLE, Line, MAX_RESPONSE_BYTES, NOT_FOUND, Response, RpcError};
use crate::remote::door;

impl Link {
    /// The error for this host being unreachable (the CLI exits 3).
    pub(super) fn unreachable(&self) -> RpcError {
        let status = lock(&self.status).clone();
        let (since_text, message) = match status {
            Status::Unreachable {
                since: at, message, ..
            } => {
                let (ago, stamp) = since(at);
                (format!("since {stamp} ({ago}s ago)"), message)
            }
            _ => ("just now".to_owned(), "the door closed".to_owned()),
        };
        RpcError::with_data(
            HOST_UNREACHABLE,
            format!("host {} is unreachable {since_text}: {message}", self.name),
            &HostUnreachableData {
                host: self.name.clone(),
            },
        )
    }

    /// Records that the host did not answer: `failed_open` when its door did not
    /// open (commands then fail at once for [`RETRY_AFTER`]), else an open door
    /// closed.
    pub(super) fn mark_unreachable(&self, message: String, failed_open: bool) {
        let mut status = lock(&self.status);
        let (since, failures) = match &*status {
            Status::Unreachable {
                since, failures, ..
            } => (*since, *failures),
            _ => (SystemTime::now(), 0),
        };
        tracing::info!(host = %self.name, %message, "host unreachable");
        *status = Status::Unreachable {
            since,
            tried: failed_open.then(Instant::now),
            failures: failures + u32::from(failed_open),
            message,
        };
    }

    pub(super) fn state(&self) -> HostState {
        let (live, total) = {
            let book = lock(&self.book);
            (
                book.jobs.values().filter(|j| !j.finished).count(),
                book.jobs.len(),
            )
        };
        let mut state = HostState {
            name: self.name.clone(),
            status: LinkStatus::Idle,
            since: None,
            message: None,
            jobs_live: Some(live as u64),
            jobs_known: Some(total as u64),
            answered: None,
            late: false,
        };
        match lock(&self.status).clone() {
            Status::Idle => {}
            Status::Connected { since: at } => {
                state.status = LinkStatus::Connected;
                state.since = Some(since(at).1);
            }
            Status::Unreachable {
                since: at, message, ..
            } => {
                state.status = LinkStatus::Unreachable;
                state.since = Some(since(at).1);
                state.message = Some(message);
            }
        }
        state
    }

    pub(super) fn proxy_env(&self) -> Option<BTreeMap<String, String>> {
        lock(&self.proxy_env).clone()
    }

    /// Whether the far herd (as its last door's hello said) serves `capability`.
    pub(super) fn far_serves(&self, capability: &str) -> bool {
        lock(&self.far_capabilities).iter().any(|c| c == capability)
    }

    /// A spawn request key no other spawn of this home has used: this home's far
    /// owner, this link's start (so a restarted daemon does not reuse a key) and a
    /// count.
    pub(super) fn request_key(&self) -> String {
        let n = self
            .next_key
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let started = self.started_nanos;
        let owner = self.far_owner.trim_start_matches("herd-home-");
        format!("{owner}-{started:x}-{n}")
    }

    /// Opens this host's door and greets the far herd; the failure is recorded
    /// as the host's status.
    pub(super) async fn open(&self) -> Result<door::Door, RpcError> {
        match door::open(&self.name, &self.config, OPEN_DEADLINE).await {
            Ok(door) => {
                // Delivery once needs the far side's leased drains and pending
                // notes; an older far herd is refused, not half used.
                let lacking: Vec<&str> = FAR_NEEDS
                    .iter()
                    .copied()
                    .filter(|c| !door.hello.capabilities.iter().any(|have| have == c))
                    .collect();
                if !lacking.is_empty() {
                    let message = format!(
                        "the far herd ({}) lacks {}; install this version there (`herd hosts install {}`) and restart its daemon",
                        door.hello.daemon,
                        lacking.join(", "),
                        self.name
                    );
                    door.close().await;
                    self.mark_unreachable(message, true);
                    return Err(self.unreachable());
                }
                if let Some(env) = door.hello.proxy_env.clone() {
                    *lock(&self.proxy_env) = Some(env);
                }
                {
                    let mut capabilities = lock(&self.far_capabilities);
                    capabilities.clone_from(&door.hello.capabilities);
                    if door.hello.proxy.as_ref().is_some_and(|p| p.mux) {
                        capabilities.push("proxy.mux".to_owned());
                    }
                }
                let mut status = lock(&self.status);
                if !matches!(*status, Status::Connected { .. }) {
                    *status = Status::Connected {
                        since: SystemTime::now(),
                    };
                }
                Ok(door)
            }
            Err(err) => {
                let text = err.to_string();
                self.mark_unreachable(text.replace('\n', " "), true);
                Err(self.unreachable())
            }
        }
    }

    /// The control connection's sender, opening the door when none is open.
    pub(super) async fn control(
        self: &Arc<Self>,
    ) -> Result<mpsc::UnboundedSender<Outgoing>, RpcError> {
        let mut slot = self.control.lock().await;
        if let Some(control) = slot.as_ref()
            && !control.tx.is_closed()
        {
            return Ok(control.tx.clone());
        }
        *slot = None;
        let tried_just_now = matches!(
            &*lock(&self.status),
            Status::Unreachable { tried: Some(tried), failures, .. }
                if *failures >= 2 && tried.elapsed() < RETRY_AFTER
        );
        if tried_just_now {
            return Err(self.unreachable());
        }
        let door = self.open().await?;
        let (tx, rx) = mpsc::unbounded_channel();
        let (child, reader, writer, stderr) = door.into_parts();
        let link = Arc::clone(self);
        tokio::spawn(async move {
            let Some(why) = serve_control(child, reader, writer, rx).await else {
                tracing::debug!(host = %link.name, "idle control door closed");
                let mut status = lock(&link.status);
                if matches!(*status, Status::Connected { .. }) {
                    *status = Status::Idle;
                }
                return;
            };
            let said = stderr.text();
            let said = said.lines().last().unwrap_or("").trim().to_owned();
            let message = if said.is_empty() {
                why
            } else {
                format!("{why}; the door said: {said}")
            };
            link.mark_unreachable(message, false);
        });
        *slot = Some(Control { tx: tx.clone() });
        Ok(tx)
    }

    /// Calls `method` over the control door; the answer's ids come back qualified.
    pub(super) async fn call(self: &Arc<Self>, method: &str, params: Value) -> Answer {
        let answer = self.qualify(self.call_raw(method, params).await?);
        if matches!(method, "poll" | "kill") && self.remember(&answer) {
            self.save().await;
        }
        Ok(answer)
    }

    /// Calls `method` over the control door, the answer as the far side gave it.
    ///
    /// A request that never left (its door was found dead when it was written,
    /// e.g. killed a moment before and not yet noticed) is sent once more on a new
    /// door, whatever it does: the far side never saw it. A door that closed
    /// after the request was written is ambiguous: a request that changes nothing
    /// when repeated is sent once more, one that starts or writes something is not
    /// (it may have been done) and is answered unreachable.
    pub(super) async fn call_raw(self: &Arc<Self>, method: &str, params: Value) -> Answer {
        // A spawn with a request key is started once by the far herd however
        // often it is sent (`spawn.request_key`).
        let repeatable = !matches!(method, "spawn" | "write" | "submit" | "close" | "restart")
            || (method == "spawn" && params.get("request_key").is_some());
        match self.call_once(method, params.clone()).await {
            Sent::Unsent => {}
            Sent::Answered(Err(err))
                if err.code == HOST_UNREACHABLE && repeatable && !self.open_failed() => {}
            Sent::Answered(answer) => return answer,
        }
        // Sent once more, on a new door.
        match self.call_once(method, params).await {
            Sent::Answered(answer) => answer,
            Sent::Unsent => Err(self.unreachable()),
        }
    }

    /// Whether the last attempt to open the door failed (rather than a door closing).
    pub(super) fn open_failed(&self) -> bool {
        matches!(
            &*lock(&self.status),
            Status::Unreachable { tried: Some(_), .. }
        )
    }

    /// Sends one request over the control door and waits for its answer.
    async fn call_once(self: &Arc<Self>, method: &str, params: Value) -> Sent {
        let tx = match self.control().await {
            Ok(tx) => tx,
            Err(err) => return Sent::Answered(Err(err)),
        };
        let (reply, answer) = oneshot::channel();
        let out = Outgoing {
            method: method.to_owned(),
            params,
            reply,
        };
        if tx.send(out).is_err() {
            return Sent::Unsent;
        }
        // The door's task drops a request's reply unanswered only when it never
        // wrote the request (see `serve_control`).
        let Ok(answer) = answer.await else {
            return Sent::Unsent;
        };
        Sent::Answered(match answer {
            Ok(value) => Ok(value),
            Err(err) if err.code == HOST_UNREACHABLE => Err(self.unreachable()),
            Err(err) => Err(self.far_error(err)),
        })
    }

    /// A channel of the host's mux door, greeted, when its far proxy serves one
    /// (the door opened on first use, and again once it died); none otherwise,
    /// and the caller opens a door of its own.
    pub(super) async fn channel(self: &Arc<Self>) -> Option<super::mux::Channel> {
        if !self.far_serves("proxy.mux") {
            return None;
        }
        let mut slot = self.mux.lock().await;
        let mux = match slot.as_ref().filter(|m| m.alive()) {
            Some(mux) => Arc::clone(mux),
            None => match super::mux::Mux::open(&self.name, &self.config).await {
                Ok(mux) => {
                    *slot = Some(Arc::clone(&mux));
                    mux
                }
                Err(why) => {
                    tracing::debug!(host = %self.name, %why, "no mux door");
                    return None;
                }
            },
        };
        let mut channel = mux.channel()?;
        match tokio::time::timeout(OPEN_DEADLINE, channel.hello()).await {
            Ok(Ok(())) => Some(channel),
            Ok(Err(why)) => {
                tracing::debug!(host = %self.name, %why, "a mux channel was refused");
                *slot = None;
                None
            }
            Err(_) => {
                *slot = None;
                None
            }
        }
    }

    /// A long call (`wait`) on a channel of the mux door, else on a door of its own: one kept from an earlier long
    /// call when there is one (over ssh a new door is a new connection), else a
    /// new one. The door is kept again once the call is answered; a call whose
    /// local client leaves drops its door, which kills it and ends the far call.
    pub(super) async fn long_call(self: &Arc<Self>, method: &str, params: Value) -> Answer {
        if let Some(mut channel) = self.channel().await {
            match channel.call(method, params.clone()).await {
                Ok(value) => {
                    let answer = self.qualify(value);
                    if self.remember(&answer) {
                        self.save().await;
                    }
                    return Ok(answer);
                }
                // The mux door died under it: a wait changes nothing, so it is
                // asked again below on a door of its own.
                Err(err) if err.code == HOST_UNREACHABLE => {}
                Err(err) => return Err(self.far_error(err)),
            }
        }
        let (door, answer) = match self.take_kept_door() {
            Some(mut door) => {
                let answer = door.call(method, params.clone()).await;
                if answer
                    .as_ref()
                    .is_err_and(|e| crate::exit::code_of(e) == crate::exit::Code::Unreachable)
                {
                    // It died while kept. A wait changes nothing, so it is
                    // asked again on a new door.
                    drop(door);
                    self.call_on_new_door(method, params).await?
                } else {
                    (door, answer)
                }
            }
            None => self.call_on_new_door(method, params).await?,
        };
        match answer {
            Ok(value) => {
                self.keep_door(door);
                let answer = self.qualify(value);
                if self.remember(&answer) {
                    self.save().await;
                }
                Ok(answer)
            }
            Err(err) => {
                door.close().await;
                Err(self.long_call_error(&err))
            }
        }
    }

    async fn call_on_new_door(
        self: &Arc<Self>,
        method: &str,
        params: Value,
    ) -> Result<(door::Door, anyhow::Result<Value>), RpcError> {
        let mut door = self.open().await?;
        let answer = door.call(method, params).await;
        Ok((door, answer))
    }

    /// The error of a long call that failed.
    fn long_call_error(&self, err: &anyhow::Error) -> RpcError {
        match crate::exit::code_of(err) {
            crate::exit::Code::Unreachable => {
                self.mark_unreachable(format!("{err:#}"), false);
                self.unreachable()
            }
            code => RpcError::new(
                if code == crate::exit::Code::Usage {
                    NOT_FOUND
                } else {
                    protocol::INTERNAL_ERROR
                },
                format!("host {}: {err:#}", self.name),
            ),
        }
    }

    /// A door kept by an earlier long call and not idle too long, if any.
    fn take_kept_door(&self) -> Option<door::Door> {
        let mut kept = lock(&self.kept_doors);
        kept.retain(|(_, at)| at.elapsed() < IDLE_CLOSE);
        kept.pop().map(|(door, _)| door)
    }

    /// Keeps `door` for the next long call: at most [`KEPT_DOORS`], each closed
    /// after [`IDLE_CLOSE`] unused.
    fn keep_door(self: &Arc<Self>, door: door::Door) {
        {
            let mut kept = lock(&self.kept_doors);
            if kept.len() >= KEPT_DOORS {
                drop(kept);
                tokio::spawn(door.close());
                return;
            }
            kept.push((door, Instant::now()));
        }
        let link = Arc::downgrade(self);
        tokio::spawn(async move {
            #[expect(
                clippy::disallowed_methods,
                reason = "a timer, not synchronisation: a kept door is closed once idle for IDLE_CLOSE"
            )]
            tokio::time::sleep(IDLE_CLOSE).await;
            let Some(link) = link.upgrade() else { return };
            let expired: Vec<door::Door> = {
                let mut kept = lock(&link.kept_doors);
                let (old, fresh): (Vec<_>, Vec<_>) = std::mem::take(&mut *kept)
                    .into_iter()
                    .partition(|(_, at)| at.elapsed() >= IDLE_CLOSE);
                *kept = fresh;
                old.into_iter().map(|(door, _)| door).collect()
            };
            for door in expired {
                door.close().await;
            }
        });
    }

    /// A far error with the host named and its ids qualified.
    pub(super) fn far_error(&self, mut err: RpcError) -> RpcError {
        err.message = format!("host {}: {}", self.name, err.message);
        if let Some(Value::Array(matches)) = err.data.as_mut().and_then(|d| d.get_mut("matches")) {
            for m in matches.iter_mut() {
                if let Some(id) = m.as_str() {
                    *m = Value::from(format!("{}:{id}", self.name));
                }
            }
        }
        err
    }
}

/// One request line.
pub(super) fn request_line(id: u64, method: &str, params: Value) -> Vec<u8> {
    let request = crate::protocol::Request {
        jsonrpc: "2.0".into(),
        id: Some(Value::from(id)),
        method: method.to_owned(),
        params,
    };
    // Through a `Value`, as the link always wrote it: its keys sorted (`id` first,
    // which far stand-ins read). A request of strings and `Value`s always serialises.
    let mut line = serde_json::to_value(&request)
        .map(|v| v.to_string().into_bytes())
        .unwrap_or_default();
    line.push(b'\n');
    line
}

/// Serves one control door until it or its senders close, or it has been idle
/// for [`IDLE_CLOSE`] (`None`); says why it ended. Every request written and
/// still unanswered then is answered as unreachable; one that was never written
/// (still queued, or its write failed) has its reply dropped unanswered, which
/// tells its caller it may send it again.
pub(super) async fn serve_control(
    child: Child,
    mut reader: BufReader<ChildStdout>,
    mut writer: ChildStdin,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
) -> Option<String> {
    // The door dies with this task (killed on drop).
    let _child = child;
    let mut pending: HashMap<u64, oneshot::Sender<Answer>> = HashMap::new();
    let mut next: u64 = 1_000;
    let mut buf = Vec::new();
    let lost = |pending: &mut HashMap<u64, oneshot::Sender<Answer>>| {
        for (_, reply) in pending.drain() {
            let _ = reply.send(Err(RpcError::new(HOST_UNREACHABLE, "the door closed")));
        }
    };
    let mut idle = tokio::time::interval(IDLE_CLOSE / 4);
    let mut active = Instant::now();
    loop {
        tokio::select! {
            _ = idle.tick() => {
                if pending.is_empty() && active.elapsed() >= IDLE_CLOSE {
                    return None;
                }
            }
            outgoing = rx.recv() => {
                active = Instant::now();
                let Some(out) = outgoing else {
                    return Some("the link was closed".into());
                };
                next += 1;
                let line = request_line(next, &out.method, out.params);
                if let Err(err) = writer.write_all(&line).await {
                    // Never written: closing the queue first makes the caller's
                    // retry open a new door; dropping the reply unanswered tells
                    // it the far side never saw the request.
                    rx.close();
                    drop(out.reply);
                    lost(&mut pending);
                    return Some(format!("the door closed: {err}"));
                }
                pending.insert(next, out.reply);
            }
            read = protocol::read_line(&mut reader, &mut buf, MAX_RESPONSE_BYTES) => {
                match read {
                    Ok(Line::Complete) => {}
                    Ok(Line::TooLong) => continue,
                    Ok(Line::Eof) => {
                        lost(&mut pending);
                        return Some("the door closed".into());
                    }
                    Err(err) => {
                        lost(&mut pending);
                        return Some(format!("the door failed: {err}"));
                    }
                }
                active = Instant::now();
                let Ok(message) = serde_json::from_slice::<Response>(&buf) else {
                    continue;
                };
                let Some(id) = message.id.as_u64() else { continue };
                if let Some(reply) = pending.remove(&id) {
                    let answer = match message.error {
                        Some(err) => Err(err),
                        None => Ok(message.result.unwrap_or(Value::Null)),
                    };
                    let _ = reply.send(answer);
                }
            }
        }
    }
}
