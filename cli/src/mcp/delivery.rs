//! Notices are delivered when the tool result carrying them has been written.
//!
//! After a tool call, the server takes the owner's queued notices from the daemon
//! as a *lease* (`drain` with `lease: true`) on a connection it keeps, and puts
//! them in the result. [`Acking`] wraps the stdio transport: when the response with
//! that request id has been written to stdout, the lease is acknowledged
//! (`drain.ack`) and the daemon marks them delivered; when the write fails, the
//! connection is dropped and the daemon puts them back in the queue for the next
//! call. A lease whose response never goes out (a cancelled request rmcp does not
//! answer) is let go after [`LEASE_TTL`].
//!
//! Against a daemon without the `drain.lease` capability, the drain is the plain
//! one of protocol 1 (delivered when drained).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::model::{JsonRpcMessage, RequestId};
use rmcp::service::TxJsonRpcMessage;
use rmcp::transport::Transport;

use crate::client::Client;
use herd_protocol::Method;
use herd_protocol::methods::{DrainAck, EventsAck};
use herd_protocol::params::{AckParams, LeaseParams};

/// How long a lease may wait for its response to be written.
const LEASE_TTL: Duration = Duration::from_secs(60);

/// A lease held on its own daemon connection.
#[derive(Debug)]
pub(super) struct Lease {
    pub(super) client: Client,
    pub(super) number: u64,
    /// The owner and the `event_id`s of the leased notices: acknowledged by id
    /// (capability `events.ack`), so a daemon that died after the result went out
    /// is replaced and the next one takes the acknowledgement.
    pub(super) owner: String,
    pub(super) ids: Vec<String>,
    pub(super) home: std::sync::Arc<herd_persistence::Home>,
}

#[derive(Debug)]
struct Held {
    lease: Lease,
    since: Instant,
}

/// Leases waiting for their responses to be written, by request id.
#[derive(Debug, Default)]
pub(super) struct Pending {
    held: Mutex<HashMap<RequestId, Held>>,
}

impl Pending {
    /// Lets go of leases whose responses never went out (a cancelled request):
    /// dropping them returns their notices to the queue. Called on every call.
    pub(super) fn sweep(&self) {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, h| h.since.elapsed() < LEASE_TTL);
    }

    /// Holds `lease` until the response to `request` is written.
    pub(super) fn hold(&self, request: RequestId, lease: Lease) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.insert(
            request,
            Held {
                lease,
                since: Instant::now(),
            },
        );
    }

    /// The response to `request` was written (`written`) or failed.
    fn settle(&self, request: &RequestId, written: bool) {
        let Some(held) = self
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(request)
        else {
            return;
        };
        if !written {
            tracing::warn!("a tool result was not written; its notices go back to the queue");
            return;
        }
        let lease = held.lease;
        tokio::spawn(acknowledge(lease));
    }
}

/// Acknowledges a written lease: by id where the daemon can (on the next daemon,
/// started if none runs, when this one died since the drain), else by lease number.
async fn acknowledge(lease: Lease) {
    let Lease {
        mut client,
        number,
        owner,
        ids,
        home,
    } = lease;
    if !client.hello.serves("events.ack") {
        let params = herd_protocol::to_params(&LeaseParams { lease: number }).unwrap_or_default();
        if let Err(err) = client.call(DrainAck::NAME, params).await {
            // The connection closes with the lease: the notices come again.
            tracing::warn!(error = %err.into_anyhow(), "notices not acknowledged; they will be delivered again");
        }
        return;
    }
    let params = herd_protocol::to_params(&AckParams { owner, ids }).unwrap_or_default();
    let first = client.call(EventsAck::NAME, params.clone()).await;
    let Err(crate::client::CallError::Io(_)) = first else {
        if let Err(err) = first {
            tracing::warn!(error = %err.into_anyhow(), "notices not acknowledged; they will be delivered again");
        }
        return;
    };
    // The daemon went away after the drain: the next one takes the acknowledgement.
    let retried = match Client::connect(&home).await {
        Ok(mut next) => next
            .call(EventsAck::NAME, params)
            .await
            .map_err(crate::client::CallError::into_anyhow),
        Err(err) => Err(err),
    };
    if let Err(err) = retried {
        tracing::warn!(error = %err, "notices not acknowledged; they will be delivered again");
    }
}

/// A transport that settles [`Pending`] leases as responses are written, and
/// answers each line of input that was not JSON with a parse error.
#[derive(Debug)]
pub(super) struct Acking<T> {
    pub(super) inner: T,
    pub(super) pending: Arc<Pending>,
    /// Lines of input that were not JSON (`unparsable.rs`), to answer.
    pub(super) unparsable: tokio::sync::mpsc::UnboundedReceiver<String>,
    /// The handshake's era: a 2025-11-25 client is told of its tasks revision.
    pub(super) era: super::tasks_2025::Era,
}

impl<T> Transport<RoleServer> for Acking<T>
where
    T: Transport<RoleServer>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let request = match &item {
            JsonRpcMessage::Response(response) => Some(response.id.clone()),
            JsonRpcMessage::Error(error) => error.id.clone(),
            _ => None,
        };
        let sent = self
            .inner
            .send(super::tasks_2025::outgoing(item, &self.era));
        let pending = Arc::clone(&self.pending);
        async move {
            let result = sent.await;
            if let Some(request) = request {
                pending.settle(&request, result.is_ok());
            }
            result
        }
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleServer>> {
        loop {
            // A cancelled read keeps its partial line (rmcp's transport), so the
            // error can be sent between two reads.
            let refused = tokio::select! {
                biased;
                refused = self.unparsable.recv() => refused,
                message = self.inner.receive() => return message,
            };
            let Some(why) = refused else {
                return self.inner.receive().await;
            };
            let error = TxJsonRpcMessage::<RoleServer>::error(
                rmcp::model::ErrorData::parse_error(
                    format!("Parse error: a line of input is not JSON ({why})"),
                    None,
                ),
                None,
            );
            if self.inner.send(error).await.is_err() {
                return None;
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
