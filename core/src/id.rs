//! Session ids: `proc_` followed by 12 lowercase hex characters.

use std::fmt;

use serde::Serialize;

/// The prefix every session id starts with.
pub(crate) const ID_PREFIX: &str = "proc_";

/// Characters a lookup prefix needs after `proc_`.
pub(crate) const MIN_PREFIX_CHARS: usize = 4;

/// A session's id.
///
/// Invariant: `proc_` followed by 12 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    /// A fresh random id.
    pub(crate) fn generate() -> SessionId {
        SessionId(format!("{ID_PREFIX}{:012x}", fastrand::u64(..) >> 16))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// An id read back from disk (checkpoint, ledger, receipts); `None` unless it is
    /// `proc_` followed by 12 lowercase hex characters.
    pub(crate) fn parse(text: &str) -> Option<SessionId> {
        let hex = text.strip_prefix(ID_PREFIX)?;
        (hex.len() == 12 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| SessionId(text.to_owned()))
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for SessionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl SessionId {
    /// The id of session `far` of another host, as this home names it:
    /// `HOST:proc_<12 hex>`. `None` unless `host` is a host name
    /// (`[a-z0-9][a-z0-9_-]{0,31}`) and `far` a plain session id.
    pub fn qualified(host: &str, far: &str) -> Option<SessionId> {
        let name_ok = host.len() <= 32
            && host
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && host
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        (name_ok && SessionId::parse(far).is_some()).then(|| SessionId(format!("{host}:{far}")))
    }

    /// A plain id or a qualified one (`HOST:proc_…`), read back from disk.
    pub(crate) fn parse_any(text: &str) -> Option<SessionId> {
        match text.split_once(':') {
            Some((host, far)) => SessionId::qualified(host, far),
            None => SessionId::parse(text),
        }
    }
}

/// Normalises a lookup prefix to `proc_<hex>` form; a bare suffix is accepted.
pub(crate) fn normalise_prefix(input: &str) -> String {
    let trimmed = input.trim();
    if trimmed.starts_with(ID_PREFIX) {
        trimmed.to_owned()
    } else {
        format!("{ID_PREFIX}{trimmed}")
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
impl SessionId {
    /// An id from literal text, for unit tests.
    pub(crate) fn from_test(id: &str) -> SessionId {
        SessionId(id.to_owned())
    }
}
