//! Reading the daemon's answers as herd-protocol's answer types: a field the
//! protocol requires that is missing, or of another type, is an error naming the
//! method and the field, never an empty value or a silent default.

use herd_protocol::Method;
use serde_json::Value;

/// `answer` read as method `M`'s answer: a field the protocol requires that is
/// missing, or of another type, is an error naming the method and the field, never
/// an empty value. Takes the answer or a borrow of it (a caller that also prints it
/// whole keeps it).
///
/// # Errors
/// When the answer does not read as `M::Answer`.
pub(crate) fn answer_of<M: Method>(
    answer: impl std::borrow::Borrow<Value>,
) -> anyhow::Result<M::Answer> {
    read_answer::<M>(answer.borrow()).map_err(|err| {
        anyhow::anyhow!("{err}; is the running daemon another herd version? `herd status` names it")
    })
}

/// An answer that does not read as herd-protocol's answer type of its method.
#[derive(Debug, thiserror::Error)]
#[error("the daemon's answer to `{method}` does not read as the protocol says ({detail})")]
pub(crate) struct UnreadableAnswer {
    /// The method answered.
    method: &'static str,
    /// What serde found, with the field it found it in.
    detail: String,
}

/// `answer` read as method `M`'s answer, for a caller with its own error type (the
/// host link answers an `RpcError`). A missing field is named by serde; a field
/// of another type is found here (serde names only the type it expected), so the
/// error always names the field.
///
/// # Errors
/// When the answer does not read as `M::Answer`.
pub(crate) fn read_answer<M: Method>(answer: &Value) -> Result<M::Answer, UnreadableAnswer> {
    read_part::<M::Answer>(M::NAME, "", answer)
}

/// A part of method `method`'s answer or notes (`part` says which, as a phrase
/// ending in a space, such as one event of `drain`'s) read as `T`, its field named
/// as [`read_answer`] names it.
///
/// # Errors
/// When `value` does not read as `T`.
pub(crate) fn read_part<T: serde::de::DeserializeOwned>(
    method: &'static str,
    part: &str,
    value: &Value,
) -> Result<T, UnreadableAnswer> {
    T::deserialize(value).map_err(|err| {
        let detail = match mistyped_field::<T>(value, &err) {
            Some(field) => format!("{part}field `{field}`: {err}"),
            None => format!("{part}{err}"),
        };
        UnreadableAnswer { method, detail }
    })
}

/// The top-level field of `answer` that `err` (a failure to read it as `T`) is
/// about, when serde's message does not name it: the one whose removal lets it
/// read, or turns the error into that field missing. Runs only on the error path.
fn mistyped_field<T: serde::de::DeserializeOwned>(
    answer: &Value,
    err: &serde_json::Error,
) -> Option<String> {
    if err.to_string().starts_with("missing field") {
        return None;
    }
    let Value::Object(fields) = answer else {
        return None;
    };
    fields.keys().find_map(|key| {
        let mut without = fields.clone();
        without.remove(key);
        let culprit = match T::deserialize(Value::Object(without)) {
            Ok(_) => true,
            Err(e) => e.to_string().starts_with(&format!("missing field `{key}`")),
        };
        culprit.then(|| key.clone())
    })
}
