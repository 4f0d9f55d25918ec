//! Job groups (capability `queue`): `group.add`, `group.set`,
//! `group.list`, `group.rm`, and `queue.latency` (the scheduling-latency figure).

use herd_core::GroupError;
use herd_protocol::answers::{GroupList, GroupRemoved, GroupRow};
use herd_protocol::daemon::QueueLatency;
use herd_protocol::params::GroupParams;
use serde_json::Value;

use super::State;
use super::wire::{parse, to_value};
use crate::protocol::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RpcError};

/// A registry group as the wire's row.
fn row(group: herd_core::GroupRow) -> GroupRow {
    GroupRow {
        name: group.name,
        parallel: group.parallel,
        running: group.running as u64,
        queued: group.queued as u64,
    }
}

fn group_error(err: GroupError) -> RpcError {
    match err {
        GroupError::Store { .. } => RpcError::new(INTERNAL_ERROR, err.to_string()),
        other => RpcError::new(INVALID_PARAMS, other.to_string()),
    }
}

impl State {
    /// The `group.*` and `queue.*` methods.
    pub(super) async fn group(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        match method {
            "group.list" => to_value(GroupList {
                groups: self.registry.group_list().into_iter().map(row).collect(),
            }),
            "queue.latency" => {
                let latency = self.registry.queue_latency();
                to_value(QueueLatency {
                    n: latency.n as u64,
                    p50_us: latency.p50_us,
                    p99_us: latency.p99_us,
                })
            }
            "group.add" | "group.set" => {
                let p: GroupParams = parse(params)?;
                let Some(parallel) = p.parallel else {
                    return Err(RpcError::new(
                        INVALID_PARAMS,
                        "missing parallel: give the group's limit, 1 to 1024",
                    ));
                };
                let row = if method == "group.add" {
                    self.registry.group_add(&p.name, parallel).await
                } else {
                    self.registry.group_set(&p.name, parallel).await
                };
                row.map(self::row).map_err(group_error).and_then(to_value)
            }
            "group.rm" => {
                let p: GroupParams = parse(params)?;
                self.registry.group_rm(&p.name).await.map_err(group_error)?;
                to_value(GroupRemoved { removed: p.name })
            }
            other => Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!(
                    "unknown method `{other}`; the queue methods are group.add, group.set, group.list, group.rm, queue.latency"
                ),
            )),
        }
    }
}
