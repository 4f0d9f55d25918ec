//! How the methods meet the wire: params parsed (named fields only), answers
//! serialised, and herd's errors turned into JSON-RPC errors with a herd code.

use herd_core::{LookupError, SpawnError};
use herd_protocol::answers::StreamEnd;
use herd_protocol::errors::{DispatchFailedData, NotFoundData};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::protocol::{
    DISPATCH_FAILED, GUARDED, INTERNAL_ERROR, INVALID_PARAMS, NOT_FOUND, RpcError,
};

/// Deserialises params, or an `INVALID_PARAMS` error naming the problem.
pub(super) fn parse<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    let params = match params {
        Value::Null => Value::Object(Map::new()),
        Value::Object(_) => params,
        // serde would map an array onto the fields in order: a request that names
        // nothing must not set them by position.
        other => {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!(
                    "invalid params: they must be an object of named fields, not {}",
                    match other {
                        Value::Array(_) => "a positional array",
                        _ => "a bare value",
                    }
                ),
            ));
        }
    };
    serde_json::from_value(params)
        .map_err(|err| RpcError::new(INVALID_PARAMS, format!("invalid params: {err}")))
}

/// Serialises an answer.
pub(super) fn to_value<T: serde::Serialize>(answer: T) -> Result<Value, RpcError> {
    serde_json::to_value(answer).map_err(|err| {
        RpcError::new(
            INTERNAL_ERROR,
            format!("failed to encode the answer: {err}"),
        )
    })
}

/// A lookup failure as a `NOT_FOUND` error.
pub(super) fn lookup_error(err: LookupError) -> RpcError {
    let matches: Vec<String> = match &err {
        LookupError::Ambiguous { matches, .. } => matches.iter().map(ToString::to_string).collect(),
        _ => Vec::new(),
    };
    let mut message = chain(&err);
    if !matches.is_empty() {
        message.push_str(&format!(" (it matches {})", matches.join(", ")));
    }
    RpcError::with_data(NOT_FOUND, message, &NotFoundData { matches })
}

/// A unit enum of herd-core's as the word the wire spells it with (its serde name).
pub(super) fn word<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(word)) => word,
        _ => String::new(),
    }
}

/// A registry error as a JSON-RPC error.
pub(super) fn core_error(err: herd_core::Error) -> RpcError {
    match err {
        herd_core::Error::Lookup(lookup) => lookup_error(lookup),
        herd_core::Error::InvalidArgument { .. } => RpcError::new(INVALID_PARAMS, chain(&err)),
        other => RpcError::new(INTERNAL_ERROR, chain(&other)),
    }
}

/// An error and its causes, joined.
pub(super) fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A spawn's error as the wire carries it.
pub(super) fn spawn_error(err: SpawnError) -> RpcError {
    match err {
        SpawnError::Guarded(block) => RpcError::with_data(
            GUARDED,
            format!("refused by the self-kill guard: {block}"),
            &crate::guard::verdict(Some(&block)),
        ),
        SpawnError::InvalidRequest { field, message } => {
            RpcError::new(INVALID_PARAMS, format!("invalid {field}: {message}"))
        }
        SpawnError::ShuttingDown => RpcError::new(
            crate::protocol::SHUTTING_DOWN,
            SpawnError::ShuttingDown.to_string(),
        ),
        SpawnError::Dispatch(err) => RpcError::with_data(
            DISPATCH_FAILED,
            chain(&err),
            &DispatchFailedData {
                infrastructure: err.is_infrastructure(),
            },
        ),
        err @ SpawnError::DiskFull { .. } => {
            RpcError::new(crate::protocol::DISK_FULL, err.to_string())
        }
        err => RpcError::new(INTERNAL_ERROR, chain(&err)),
    }
}

/// The answer that ends a log stream: where to go on from, and with `result`,
/// how the session ended.
pub(super) fn stream_end(next_byte: u64, result: Option<Value>) -> Result<Value, RpcError> {
    to_value(StreamEnd { next_byte, result })
}
