//! A far stream (`logs.follow`, `logs.dump`) on a door of its own, relayed to
//! the local client through its `Outlet`: notes that name no session pass as the
//! far side wrote them ([`Outlet::pass`]), the others get their ids qualified.

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::RemoteStream;
use super::link::request_line;
use crate::daemon::connection::Outlet;
use crate::protocol;
use crate::protocol::{Line, MAX_RESPONSE_BYTES, Response};

impl RemoteStream {
    /// Runs a far stream (`logs.follow`) on a door of its own, relaying its notes
    /// and its final answer (ids qualified) to the local client, until either
    /// side ends. The door is killed when this returns, so a local client that
    /// leaves ends the far stream.
    pub(crate) async fn run(self, mut outlet: Outlet<'_>) {
        let door = match self.link.open().await {
            Ok(door) => door,
            Err(err) => return outlet.answer(Err(err)).await,
        };
        let (_child, mut far, mut far_in, _stderr) = door.into_parts();
        if far_in
            .write_all(&request_line(1, &self.method, self.params))
            .await
            .is_err()
        {
            return outlet.answer(Err(self.link.unreachable())).await;
        }
        let mut buf = Vec::new();
        loop {
            let read = tokio::select! {
                read = protocol::read_line(&mut far, &mut buf, MAX_RESPONSE_BYTES) => read,
                () = outlet.left() => return,
            };
            match read {
                Ok(Line::Complete) => {}
                Ok(Line::TooLong) => continue,
                Ok(Line::Eof) | Err(_) => {
                    self.link
                        .mark_unreachable("the door closed during a stream".into(), false);
                    return outlet.answer(Err(self.link.unreachable())).await;
                }
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
