//! A PEM private key printed as base64 (`base64 key.pem`, a Kubernetes secret's
//! `tls.key`) as a key block.
//!
//! Base64 of a PEM file starts with `LS0tLS1CRUdJTi` (`-----BEGIN`), and the first
//! few dozen characters decode to the marker's label (`RSA PRIVATE KEY`,
//! `OPENSSH PRIVATE KEY`, …): that line opens a block when the label names a private
//! key (a certificate's or a public key's does not). `base64` wraps its output at
//! 76 columns (`openssl base64` at 64): when the encoded run fills its line and is
//! unpadded, the lines after it are the rest of the same key and the block stays
//! open, masked line by line like a PEM body, until a line that cannot continue it
//! (anything that is not base64, whatever prefix it carries). Base64 that does not
//! start with such a line (an image, a digest, a certificate) opens nothing.

use super::is_base64;

/// What every line that opens a block holds (`-----B`, encoded). Eight bytes, so
/// the backwards search of the log (steps overlapping by seven) finds it across a
/// step's edge.
pub(crate) const NEEDLE: &[u8] = b"LS0tLS1C";

/// The longest encoded line taken as wrapped output (`base64 -w 128`); a longer run
/// is the whole file on one line.
const MAX_WRAP: usize = 128;

/// The shortest run read as an opener: 33 bytes decoded, the label's first 22.
const MIN_RUN: usize = 44;

/// In `content` (one line), the encoded private key: its start and end, and whether
/// it is a wrapped line that the next lines continue.
pub(super) fn opener(content: &str) -> Option<(usize, usize, bool)> {
    let bytes = content.as_bytes();
    let mut from = 0;
    while let Some(idx) = memchr::memmem::find(&bytes[from..], NEEDLE) {
        let start = from + idx;
        from = start + 1;
        if start > 0 && is_base64(bytes[start - 1]) {
            continue;
        }
        let run = bytes[start..].iter().take_while(|b| is_base64(**b)).count();
        // Shorter, the label is not yet readable (`LS0tLS1CRUdJTiBDRVJU` is a
        // certificate's as much as a key's).
        if run < MIN_RUN || !names_private_key(&bytes[start..start + run]) {
            continue;
        }
        let end = start + run;
        let encoded = &bytes[start..end];
        let wrapped = run <= MAX_WRAP
            && run % 4 == 0
            && !encoded.contains(&b'=')
            && super::is_trailer(&content[end..]);
        return Some((start, end, wrapped));
    }
    None
}

/// Whether base64 `encoded` (starting at a quantum) decodes to a BEGIN marker
/// whose label names a private key, or one cut before its label ends that names
/// nothing else (the line was wrapped early).
fn names_private_key(encoded: &[u8]) -> bool {
    let head = decode(&encoded[..encoded.len().min(64) / 4 * 4]);
    let Some(label) = head.strip_prefix(b"-----BEGIN ") else {
        return false;
    };
    let has = |word: &[u8]| memchr::memmem::find(label, word).is_some();
    match memchr::memmem::find(label, b"-----") {
        Some(end) => memchr::memmem::find(&label[..end], b"PRIVATE").is_some(),
        None => {
            has(b"PRIVATE")
                || (!has(b"CERT") && !has(b"PUBLIC") && !has(b"REQUEST") && !has(b"PARAMETERS"))
        }
    }
}

/// Standard base64 (a whole number of quanta, no padding expected) decoded; stops
/// at the first byte that is not of the alphabet.
fn decode(encoded: &[u8]) -> Vec<u8> {
    let value = |b: u8| match b {
        b'A'..=b'Z' => Some(b - b'A'),
        b'a'..=b'z' => Some(b - b'a' + 26),
        b'0'..=b'9' => Some(b - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(encoded.len() / 4 * 3);
    for quantum in encoded.chunks_exact(4) {
        let mut n: u32 = 0;
        for b in quantum {
            match value(*b) {
                Some(v) => n = (n << 6) | u32::from(v),
                None => return out,
            }
        }
        out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8]);
    }
    out
}

#[cfg(test)]
mod tests;
