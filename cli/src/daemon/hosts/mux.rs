//! Far streams and long calls on one door: the far proxy's mux mode
//! (`remote/proxy/mux.rs`). A link whose far proxy says `mux: true` keeps one
//! such door; each `logs.follow`, `logs.dump` or `wait` gets a channel of it (its
//! own connection to the far daemon, greeted with `hello`) instead of a door of
//! its own, so over ssh no new connection is made per stream. A channel dropped
//! (its local client left) is closed, which ends the far stream or wait; the
//! door dying closes every channel, whose callers then see the host unreachable
//! as a dying door of their own would show it. A mux door with no channel open
//! for [`IDLE_CLOSE`] is closed; the next channel opens another.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use herd_core::lock_order::{Mutex, rank};

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::{IDLE_CLOSE, lock};
use crate::config::HostConfig;
use crate::protocol::{self, Line, MAX_RESPONSE_BYTES, Response, RpcError};
use crate::remote::door;

/// One mux door.
#[derive(Debug)]
pub(super) struct Mux {
    /// Framed lines to write to the door.
    writer: mpsc::UnboundedSender<Vec<u8>>,
    /// Each open channel's inbox, bounded ([`INBOX_LINES`]).
    channels: Mutex<HashMap<u64, mpsc::Sender<Vec<u8>>>, { rank::DAEMON_MUX_CHANNELS }>,
    next: AtomicU64,
    dead: AtomicBool,
}

/// One channel: a connection to the far daemon through the mux door.
#[derive(Debug)]
pub(super) struct Channel {
    id: u64,
    mux: Arc<Mux>,
    inbox: mpsc::Receiver<Vec<u8>>,
}

/// How many far lines a channel's inbox holds. The reader waits when one is
/// full, so a slow local client stops the door's reading (and through ssh the
/// far side's writing) instead of the daemon buffering a chatty far stream; the
/// price is head-of-line blocking: the door's other channels wait with it.
const INBOX_LINES: usize = 64;

impl Mux {
    /// Starts host `name`'s door in mux mode.
    pub(super) async fn open(name: &str, config: &HostConfig) -> Result<Arc<Mux>, String> {
        let mut child = door::command(name, config)
            .spawn()
            .map_err(|e| format!("cannot start the door: {e}"))?;
        let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("the door has no stdio".into());
        };
        let _stderr = door::StderrTail::follow(child.stderr.take());
        stdin
            .write_all(crate::remote::MUX_LINE)
            .await
            .map_err(|e| format!("the door closed: {e}"))?;
        let (writer, mut outgoing) = mpsc::unbounded_channel::<Vec<u8>>();
        let mux = Arc::new(Mux {
            writer,
            channels: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            dead: AtomicBool::new(false),
        });
        let host = name.to_owned();
        let weak = Arc::downgrade(&mux);
        // The writer owns the door: it is killed when the mux is dropped (its
        // sender with it), the door stops taking lines, or no channel was open
        // for IDLE_CLOSE (as an idle control door is closed).
        let idle = Weak::clone(&weak);
        tokio::spawn(async move {
            let _child = child;
            loop {
                let next = tokio::time::timeout(IDLE_CLOSE, outgoing.recv()).await;
                let bytes = match next {
                    Ok(Some(bytes)) => bytes,
                    Ok(None) => break,
                    Err(_) => {
                        let Some(mux) = idle.upgrade() else { break };
                        if lock(&mux.channels).is_empty() {
                            mux.dead.store(true, Ordering::SeqCst);
                            break;
                        }
                        continue;
                    }
                };
                if stdin.write_all(&bytes).await.is_err() {
                    break;
                }
            }
            tracing::debug!(host, "mux door closed");
        });
        tokio::spawn(read(weak, stdout));
        Ok(mux)
    }

    /// Whether the door still serves.
    pub(super) fn alive(&self) -> bool {
        !self.dead.load(Ordering::SeqCst) && !self.writer.is_closed()
    }

    /// A new channel; none when the door is dead.
    pub(super) fn channel(self: &Arc<Self>) -> Option<Channel> {
        if !self.alive() {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, inbox) = mpsc::channel(INBOX_LINES);
        lock(&self.channels).insert(id, tx);
        Some(Channel {
            id,
            mux: Arc::clone(self),
            inbox,
        })
    }
}

/// Reads the door's lines and hands each to its channel; at the end every
/// channel is closed.
async fn read(weak: Weak<Mux>, stdout: tokio::process::ChildStdout) {
    let mut reader = tokio::io::BufReader::with_capacity(256 * 1024, stdout);
    let mut buf = Vec::new();
    loop {
        match protocol::read_line(&mut reader, &mut buf, MAX_RESPONSE_BYTES + 32).await {
            Ok(Line::Complete) => {}
            Ok(Line::TooLong) => continue,
            Ok(Line::Eof) | Err(_) => break,
        }
        let Some(mux) = weak.upgrade() else { return };
        let Some(space) = buf.iter().position(|b| *b == b' ') else {
            continue;
        };
        let Some(id) = std::str::from_utf8(&buf[..space])
            .ok()
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let payload = &buf[space + 1..];
        if payload == b"." {
            lock(&mux.channels).remove(&id);
            continue;
        }
        let Some(tx) = lock(&mux.channels).get(&id).cloned() else {
            continue;
        };
        // Not holding the mux: a channel dropped meanwhile ends this wait.
        drop(mux);
        if tx.send(payload.to_vec()).await.is_err()
            && let Some(mux) = weak.upgrade()
        {
            lock(&mux.channels).remove(&id);
        }
    }
    if let Some(mux) = weak.upgrade() {
        mux.dead.store(true, Ordering::SeqCst);
        lock(&mux.channels).clear();
    }
}

impl Channel {
    /// Sends one line (without its `\n`); false when the door is gone.
    pub(super) fn send(&self, line: &[u8]) -> bool {
        let mut framed = format!("{} ", self.id).into_bytes();
        framed.extend_from_slice(line.strip_suffix(b"\n").unwrap_or(line));
        framed.push(b'\n');
        self.mux.writer.send(framed).is_ok()
    }

    /// The next line (without its `\n`); none once the channel or the door closed.
    pub(super) async fn recv(&mut self) -> Option<Vec<u8>> {
        self.inbox.recv().await
    }

    /// Greets the far daemon on this channel.
    ///
    /// # Errors
    /// Why not: the door gone, or the far daemon refusing.
    pub(super) async fn hello(&mut self) -> Result<(), String> {
        self.call("hello", door::hello_params())
            .await
            .map(drop)
            .map_err(|e| e.message)
    }

    /// Calls `method` and waits for its answer (notes are skipped).
    ///
    /// # Errors
    /// The far error, or [`protocol::HOST_UNREACHABLE`] when the channel closed.
    pub(super) async fn call(&mut self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.mux.next.fetch_add(1, Ordering::Relaxed);
        let gone = || RpcError::new(protocol::HOST_UNREACHABLE, "the mux door closed");
        let request = crate::protocol::Request {
            jsonrpc: "2.0".into(),
            id: Some(Value::from(id)),
            method: method.to_owned(),
            params,
        };
        // Through a `Value`, as the link writes every request (keys sorted).
        let line = serde_json::to_value(&request).map_or_else(|_| String::new(), |v| v.to_string());
        if !self.send(line.as_bytes()) {
            return Err(gone());
        }
        loop {
            let line = self.recv().await.ok_or_else(gone)?;
            let Ok(message) = serde_json::from_slice::<Response>(&line) else {
                continue;
            };
            if message.method.is_some() || message.id != id {
                continue;
            }
            return match message.error {
                Some(err) => Err(err),
                None => Ok(message.result.unwrap_or(Value::Null)),
            };
        }
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        lock(&self.mux.channels).remove(&self.id);
        let _ = self
            .mux
            .writer
            .send(format!("{} .\n", self.id).into_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A far stream far longer than a channel's inbox reaches its slow reader
    /// whole and in order: the door's reader waits for room, dropping nothing.
    #[tokio::test]
    async fn mux_inbox_is_bounded_and_loses_nothing() {
        let mut far = tokio::process::Command::from(crate::auxiliary::command("sh"))
            .args(["-c", "seq 1 20000 | sed 's/^/1 /'"])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = far.stdout.take().unwrap();
        let (writer, _outgoing) = mpsc::unbounded_channel();
        let mux = Arc::new(Mux {
            writer,
            channels: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            dead: AtomicBool::new(false),
        });
        let mut channel = mux.channel().unwrap();
        tokio::spawn(read(Arc::downgrade(&mux), stdout));
        herd_test_support::wait::until(
            std::time::Duration::from_secs(10),
            "the channel's inbox full",
            || channel.inbox.len() >= INBOX_LINES,
        )
        .await;
        for n in 1..=20000u32 {
            assert!(channel.inbox.len() <= INBOX_LINES);
            let line = channel.recv().await.unwrap();
            assert_eq!(line, n.to_string().into_bytes());
        }
    }
}
