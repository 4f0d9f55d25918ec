//! Pushed wake-ups: the owner's notifications as one subscribable resource.
//!
//! `herd://notifications` lists and reads as the owner's pending notifications;
//! reading takes them, as a lease acknowledged once the response is written (like
//! notices in tool results, so each reaches the client once, by whichever comes
//! first). A client that subscribes (`resources/subscribe` before 2026-07-28,
//! `subscriptions/listen` with the URI on 2026-07-28) is sent
//! `notifications/resources/updated` whenever a notification is queued, so it can
//! collect it without waiting for its next tool call. Clients that do not
//! subscribe still get every notice in their next tool result.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleServer;
use rmcp::model::{
    ReadResourceResult, Resource, ResourceContents, ResourceUpdatedNotificationParam,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, Peer};
use tokio_util::sync::CancellationToken;

use herd_protocol::Method;
use herd_protocol::events::Pending;
use herd_protocol::methods as m;
use herd_protocol::params::EventsParams;

use super::Server;
use crate::client::{Client, read_part};

/// The one resource: this server's owner's pending notifications.
pub(super) const NOTIFICATIONS_URI: &str = "herd://notifications";

/// The legacy subscription's follower, stopped by `resources/unsubscribe`.
#[derive(Debug, Default, Clone)]
pub(super) struct Subscription {
    stop: Arc<Mutex<Option<CancellationToken>>>,
}

impl Subscription {
    /// Replaces the running follower (if any) with one stopped by the returned token.
    fn restart(&self) -> CancellationToken {
        let token = CancellationToken::new();
        let old = self
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(token.clone());
        if let Some(old) = old {
            old.cancel();
        }
        token
    }

    fn stop(&self) {
        if let Some(old) = self
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            old.cancel();
        }
    }
}

impl Server {
    pub(super) fn notifications_resource(&self) -> Resource {
        Resource::new(NOTIFICATIONS_URI, "notifications")
            .with_description(format!(
                "The pending notifications of owner `{}` (completions, watch matches, heartbeats). \
                 Reading takes them; subscribe to be told when one is queued.",
                self.owner
            ))
            .with_mime_type("text/plain")
    }

    /// `resources/read` of the notifications: takes them (see the module docs).
    pub(super) async fn read_notifications(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResult, McpError> {
        if uri != NOTIFICATIONS_URI {
            return Err(McpError::resource_not_found(
                format!("no resource {uri}; herd serves {NOTIFICATIONS_URI}"),
                None,
            ));
        }
        let text = match self.notices(None).await {
            Some((rendered, _ids, lease)) => {
                if let Some(lease) = lease {
                    self.pending.hold(context.id.clone(), lease);
                }
                rendered
            }
            None => "no pending notifications".to_owned(),
        };
        Ok(ReadResourceResult::new(vec![ResourceContents::text(
            text,
            NOTIFICATIONS_URI,
        )]))
    }

    /// `resources/subscribe` (before 2026-07-28): follows the owner's queue and
    /// tells `peer` of every rise until unsubscribed or the connection ends.
    pub(super) fn subscribe_legacy(
        &self,
        uri: &str,
        peer: Peer<RoleServer>,
    ) -> Result<(), McpError> {
        if uri != NOTIFICATIONS_URI {
            return Err(McpError::resource_not_found(
                format!("no resource {uri}; herd serves {NOTIFICATIONS_URI}"),
                None,
            ));
        }
        let stop = self.subscription.restart();
        let server = self.clone();
        tokio::spawn(async move {
            server
                .follow_pending(stop, || {
                    let peer = peer.clone();
                    async move {
                        peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(
                            NOTIFICATIONS_URI,
                        ))
                        .await
                        .is_ok()
                    }
                })
                .await;
        });
        Ok(())
    }

    pub(super) fn unsubscribe_legacy(&self) {
        self.subscription.stop();
    }

    /// `subscriptions/listen` (2026-07-28) with the notifications URI.
    pub(super) async fn listen_notifications(&self, context: SubscriptionContext) {
        let stop = CancellationToken::new();
        let follow = self.follow_pending(stop.clone(), || {
            let sink = context.sink().clone();
            async move {
                sink.notify_resource_updated(NOTIFICATIONS_URI)
                    .await
                    .is_ok()
            }
        });
        tokio::select! {
            () = follow => {}
            () = context.cancelled() => stop.cancel(),
        }
    }

    /// Calls `wake` whenever the owner's pending notifications grow, until `stop`,
    /// a `wake` that fails, or the daemon connection ends.
    async fn follow_pending<F, Fut>(&self, stop: CancellationToken, wake: F)
    where
        F: Fn() -> Fut,
        Fut: Future<Output = bool>,
    {
        let Ok(mut client) = Client::connect(&self.home).await else {
            return;
        };
        if !client.hello.serves("events.pending") {
            tracing::debug!("the daemon cannot report pending notifications; no pushed wake-ups");
            return;
        }
        if client
            .send(
                m::EventsFollow::NAME,
                herd_protocol::to_params(&EventsParams {
                    owner: self.owner.as_str().to_owned(),
                    peek: true,
                })
                .unwrap_or_default(),
            )
            .await
            .is_err()
        {
            return;
        }
        // The daemon says `pending` after every event of the owner while anything
        // waits (a job's exit too, queued or not): one wake per rise, so the same
        // waiting notices are not announced again until this server collected some.
        let mut announced: Option<(u64, u64)> = None;
        loop {
            let message = tokio::select! {
                message = client.next_message() => message,
                () = stop.cancelled() => return,
            };
            match message {
                Ok(Some(message)) if message.method.as_deref() == Some("pending") => {
                    // A note whose count does not read wakes all the same: a wake-up
                    // costs a read, a missed one a notice that waits for a tool call.
                    let count = pending_count(message.params.as_ref());
                    let round = self.collected.load(Ordering::Relaxed);
                    if let Some(count) = count
                        && announced.is_some_and(|(before, seen)| seen == round && before >= count)
                    {
                        continue;
                    }
                    announced = count.map(|count| (count, round));
                    if !wake().await {
                        return;
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return,
            }
        }
    }
}

/// The `count` of a `pending` note of `events.follow`, read as herd-protocol's note;
/// `None` (said in the log) when it does not read.
fn pending_count(params: Option<&serde_json::Value>) -> Option<u64> {
    let params = params.unwrap_or(&serde_json::Value::Null);
    match read_part::<Pending>(m::EventsFollow::NAME, "a `pending` note's ", params) {
        Ok(pending) => Some(pending.count),
        Err(err) => {
            tracing::warn!(error = %err, "a pending note without its count");
            None
        }
    }
}
