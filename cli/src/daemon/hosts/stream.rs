//! A far stream (`logs.follow`, `logs.dump`) on a door of its own, relayed to
//! the local client through its `Outlet`: notes that name no session pass as the
//! far side wrote them ([`Outlet::pass`]), the others get their ids qualified.

use std::sync::Arc;

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::link::request_line;
use super::{Link, RemoteStream};
use crate::daemon::connection::Outlet;
use crate::protocol;
use crate::protocol::{Line, MAX_RESPONSE_BYTES, Response, RpcError};

/// Where a far stream's lines come from (a far `logs.follow`, the events
/// door's `events.follow`): a channel of the host's mux door, or a door of its
/// own (killed when dropped).
pub(super) enum Source {
    Channel(super::mux::Channel),
    Door(Box<OwnDoor>),
}

/// A stream's door of its own: its stdout, and its stdin and child kept (the
/// door is killed when they drop).
pub(super) struct OwnDoor {
    reader: tokio::io::BufReader<tokio::process::ChildStdout>,
    _writer: tokio::process::ChildStdin,
    _child: tokio::process::Child,
}

impl Source {
    /// Sends `request` (a framed request line) on a channel of `link`'s mux door
    /// when its far proxy serves one, else on a door of its own.
    pub(super) async fn open(link: &Arc<Link>, request: &[u8]) -> Result<Source, RpcError> {
        if let Some(channel) = link.channel().await
            && channel.send(request)
        {
            return Ok(Source::Channel(channel));
        }
        let door = link.open().await?;
        let (child, reader, mut writer, _stderr) = door.into_parts();
        if writer.write_all(request).await.is_err() {
            return Err(link.unreachable());
        }
        Ok(Source::Door(Box::new(OwnDoor {
            reader,
            _writer: writer,
            _child: child,
        })))
    }

    /// The next line into `buf`; false once the far side closed.
    pub(super) async fn next(&mut self, buf: &mut Vec<u8>) -> bool {
        match self {
            Source::Channel(channel) => match channel.recv().await {
                Some(line) => {
                    *buf = line;
                    true
                }
                None => false,
            },
            Source::Door(door) => loop {
                match protocol::read_line(&mut door.reader, buf, MAX_RESPONSE_BYTES).await {
                    Ok(Line::Complete) => return true,
                    Ok(Line::TooLong) => {}
                    Ok(Line::Eof) | Err(_) => return false,
                }
            },
        }
    }
}

impl RemoteStream {
    /// Starts the far stream: on a channel of the mux door when the far proxy
    /// serves one, else on a door of its own.
    async fn start(&self) -> Result<Source, RpcError> {
        let request = request_line(2, &self.method, self.params.clone());
        Source::open(&self.link, &request).await
    }

    /// Runs a far stream (`logs.follow`), relaying its notes and its final
    /// answer (ids qualified) to the local client, until either side ends. The
    /// channel or door is closed when this returns, so a local client that leaves
    /// ends the far stream.
    pub(crate) async fn run(self, mut outlet: Outlet<'_>) {
        let mut source = match self.start().await {
            Ok(source) => source,
            Err(err) => return outlet.answer(Err(err)).await,
        };
        let mut buf = Vec::new();
        loop {
            let read = tokio::select! {
                read = source.next(&mut buf) => read,
                () = outlet.left() => return,
            };
            if !read {
                self.link
                    .mark_unreachable("the door closed during a stream".into(), false);
                return outlet.answer(Err(self.link.unreachable())).await;
            }
            // A note that names no session (a `log` note: output only) is passed
            // on as the far side wrote it: no parse, no copy through a Value.
            if memchr::memmem::find(&buf, b"session_id").is_none() {
                match outlet.pass(&mut buf).await {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(_) => return,
                }
            }
            let Ok(message) = serde_json::from_slice::<Response>(&buf) else {
                continue;
            };
            if let Some(method) = &message.method {
                let params = self.link.qualify(message.params.unwrap_or(Value::Null));
                if outlet.note(method, params).await.is_err() {
                    return;
                }
                continue;
            }
            let answer = match message.error {
                Some(err) => Err(self.link.far_error(err)),
                None => Ok(self.link.qualify(message.result.unwrap_or(Value::Null))),
            };
            return outlet.answer(answer).await;
        }
    }
}
