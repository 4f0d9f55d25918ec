//! A PEM private key printed as wrapped base64: every line masked, from any
//! window; certificates, images and digests in base64 left alone.

use crate::{KeyIndex, RedactMode, Redactor};

/// Standard base64 of `data`, wrapped at `width` columns as `base64` wraps it.
fn base64_wrapped(data: &[u8], width: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut flat = String::new();
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                flat.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                flat.push('=');
            }
        }
    }
    let mut out = String::new();
    for line in flat.as_bytes().chunks(width) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out
}

fn pem(label: &str, n_lines: usize) -> String {
    let mut out = format!("-----BEGIN {label}-----\n");
    for i in 0..n_lines {
        let line: String = (0..64)
            .map(|j| {
                let k = (i * 31 + j * 7) % 62;
                (b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[k]) as char
            })
            .collect();
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// Every line of `encoded` (its body lines, 20 characters or more) that `out` shows.
fn shown_lines<'e>(encoded: &'e str, out: &str) -> Vec<&'e str> {
    encoded
        .lines()
        .filter(|line| line.len() >= 20 && out.contains(&line[4..20]))
        .collect()
}

#[test]
fn b30_a_wrapped_base64_private_key_is_masked_on_every_line() {
    let redactor = Redactor::builtin();
    for label in [
        "RSA PRIVATE KEY",
        "PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
        "EC PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
    ] {
        for width in [76, 64] {
            let encoded = base64_wrapped(pem(label, 25).as_bytes(), width);
            for text in [
                format!("$ base64 key.pem\n{encoded}$ echo done\ndone\n"),
                encoded.clone(),
                // Behind a log prefix, and with `cat -A`'s `$`.
                encoded.lines().map(|l| format!("web-1  | {l}\n")).collect(),
                encoded.lines().map(|l| format!("{l}$\n")).collect(),
            ] {
                let out = redactor.redact(&text, RedactMode::Code);
                assert_eq!(
                    shown_lines(&encoded, &out),
                    Vec::<&str>::new(),
                    "{label} at {width}: {out}"
                );
                assert_eq!(out.lines().count(), text.lines().count());
            }
            // What follows the block is ordinary again.
            let text = format!("{encoded}$ echo done\ndone\n");
            let out = redactor.redact(&text, RedactMode::Code);
            assert!(out.ends_with("$ echo done\ndone\n"), "{out}");
        }
    }
}

#[test]
fn b30_a_window_deep_in_a_wrapped_base64_key_shows_only_masks() {
    let redactor = Redactor::builtin();
    let encoded = base64_wrapped(pem("RSA PRIVATE KEY", 400).as_bytes(), 76);
    let text = format!("$ base64 key.pem\n{encoded}");
    let mut index = KeyIndex::new();
    index.push(text.as_bytes());
    for cut_line in [3, 100, 300] {
        let at: usize = text.lines().take(cut_line).map(|l| l.len() + 1).sum();
        let (before, window) = text.split_at(at);
        // The index, and the look-back over the text before, both know the block.
        assert_eq!(index.open_at(at as u64), Some(true), "line {cut_line}");
        assert!(redactor.key_open_at_end(before), "line {cut_line}");
        let out = redactor.redact_after_state("", true, window, RedactMode::Code);
        assert_eq!(
            shown_lines(&encoded, &out),
            Vec::<&str>::new(),
            "line {cut_line}: {out}"
        );
    }
}

#[test]
fn b30_base64_that_is_no_private_key_stays() {
    let redactor = Redactor::builtin();
    let cert = base64_wrapped(pem("CERTIFICATE", 20).as_bytes(), 76);
    let public = base64_wrapped(pem("PUBLIC KEY", 6).as_bytes(), 76);
    let image: String = base64_wrapped(&(0..=255u8).cycle().take(3000).collect::<Vec<u8>>(), 76);
    for text in [cert, public, image] {
        let out = redactor.redact(&text, RedactMode::Code);
        assert_eq!(out, text, "over-masked");
    }
}
