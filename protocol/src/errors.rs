//! The `data` of the daemon's errors ([`crate::RpcError::data`]), by code: what a
//! client may read beyond the message. [`crate::RpcError::with_data`] builds one.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `NOT_FOUND`'s data: the sessions an ambiguous id or name matched (empty when
/// it matched none).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NotFoundData {
    /// The ids it matched.
    #[serde(default)]
    pub matches: Vec<String>,
}

/// `NOT_FOUND`'s data for a host that is not configured (capability `hosts`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UnknownHostData {
    /// The hosts that are configured.
    #[serde(default)]
    pub hosts: Vec<String>,
}

/// `REFUSED`'s data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RefusedData {
    /// Why: `not_a_child`, `not_the_parent`, `cap_reached`, `missing_purpose`,
    /// `not_running_owned`, `not_found` or `refused`.
    pub reason: String,
}

/// `DISPATCH_FAILED`'s data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DispatchFailedData {
    /// True when the host, not the job, is at fault.
    pub infrastructure: bool,
}

/// `HOST_UNREACHABLE`'s data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HostUnreachableData {
    /// The far host that does not answer.
    pub host: String,
}

/// The self-kill guard's verdict: `GUARDED`'s data, and what `herd guard check
/// --json` prints. Every field is written, `null` when it does not apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GuardVerdict {
    /// `block` or `allow`.
    pub verdict: String,
    /// The rule that blocked it (kebab-case).
    #[serde(default)]
    pub rule: Option<String>,
    /// What the rule would have hit (a blocked command's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Why it is blocked.
    #[serde(default)]
    pub reason: Option<String>,
    /// What to do instead.
    #[serde(default)]
    pub remedy: Option<String>,
}

impl crate::RpcError {
    /// An error with `data` (one of this module's types).
    pub fn with_data<D: Serialize>(code: i64, message: impl Into<String>, data: &D) -> Self {
        crate::RpcError {
            code,
            message: message.into(),
            // These types hold only strings, numbers and flags: they always serialise.
            data: serde_json::to_value(data).ok(),
        }
    }
}
