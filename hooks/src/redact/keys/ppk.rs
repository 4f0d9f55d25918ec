//! PuTTY private-key files (`.ppk`, versions 1 to 3) as a key block.
//!
//! ```text
//! PuTTY-User-Key-File-3: ssh-ed25519
//! Encryption: none
//! Comment: ed25519-key-20260101
//! Public-Lines: 2
//! AAAAC3NzaC1lZDI1NTE5AAAAIBz0…
//! Key-Derivation: Argon2id          (version 3, encrypted)
//! Argon2-Salt: 5b2ec0f1…
//! Private-Lines: 1
//! AAAAIDk…
//! Private-MAC: 6c1a…
//! ```
//!
//! The block opens at `Public-Lines: N` (or at `Private-Lines: N`, for a `grep -A`
//! of the private part alone): both end in `-Lines: `, one needle for the search of
//! clean text. From there every header line of the format and every base64 line is
//! masked like a PEM body (whatever prefix, trailer or escaping it carries), up to
//! and including `Private-MAC:` (`Private-Hash:` in version 1), which closes it.
//! The first three lines (the algorithm, the encryption, the comment) are not secret
//! and stay.

/// What every line that opens a block holds (`Public-Lines: `, `Private-Lines: `).
pub(crate) const NEEDLE: &[u8] = b"-Lines: ";

/// The header names of the format after its first line; the last two close a block.
const HEADERS: [&str; 11] = [
    "Encryption",
    "Comment",
    "Public-Lines",
    "Private-Lines",
    "Key-Derivation",
    "Argon2-Memory",
    "Argon2-Passes",
    "Argon2-Parallelism",
    "Argon2-Salt",
    "Private-MAC",
    "Private-Hash",
];

/// Whether `name` is a header of the format (`PuTTY-User-Key-File-3` included).
pub(super) fn is_header(name: &str) -> bool {
    HEADERS.contains(&name) || name.starts_with("PuTTY-User-Key-File-")
}

/// Whether the header `name` ends a block (the MAC, or the hash of version 1).
pub(super) fn closes(name: &str) -> bool {
    matches!(name, "Private-MAC" | "Private-Hash")
}

/// Where a block opens on `content` (one line): the start of `Public-Lines: N` or
/// `Private-Lines: N` (after a prefix that ends in a non-word byte) and the end of
/// its number.
pub(super) fn opener(content: &str) -> Option<(usize, usize)> {
    let bytes = content.as_bytes();
    // By the `:` (a line is short, and most have none): no searcher to build.
    for colon in memchr::memchr_iter(b':', bytes) {
        let Some(at) = (colon + 2)
            .checked_sub(NEEDLE.len())
            .filter(|at| bytes[*at..].starts_with(NEEDLE))
        else {
            continue;
        };
        let start = ["Public", "Private"]
            .iter()
            .find(|word| bytes[..at].ends_with(word.as_bytes()))
            .map(|word| at - word.len());
        let Some(start) = start else { continue };
        if !boundary_before(bytes, start) {
            continue;
        }
        let digits_at = at + NEEDLE.len();
        let n_digits = bytes[digits_at..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if n_digits == 0 {
            continue;
        }
        return Some((start, digits_at + n_digits));
    }
    None
}

/// Whether a name at `start` begins a word: the text's start, a byte that is not
/// a word byte, or an escaped line end (`…\nPublic-Lines: 2`).
pub(super) fn boundary_before(bytes: &[u8], start: usize) -> bool {
    match bytes[..start] {
        [] => true,
        [.., b'\\', b'n' | b'r' | b't'] => true,
        [.., b] => !(b.is_ascii_alphanumeric() || b == b'_'),
    }
}

/// The length of the rest of a block written on the same line as its opener, in a
/// string with escaped newlines (`…Public-Lines: 2\nAAAA…\nPrivate-MAC: 6c1a…\n`,
/// escaped once or twice, or a list of the lines `'…\n', '…\n'`), from `rest` (the
/// text after the opener's number); and whether it reached the block's
/// `Private-MAC:` (the block is closed after it).
pub(super) fn one_line_run(rest: &str) -> (usize, bool) {
    let bytes = rest.as_bytes();
    let mut n = 0;
    loop {
        let newline = escaped_newline(&bytes[n..]);
        let sep = list_separator(&bytes[n + newline..]);
        if newline + sep == 0 {
            return (n, false);
        }
        let at = n + newline + sep;
        let line_len = line_len(&bytes[at..]);
        let line = &rest[at..at + line_len];
        // Each line may carry a prefix (`path:`, a log prefix, a diff's marker)
        // before its header or body, as the lines of a PEM block escaped into one
        // string may, and `\r` progress frames before it.
        let mut header = None;
        let mut base64 = false;
        for frame in escaped_frames(line) {
            header = header.or_else(|| {
                frame
                    .split_once(": ")
                    .map(|(name, _)| {
                        // A diff's `+` or `-` before a line is no part of the name.
                        let name = name.rsplit([':', '|', ' ', '\t']).next().unwrap_or(name);
                        // A tab spelled in the string (`cat -n`'s) ends a prefix too.
                        let name = name.rsplit_once("\\t").map_or(name, |(_, name)| name);
                        name.trim_start_matches(['+', '-'])
                    })
                    .filter(|name| is_header(name))
            });
            base64 |= (frame.len() >= if newline > 0 { 1 } else { 16 }
                && frame.bytes().all(super::is_base64))
                || (newline > 0 && super::frame_body(frame).is_some());
        }
        if header.is_none() && !base64 {
            // Not the block's: it ended with the escaped newline (a list's
            // separator is not the block's, and stays).
            return (n + newline, false);
        }
        n = at + line_len;
        if header.is_some_and(closes) {
            return (n + escaped_newline(&bytes[n..]), true);
        }
    }
}

/// The length of one line of a block escaped into one string: up to its escaped
/// newline, or the quote (escaped or not) that ends the string. Other escapes
/// (`\r`, `\t`, `\\`) are the line's.
fn line_len(bytes: &[u8]) -> usize {
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'"' | b'\'' => return at,
            b'\\' => {
                let run = bytes[at..].iter().take_while(|b| **b == b'\\').count();
                match bytes.get(at + run) {
                    Some(b'n' | b'"' | b'\'') | None => return at,
                    Some(_) => at += run + 1,
                }
            }
            _ => at += 1,
        }
    }
    at
}

/// The `\r` frames of an escaped line (the escaped carriage returns between them
/// left out).
fn escaped_frames(line: &str) -> impl Iterator<Item = &str> {
    let bytes = line.as_bytes();
    let mut from = 0;
    let mut at = 0;
    std::iter::from_fn(move || {
        if from > bytes.len() {
            return None;
        }
        while at < bytes.len() {
            if bytes[at] == b'\\' {
                let run = bytes[at..].iter().take_while(|b| **b == b'\\').count();
                if bytes.get(at + run) == Some(&b'r') {
                    let frame = &line[from..at];
                    at += run + 1;
                    from = at;
                    return Some(frame);
                }
                at += run;
            } else {
                at += 1;
            }
        }
        let frame = &line[from..];
        from = bytes.len() + 1;
        Some(frame)
    })
}

/// The length of an escaped line end at the start of `bytes` (`\n`, `\r\n`, each
/// behind any number of backslashes), or 0.
fn escaped_newline(bytes: &[u8]) -> usize {
    let mut n = 0;
    loop {
        let slashes = bytes[n..].iter().take_while(|b| **b == b'\\').count();
        match bytes.get(n + slashes) {
            Some(b'n') if slashes > 0 => return n + slashes + 1,
            Some(b'r') if slashes > 0 => n += slashes + 1,
            _ => return n,
        }
    }
}

/// The length of the separator between two elements of a list of lines at the
/// start of `bytes` (`', '`, `","`), or 0.
fn list_separator(bytes: &[u8]) -> usize {
    let Some(quote @ (b'\'' | b'"')) = bytes.first().copied() else {
        return 0;
    };
    let sep = bytes[1..]
        .iter()
        .take_while(|b| matches!(b, b',' | b' '))
        .count();
    match bytes.get(1 + sep) {
        Some(b) if *b == quote && bytes[1..1 + sep].contains(&b',') => sep + 2,
        _ => 0,
    }
}
