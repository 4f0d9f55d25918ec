//! Provider shapes with no prefix to anchor on, found by a rare literal inside or
//! at the end of them (`rare`: one packed pass for all) or by the `.` the side
//! scanner already visits, and a few byte checks around it:
//! - MaxMind license keys `[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk`;
//! - Mailchimp API keys `[0-9a-f]{32}-us[0-9]{1,2}` (the data centre suffix);
//! - Facebook app access tokens `<15 or 16 digits>|<27 to 40>` (a `memchr` pass
//!   for `|` and `%`, each hit tested first for a digit before it);
//! - HashiCorp Vault service tokens of the format before 1.10, `s.` and 24
//!   alphanumerics holding a digit, an upper- and a lower-case letter (a method
//!   call `s.toString()` or a word `s.` never is).
//!
//! Each needs a word boundary on both sides, so a longer run of the same
//! characters (a digest, an identifier) is not cut into a match.

use super::Kind;
use super::rare::{Rare, RareHits};

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// No word byte before `at`.
fn boundary_before(bytes: &[u8], at: usize) -> bool {
    at == 0 || !is_word(bytes[at - 1])
}

/// No word byte at `at`.
fn boundary_at(bytes: &[u8], at: usize) -> bool {
    bytes.get(at).is_none_or(|b| !is_word(*b))
}

/// Matches of MaxMind and Mailchimp keys in `bytes` (start, end, kind).
pub(super) fn suffixed_matches(
    bytes: &[u8],
    rare: &RareHits,
    found: &mut Vec<(usize, usize, Kind)>,
) {
    for at in rare.of(Rare::MaxMind) {
        if let Some(start) = maxmind_start(bytes, at) {
            found.push((start, at + 4, Kind::Token));
        }
    }
    for at in rare.of(Rare::Mailchimp) {
        if let Some(hit) = mailchimp_at(bytes, at) {
            found.push(hit);
        }
    }
    for at in memchr::memchr2_iter(b'|', b'%', bytes) {
        if at >= 15
            && bytes[at - 1].is_ascii_digit()
            && let Some(hit) = facebook_at(bytes, at)
        {
            found.push(hit);
        }
    }
}

/// A Facebook app access token `<15 or 16 digits>|<27 to 40>` (or `%7C`-escaped
/// `%`) whose `|` is at `at`.
fn facebook_at(bytes: &[u8], at: usize) -> Option<(usize, usize, Kind)> {
    let n_digits = bytes[..at]
        .iter()
        .rev()
        .take(17)
        .take_while(|b| b.is_ascii_digit())
        .count();
    let start = at - n_digits;
    if !(15..=16).contains(&n_digits) || !boundary_before(bytes, start) {
        return None;
    }
    let tail = at + 1;
    let n_tail = bytes[tail..]
        .iter()
        .take(41)
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
        .count();
    let end = tail + n_tail;
    ((27..=40).contains(&n_tail) && boundary_at(bytes, end)).then_some((start, end, Kind::Token))
}

/// The start of a MaxMind key whose `_mmk` is at `at`.
fn maxmind_start(bytes: &[u8], at: usize) -> Option<usize> {
    let start = at.checked_sub(36)?;
    let key = &bytes[start..at];
    let ok = key[6] == b'_'
        && key[..6].iter().all(u8::is_ascii_alphanumeric)
        && key[7..].iter().all(u8::is_ascii_alphanumeric)
        && boundary_before(bytes, start)
        && boundary_at(bytes, at + 4);
    ok.then_some(start)
}

/// A Mailchimp key whose `-us` is at `at`.
fn mailchimp_at(bytes: &[u8], at: usize) -> Option<(usize, usize, Kind)> {
    let start = at.checked_sub(32)?;
    let hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    if !bytes[start..at].iter().all(hex) || !boundary_before(bytes, start) {
        return None;
    }
    let n_digits = bytes[at + 3..]
        .iter()
        .take(3)
        .take_while(|b| b.is_ascii_digit())
        .count();
    let end = at + 3 + n_digits;
    ((1..=2).contains(&n_digits) && boundary_at(bytes, end)).then_some((start, end, Kind::Token))
}

/// A Vault service token of the older format whose `.` is at `dot` (`s.` and 24
/// alphanumerics with a digit, an upper- and a lower-case letter).
pub(super) fn vault_legacy_at(bytes: &[u8], dot: usize) -> Option<(usize, usize, Kind)> {
    if dot == 0 || bytes[dot - 1] != b's' || !boundary_before(bytes, dot - 1) {
        return None;
    }
    let body = bytes.get(dot + 1..dot + 25)?;
    let end = dot + 25;
    let ok = body.iter().all(u8::is_ascii_alphanumeric)
        && body.iter().any(u8::is_ascii_digit)
        && body.iter().any(u8::is_ascii_uppercase)
        && body.iter().any(u8::is_ascii_lowercase)
        && boundary_at(bytes, end)
        && !matches!(bytes.get(end), Some(b'.' | b'-' | b'('));
    ok.then_some((dot - 1, end, Kind::Token))
}

#[cfg(test)]
mod tests {
    use crate::{RedactMode, Redactor};

    #[test]
    fn b30_maxmind_mailchimp_and_older_vault_tokens_are_masked() {
        let r = Redactor::builtin();
        let maxmind = "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";
        let mailchimp = "0a1b2c3d4e5f67890a1b2c3d4e5f6789-us21";
        let vault = "s.Tv0wIvKzH9Cg6BOMe5KxCYqZ";
        let facebook = "1234567890123456|AbCdEf0123456789AbCdEf01234";
        for (secret, context) in [
            (facebook, format!("access_token={facebook}&x=1")),
            (facebook, format!("fb {facebook}\n")),
            (maxmind, format!("license_key {maxmind}\n")),
            (maxmind, format!("GEOIP=\"{maxmind}\"")),
            (mailchimp, format!("mc api {mailchimp} ok")),
            (vault, format!("VAULT_TOKEN={vault}\n")),
            (vault, format!("token: {vault}")),
        ] {
            let out = r.redact(&context, RedactMode::Code);
            assert!(!out.contains(&secret[8..20]), "{context:?} -> {out}");
        }
    }

    #[test]
    fn b30_their_look_alikes_are_not_masked() {
        let r = Redactor::builtin();
        for text in [
            // Too short, too long, not hex, words.
            "Ab3dE5_fG7hJ9kL2mN4pQ6rS8tU0vW1xY2z_mmk",
            "x0a1b2c3d4e5f67890a1b2c3d4e5f6789-us21",
            "0a1b2c3d4e5f67890a1b2c3d4e5f6789-us",
            "0a1b2c3d4e5f67890a1b2c3d4e5f6789-usual",
            "sha 0a1b2c3d4e5f67890a1b2c3d4e5f6789-us-east-1",
            // Method calls and words, no digit, or longer.
            "s.toStringAndThenSomethingEl",
            "s.getConfigurationValues(1)",
            "s.Tv0wIvKzH9Cg6BOMe5KxCYqZ.method()",
            "this.Tv0wIvKzH9Cg6BOMe5KxCYqZ",
            "s.Tv0wIvKzH9Cg6BOMe5KxCYqZx",
            "en-us1 at region us-east-1 in 2026-12-03T10:00:00.123Z",
            // A table row, a progress figure.
            "| 1234567890123456 | AbCdEf0123456789AbCdEf01234 |",
            "downloaded 1234567890123456% of AbCdEf0123456789AbCdEf0123456789AbCdEf0123456789",
        ] {
            assert_eq!(r.redact(text, RedactMode::Code), text);
        }
    }
}
