//! Acknowledged drains over the socket.
//!
//! `drain` with `"lease": true` answers the owner's events with a lease number and
//! keeps them on this connection: `drain.ack` delivers them for good, `drain.release`
//! (or the connection closing, or the daemon dying) puts them back in the owner's
//! queue for the next drain. A plain `drain` is acknowledged at once, as protocol 1
//! always did.

use std::collections::HashMap;

use herd_core::{Drained, Event};
use herd_protocol::answers::{AckAnswer, LeaseAckAnswer, ReleaseAnswer};
use herd_protocol::events::DrainAnswer;
use herd_protocol::params::{AckParams, DrainParams, LeaseParams};
use serde_json::Value;

use super::State;
use super::wire::{parse, to_value};
use crate::protocol::{INTERNAL_ERROR, INVALID_PARAMS, RpcError};

/// The most unacknowledged drains one connection may hold.
const MAX_LEASES: usize = 64;

/// The drains one connection holds unacknowledged. Dropped with the connection,
/// which returns their events to their queues.
#[derive(Debug, Default)]
pub(crate) struct Leases {
    next: u64,
    held: HashMap<u64, Drained>,
}

/// The most ids one `events.ack` may name.
const MAX_ACK_IDS: usize = 10_000;

/// The longest event id `events.ack` takes (a qualified session id and its detail).
const MAX_ACK_ID_BYTES: usize = 512;

impl Leases {
    /// Answers `method` when it is one of the drain methods; `None` otherwise.
    pub(crate) async fn handle(
        &mut self,
        state: &State,
        method: &str,
        params: &Value,
    ) -> Option<Result<Value, RpcError>> {
        Some(match method {
            "drain" => match parse::<DrainParams>(params.clone()) {
                Ok(p) => self.drain(state, p).await,
                Err(err) => Err(err),
            },
            "drain.ack" => match parse::<LeaseParams>(params.clone())
                .and_then(|p| self.settle(p.lease))
            {
                // The ledger write (SQLite, fsync) runs on the blocking pool.
                Ok(lease) => tokio::task::spawn_blocking(move || lease.acknowledge().len())
                    .await
                    .map_err(|err| {
                        RpcError::new(INTERNAL_ERROR, format!("the acknowledgement failed: {err}"))
                    })
                    .and_then(|n| {
                        to_value(LeaseAckAnswer {
                            acknowledged: n as u64,
                        })
                    }),
                Err(err) => Err(err),
            },
            "events.ack" => match parse::<AckParams>(params.clone()).and_then(check_ack) {
                Ok(p) => self.ack_ids(state, p).await,
                Err(err) => Err(err),
            },
            "drain.release" => parse::<LeaseParams>(params.clone()).and_then(|p| {
                let lease = self.settle(p.lease)?;
                to_value(ReleaseAnswer {
                    released: lease.events().len() as u64,
                })
            }),
            _ => return None,
        })
    }

    async fn drain(&mut self, state: &State, p: DrainParams) -> Result<Value, RpcError> {
        let is_answered = |e: &Event| {
            matches!(e, Event::Completion { .. })
                && e.session_id()
                    .is_some_and(|id| p.answered.iter().any(|a| a == id.as_str()))
        };
        let registry = state.registry().clone();
        if !p.lease {
            // Taking and marking delivered (SQLite) run on the blocking pool.
            let owner = p.owner.clone();
            let mut events = tokio::task::spawn_blocking(move || registry.drain(&owner))
                .await
                .map_err(|err| RpcError::new(INTERNAL_ERROR, format!("the drain failed: {err}")))?;
            events.retain(|e| !is_answered(e));
            return to_value(drained(&events, None));
        }
        if self.held.len() >= MAX_LEASES {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!(
                    "this connection holds {MAX_LEASES} unacknowledged drains, the most it may; \
                     settle one with drain.ack or drain.release first"
                ),
            ));
        }
        let answered = p.answered.clone();
        let owner = p.owner.clone();
        let drained = tokio::task::spawn_blocking(move || {
            let mut drained = registry.take(&owner);
            drained.acknowledge_where(|e| {
                matches!(e, Event::Completion { .. })
                    && e.session_id()
                        .is_some_and(|id| answered.iter().any(|a| a == id.as_str()))
            });
            drained
        })
        .await
        .map_err(|err| RpcError::new(INTERNAL_ERROR, format!("the drain failed: {err}")))?;
        if drained.events().is_empty() {
            return to_value(self::drained(drained.events(), None));
        }
        self.next += 1;
        let answer = self::drained(drained.events(), Some(self.next));
        self.held.insert(self.next, drained);
        to_value(answer)
    }

    /// `events.ack {"owner", "ids"}` (capability `events.ack`): the client has handed
    /// these events on. This connection's leases let go of them, and the registry
    /// marks the completions among them delivered in one transaction and takes them
    /// out of the owner's queue, whichever daemon leased them first (a client whose
    /// daemon died between its print and its acknowledgement finishes here).
    async fn ack_ids(&mut self, state: &State, p: AckParams) -> Result<Value, RpcError> {
        let wanted: std::collections::HashSet<&str> = p.ids.iter().map(String::as_str).collect();
        let mut n_leased = 0;
        for lease in self.held.values_mut() {
            if lease.owner() == p.owner {
                n_leased += lease.settle_where(|e| wanted.contains(e.event_id().as_str()));
            }
        }
        self.held.retain(|_, lease| !lease.events().is_empty());
        let registry = state.registry().clone();
        let ack = tokio::task::spawn_blocking(move || registry.acknowledge_ids(&p.owner, &p.ids))
            .await
            .map_err(|err| {
                RpcError::new(INTERNAL_ERROR, format!("the acknowledgement failed: {err}"))
            })?;
        // Not written (a full disk): held and written again later; only a restart
        // before that delivers them again.
        to_value(AckAnswer {
            acknowledged: (n_leased + ack.n_dequeued) as u64,
            completions: ack.n_completions as u64,
            written: ack.committed,
        })
    }

    fn settle(&mut self, lease: u64) -> Result<Drained, RpcError> {
        self.held.remove(&lease).ok_or_else(|| {
            RpcError::new(
                INVALID_PARAMS,
                format!(
                    "no drain lease {lease} on this connection: a lease lives only on the connection \
                     that took it, and only until it is acknowledged or released"
                ),
            )
        })
    }
}

/// Refuses an `events.ack` outside its ranges.
fn check_ack(p: AckParams) -> Result<AckParams, RpcError> {
    if p.ids.len() > MAX_ACK_IDS {
        return Err(RpcError::new(
            INVALID_PARAMS,
            format!(
                "events.ack names {} ids; at most {MAX_ACK_IDS} fit in one, so send the rest in another",
                p.ids.len()
            ),
        ));
    }
    if let Some(long) = p
        .ids
        .iter()
        .find(|id| id.is_empty() || id.len() > MAX_ACK_ID_BYTES)
    {
        return Err(RpcError::new(
            INVALID_PARAMS,
            format!(
                "events.ack: an id must be 1 to {MAX_ACK_ID_BYTES} bytes, as events carry them in `event_id`; got {} bytes",
                long.len()
            ),
        ));
    }
    Ok(p)
}

/// `drain`'s answer: the events (as the registry writes them, whose fields are
/// herd-protocol's `Event`'s), their rendering, and the lease.
fn drained(events: &[Event], lease: Option<u64>) -> DrainAnswer<Value> {
    let rendered = if events.is_empty() {
        String::new()
    } else {
        herd_core::render_events(events)
    };
    DrainAnswer {
        events: events.iter().map(Event::to_json).collect(),
        rendered,
        lease,
    }
}
