//! The stream's bounds on a long line: the memory it holds and the work it does per
//! byte, counted (not timed), with the output the same as redacting the whole text.

use std::sync::Arc;

use super::{KEEP_BYTES, MAX_HELD_BYTES, StreamRedactor};
use crate::redact::{RedactMode, Redactor};

/// `n` characters of base64 with no whitespace.
fn base64_run(n: usize) -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..n)
        .map(|i| char::from(alphabet[(i * 7 + i / 64) % 64]))
        .collect()
}

/// What a stream did with `text` fed `chunk` bytes at a time.
struct Fed {
    out: String,
    max_held_bytes: usize,
    n_judged_bytes: usize,
}

fn feed(text: &str, chunk: usize) -> Fed {
    let mut s = StreamRedactor::new(Arc::new(Redactor::builtin()), RedactMode::Code);
    let mut fed = Fed {
        out: String::new(),
        max_held_bytes: 0,
        n_judged_bytes: 0,
    };
    let mut at = 0;
    while at < text.len() {
        let mut end = (at + chunk).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        fed.out.push_str(&s.push(&text[at..end]));
        fed.max_held_bytes = fed.max_held_bytes.max(s.held_bytes());
        at = end;
    }
    fed.out.push_str(&s.finish());
    fed.n_judged_bytes = s.n_judged_bytes;
    fed
}

fn whole(text: &str) -> String {
    Redactor::builtin()
        .redact(text, RedactMode::Code)
        .into_owned()
}

#[test]
fn b30_a_long_line_after_a_masked_header_is_still_emitted_in_parts() {
    // The last whitespace before the kept tail lies inside a match at the line's
    // start (`Bearer ghp_...`, a key marker's `RSA PRIVATE KEY`): the line is cut
    // where the tail starts instead, and the stream holds no more than its bound
    // (it held the whole line and judged it at every push: fuzz finding).
    let data = base64_run(200_000);
    let lines: Vec<String> = (0..3000)
        .map(|i| format!("/home/u/.ssh/id_rsa:{}", &data[i..i + 64]))
        .collect();
    let key = format!("-----BEGIN RSA PRIVATE KEY-----\n{}\n", lines.join("\n"));
    let key_twice = serde_json::to_string(&format!(
        "{{\"key\": {}}}",
        serde_json::to_string(&key).unwrap_or_default()
    ))
    .unwrap_or_default();
    for (text, secret) in [
        (
            format!("Authorization: Bearer ghp_abcdefghijklmnopqrstuvwxyz0123456789,{data}\n"),
            "ghp_abcdefghij",
        ),
        (format!("{{\"secret\": {key_twice}}}\n"), &data[1500..1516]),
    ] {
        for chunk in [16, 4096] {
            let fed = feed(&text, chunk);
            assert!(
                fed.max_held_bytes <= MAX_HELD_BYTES + chunk,
                "chunks of {chunk}: held {} bytes of {:.40}",
                fed.max_held_bytes,
                text
            );
            assert_eq!(fed.out, whole(&text), "chunks of {chunk} of {text:.40}");
            assert!(!fed.out.contains(secret), "{:.200}", fed.out);
        }
    }
}

#[test]
fn b30_a_line_one_long_match_holds_back_costs_work_linear_in_its_length() {
    // One match longer than the stream's bound (a 200 KB token, a key written in
    // one string) keeps every cut back until the line goes past it: the line is
    // judged again only each time it doubles, not at every push (it was judged
    // whole at every push, quadratic in the line: fuzz finding).
    let data = base64_run(200_000);
    let lines: Vec<String> = (0..3000).map(|i| data[i..i + 64].to_owned()).collect();
    let key = format!("-----BEGIN RSA PRIVATE KEY-----\n{}\n", lines.join("\n"));
    let key_json = serde_json::to_string(&key).unwrap_or_default();
    for text in [
        format!("Authorization: Bearer {data} then more\n"),
        format!(
            "{{\"private_key_pem\": {key_json}, \"after\": \"{}\"}}\n",
            "x-".repeat(50_000)
        ),
    ] {
        for chunk in [256, 4096] {
            let fed = feed(&text, chunk);
            assert!(
                fed.n_judged_bytes <= 6 * text.len(),
                "chunks of {chunk}: judged {} bytes for a line of {} ({:.40})",
                fed.n_judged_bytes,
                text.len(),
                text
            );
            assert_eq!(fed.out, whole(&text), "chunks of {chunk} of {text:.40}");
            assert!(!fed.out.contains(&data[1500..1516]), "{:.200}", fed.out);
        }
    }
}

#[test]
fn b30_an_unfinished_line_fed_a_byte_at_a_time_is_scanned_once() {
    // Each push looks for a line end only in what it added.
    let text = base64_run(MAX_HELD_BYTES - KEEP_BYTES);
    let fed = feed(&text, 1);
    assert_eq!(fed.n_judged_bytes, text.len());
    assert_eq!(fed.out, text);
}
