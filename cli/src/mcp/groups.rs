//! The queue through MCP: `terminal`'s `group`, `after` and
//! `after_ready`, and `process`'s `group_add`, `group_set`, `group_list` and
//! `group_rm` actions.

use herd_protocol::methods as m;
use herd_protocol::params::{GroupParams, NoParams};
use rmcp::model::JsonObject;
use serde_json::Value;

use super::{Answer, Server};

/// A list argument: a comma-separated string or an array of strings.
fn list_arg(args: &JsonObject, key: &str) -> Result<Vec<String>, String> {
    let items: Vec<String> = match args.get(key) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) => s.split(',').map(str::to_owned).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| format!("{key} must be ids or names, comma-separated"))?,
        Some(v) => {
            return Err(format!(
                "{key} must be ids or names, comma-separated (got {v})"
            ));
        }
    };
    Ok(items
        .into_iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect())
}

/// `terminal`'s `group`, `after` and `after_ready`.
pub(super) fn queue_arg(args: &JsonObject) -> Result<herd_core::QueueRequest, String> {
    let group = match args.get("group") {
        None | Some(Value::Null) => None,
        Some(Value::String(g)) => Some(g.clone()),
        Some(v) => return Err(format!("group must be a group's name (got {v})")),
    };
    Ok(herd_core::QueueRequest {
        group,
        after: list_arg(args, "after")?,
        after_ready: list_arg(args, "after_ready")?,
    })
}

impl Server {
    /// `process` `group_*`.
    pub(super) async fn group_action(&self, action: &str, args: &JsonObject) -> Answer {
        let refuse = |error: String| Answer::failed(error);
        if action == "group_list" {
            return self.answer_typed::<m::GroupList>(&NoParams {}).await;
        }
        let Some(name) = args.get("group").and_then(Value::as_str) else {
            return refuse(format!("group is required for {action}: the group's name"));
        };
        match action {
            "group_rm" => {
                self.answer_typed::<m::GroupRm>(&GroupParams {
                    name: name.to_owned(),
                    parallel: None,
                })
                .await
            }
            _ => {
                let parallel = match args.get("parallel").map(Value::as_u64) {
                    Some(Some(n)) if (1..=1024).contains(&n) => n,
                    _ => {
                        return refuse(format!(
                            "parallel is required for {action}: a whole number from 1 to 1024"
                        ));
                    }
                };
                let params = GroupParams {
                    name: name.to_owned(),
                    parallel: Some(parallel),
                };
                if action == "group_add" {
                    self.answer_typed::<m::GroupAdd>(&params).await
                } else {
                    self.answer_typed::<m::GroupSet>(&params).await
                }
            }
        }
    }
}
