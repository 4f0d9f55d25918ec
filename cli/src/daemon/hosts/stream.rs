//! A far stream (`logs.follow`, `logs.dump`) on a door of its own, relayed to
//! the local client: notes that name no session pass as the far side wrote them.

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use super::RemoteStream;
use super::link::request_line;
use crate::daemon::connection::write;
use crate::protocol;
use crate::protocol::{Line, MAX_RESPONSE_BYTES, Response};

impl RemoteStream {
    /// Runs a far stream (`logs.follow`) on a door of its own, relaying its notes
    /// and its final answer (ids qualified) to the local client, until either
    /// side ends.
    pub(crate) async fn run(
        self,
        reader: &mut tokio::io::BufReader<OwnedReadHalf>,
        writer: &mut OwnedWriteHalf,
        id: Value,
    ) {
        let door = match self.link.open().await {
            Ok(door) => door,
            Err(err) => {
                let _ = write(writer, &Response::err(id, err)).await;
                return;
            }
        };
        let (_child, mut far, mut far_in, _stderr) = door.into_parts();
        if far_in
            .write_all(&request_line(1, &self.method, self.params))
            .await
            .is_err()
        {
            let _ = write(writer, &Response::err(id, self.link.unreachable())).await;
            return;
        }
        let mut gone = Box::pin(crate::daemon::methods::client_gone(reader));
        let mut buf = Vec::new();
        loop {
            let read = tokio::select! {
                read = protocol::read_line(&mut far, &mut buf, MAX_RESPONSE_BYTES) => read,
                () = &mut gone => return,
            };
            match read {
                Ok(Line::Complete) => {}
                Ok(Line::TooLong) => continue,
                Ok(Line::Eof) | Err(_) => {
                    self.link
                        .mark_unreachable("the door closed during a stream".into(), false);
                    let _ = write(writer, &Response::err(id, self.link.unreachable())).await;
                    return;
                }
            }
            // A note that names no session (a `log` note: output only) is passed
            // on as the far side wrote it: no parse, no copy through a Value.
            if buf.starts_with(NOTE_START) && memchr::memmem::find(&buf, b"session_id").is_none() {
                buf.push(b'\n');
                if writer.write_all(&buf).await.is_err() {
                    return;
                }
                continue;
            }
            let Ok(message) = serde_json::from_slice::<Response>(&buf) else {
                continue;
            };
            if let Some(method) = &message.method {
                let params = self.link.qualify(message.params.unwrap_or(Value::Null));
                if write(writer, &Response::notification(method, params))
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            let response = match message.error {
                Some(err) => Response::err(id, self.link.far_error(err)),
                None => Response::ok(id, self.link.qualify(message.result.unwrap_or(Value::Null))),
            };
            let _ = write(writer, &response).await;
            return;
        }
    }
}

/// How a daemon's stream note begins (`Response::notification` serialised).
pub(super) const NOTE_START: &[u8] = br#"{"jsonrpc":"2.0","id":null,"method":"#;
