//! Credential files printed whole in any output (`cat ~/.netrc`, `cat ~/.pgpass`,
//! a script that prints one, a `grep -n` of one), recognised line by line by the
//! shape of a whole line, so a window that starts on the line still finds it:
//! - a `.netrc` line made only of netrc pairs (`machine h`, `login u`,
//!   `password S`, `account a`, `port p`, and `default` alone), one of them
//!   `password`: its value is masked. A `.netrc` is usually written one pair a
//!   line (`  password S` after `machine h` and `login u` lines), so a line holding
//!   the password pair alone is enough; a line with any other word is prose and
//!   stays (`password reset for alice`, `Enter password:`).
//! - a `.pgpass` line `host:port:database:user:password`: exactly five fields, the
//!   host a name or address (a letter or a dot in it, or `*`), the port a number
//!   from 1 to 65535 or `*`, no field empty and no whitespace (a `:` or `\` inside a
//!   field escaped with `\`, as the file escapes them). Timestamps (no letter in the
//!   first field), IPv6 addresses (empty fields, or eight of them), MAC addresses,
//!   `/etc/passwd` lines (seven fields) and `ns:kind:name` strings do not have this
//!   shape.
//!
//! Either may sit behind the prefix `grep -n` or `grep -r` gives it: a line number
//! (`3:`), or a path naming the file (`/root/.pgpass:`).
//!
//! Cost: the hits of `password` (a rare word in logs) from the shared packed pass
//! of `rare`, and a walk over line starts for `.pgpass` that stops at a line's first byte that cannot start
//! the shape (most log lines fail within their first field).

use crate::redact::Kind;
use crate::redact::rare::{Rare, RareHits};

/// The netrc keywords that take a value.
const NETRC_PAIRS: &[&[u8]] = &[b"machine", b"login", b"password", b"account", b"port"];

/// Every match of both shapes in `bytes` (the text a person would see), pushed
/// as value spans masked like tokens. The walk over lines also gives, in
/// `prompted`, each line whose first word ends in `$` or `#` (a shell's prompt,
/// `root@web:/srv/app# …`, or `$ ` alone): its start and the space after that
/// word, for the echoed-command reader (`echoed`), which checks the rest.
pub(crate) fn file_line_matches(
    bytes: &[u8],
    rare: &RareHits,
    found: &mut Vec<(usize, usize, Kind)>,
    prompted: &mut Vec<(usize, usize)>,
) {
    netrc_matches(bytes, rare, found);
    pgpass_matches(bytes, found, prompted);
}

/// The line of `bytes` around `at`: its start and its end (before `\r\n` or `\n`).
fn line_around(bytes: &[u8], at: usize) -> (usize, usize) {
    let start = memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |nl| nl + 1);
    let end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |nl| at + nl);
    let end = if end > start && bytes[end - 1] == b'\r' {
        end - 1
    } else {
        end
    };
    (start, end)
}

/// The words of `bytes[start..end]` split on spaces and tabs, as spans.
fn words(bytes: &[u8], start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = start;
    while at < end {
        while at < end && matches!(bytes[at], b' ' | b'\t') {
            at += 1;
        }
        let from = at;
        while at < end && !matches!(bytes[at], b' ' | b'\t') {
            at += 1;
        }
        if at > from {
            out.push((from, at));
        }
    }
    out
}

/// The length of the prefix `grep` puts before a line of the file named `file`
/// (0 when there is none): a line number and a colon (`3:`), a path holding `file`
/// and a colon, or both (`grep -rn`: `path:3:`).
fn grep_prefix_len(line: &[u8], file: &[u8]) -> usize {
    let numbered = |w: &[u8]| !w.is_empty() && w.iter().all(u8::is_ascii_digit);
    let Some(colon) = memchr::memchr(b':', line) else {
        return 0;
    };
    let head = &line[..colon];
    if numbered(head) {
        return colon + 1;
    }
    if head.contains(&b' ') || memchr::memmem::find(head, file).is_none() {
        return 0;
    }
    let rest = &line[colon + 1..];
    match memchr::memchr(b':', rest) {
        Some(next) if numbered(&rest[..next]) => colon + 1 + next + 1,
        _ => colon + 1,
    }
}

/// `.netrc` lines: every line holding `password` whose words are netrc pairs.
fn netrc_matches(bytes: &[u8], rare: &RareHits, found: &mut Vec<(usize, usize, Kind)>) {
    let mut next_line = 0;
    for at in rare.of(Rare::Password) {
        if at < next_line {
            continue;
        }
        let (start, end) = line_around(bytes, at);
        next_line = end;
        let words = words(
            bytes,
            start + grep_prefix_len(&bytes[start..end], b"netrc"),
            end,
        );
        let mut rest = &words[..];
        let mut values = Vec::new();
        let mut whole = !rest.is_empty();
        while let Some(&(from, to)) = rest.first() {
            let word = &bytes[from..to];
            if word == b"default" {
                rest = &rest[1..];
                continue;
            }
            match rest.get(1) {
                Some(&value) if NETRC_PAIRS.contains(&word) => {
                    if word == b"password" {
                        values.push(value);
                    }
                    rest = &rest[2..];
                }
                _ => {
                    whole = false;
                    break;
                }
            }
        }
        if whole {
            found.extend(values.into_iter().map(|(s, e)| (s, e, Kind::Token)));
        }
    }
}

/// `.pgpass` lines: each line whose shape is `host:port:database:user:password`.
fn pgpass_matches(
    bytes: &[u8],
    found: &mut Vec<(usize, usize, Kind)>,
    prompted: &mut Vec<(usize, usize)>,
) {
    let mut start = 0;
    while start < bytes.len() {
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |nl| start + nl);
        match pgpass_line(bytes, start, end) {
            Line::Pgpass(span) => found.push((span.0, span.1, Kind::Token)),
            Line::Spaced(from, space) if matches!(bytes[space - 1], b'$' | b'#') => {
                prompted.push((from, space));
            }
            _ => {}
        }
        start = end + 1;
    }
}

/// What the `.pgpass` walk saw of a line.
enum Line {
    /// A `.pgpass` line: its password's span.
    Pgpass((usize, usize)),
    /// No such line: where it starts (past carriage returns) and the space its
    /// first word ends before (past its start).
    Spaced(usize, usize),
    Other,
}

/// What `bytes[start..end]` is to the `.pgpass` walk.
fn pgpass_line(bytes: &[u8], start: usize, end: usize) -> Line {
    // What a terminal shows of a line that starts with carriage returns (a shell
    // prints its next prompt after one, on the line of a command with no output).
    let start = start
        + bytes[start..end]
            .iter()
            .take_while(|b| **b == b'\r')
            .count();
    // `$ …` and `# …`: a prompt and nothing else.
    if matches!(bytes.get(start), Some(b'$' | b'#')) && bytes.get(start + 1) == Some(&b' ') {
        return Line::Spaced(start, start + 1);
    }
    // A prompt after a virtual environment's name: `(venv) user@host:~/app$ `.
    if bytes.get(start) == Some(&b'(') {
        let name = &bytes[start..end.min(start + 64)];
        return match memchr::memchr(b')', name) {
            Some(close) if bytes.get(start + close + 1) == Some(&b' ') => {
                let word = start + close + 2;
                memchr::memchr(b' ', &bytes[word..end])
                    .filter(|at| *at > 0)
                    .map_or(Line::Other, |at| Line::Spaced(word, word + at))
            }
            _ => Line::Other,
        };
    }
    match pgpass_span(bytes, start, end) {
        Ok(span) => Line::Pgpass(span),
        Err(Some(space)) => Line::Spaced(start, space),
        Err(None) => Line::Other,
    }
}

/// The password span of a `.pgpass` line `bytes[start..end]`, if it has the
/// shape; if not, the first space of a line that stopped at it (past its start).
fn pgpass_span(bytes: &[u8], start: usize, end: usize) -> Result<(usize, usize), Option<usize>> {
    let end = if end > start && bytes[end - 1] == b'\r' {
        end - 1
    } else {
        end
    };
    // Cheap first test: the first byte must start a host (or a grep prefix).
    let first = *bytes.get(start).ok_or(None)?;
    if !(first.is_ascii_alphanumeric() || matches!(first, b'*' | b'.' | b'/' | b'~' | b'_')) {
        return Err(None);
    }
    // Second, before any allocation: a space or tab with no backslash before it
    // ends the walk of `fields` (most log lines), so only the rest are split.
    if let Some(at) = memchr::memchr3(b' ', b'\t', b'\\', &bytes[start..end])
        && bytes[start + at] != b'\\'
    {
        return Err(Some(start + at));
    }
    let mut fields = fields(bytes, start, end).ok_or(None)?;
    // `grep -n` / `grep -r` prefixes: one or two fields naming the file or a line.
    while fields.len() > 5 {
        let (from, to) = fields[0];
        let word = &bytes[from..to];
        let numbered = word.iter().all(u8::is_ascii_digit);
        if !(numbered || memchr::memmem::find(word, b"pgpass").is_some()) {
            return Err(None);
        }
        fields.remove(0);
    }
    let [host, port, database, _user, password] = fields[..] else {
        return Err(None);
    };
    let host = &bytes[host.0..host.1];
    let port = &bytes[port.0..port.1];
    // A date (`2026-12-04T12:34:…`) is no host.
    let dated = host.len() > 4 && host[..4].iter().all(u8::is_ascii_digit) && host[4] == b'-';
    let host_ok = host == b"*"
        || (!dated
            && host.iter().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'\\' | b':')
            })
            && host.iter().any(|b| b.is_ascii_alphabetic() || *b == b'.'));
    let port_ok = port == b"*"
        || (port.len() <= 5
            && port.iter().all(u8::is_ascii_digit)
            && port[0] != b'0'
            && std::str::from_utf8(port)
                .ok()
                .and_then(|p| p.parse::<u32>().ok())
                .is_some_and(|p| p <= 65_535));
    // `file.rs:120:9:…` is a compiler's place (line, column), not a database.
    let place = bytes[database.0..database.1].iter().all(u8::is_ascii_digit);
    (host_ok && port_ok && !place)
        .then_some(password)
        .ok_or(None)
}

/// The `:`-separated fields of `bytes[start..end]` (a `\` escapes the next byte),
/// or `None` when a field is empty or the line holds whitespace or more than
/// seven fields.
fn fields(bytes: &[u8], start: usize, end: usize) -> Option<Vec<(usize, usize)>> {
    let mut out = Vec::with_capacity(5);
    let mut from = start;
    let mut at = start;
    while at < end {
        match bytes[at] {
            b'\\' => at += 2,
            b':' => {
                if at == from || out.len() == 6 {
                    return None;
                }
                out.push((from, at));
                at += 1;
                from = at;
            }
            b if b.is_ascii_whitespace() => return None,
            _ => at += 1,
        }
    }
    let at = at.min(end);
    if at == from {
        return None;
    }
    out.push((from, at));
    Some(out)
}

#[cfg(test)]
mod tests;
