//! The look-back over a log file: body-like runs without a BEGIN are no key (the
//! output of `seq`, base64 lines), a key is open however far its BEGIN lies behind,
//! and a log cut by its cap says what it can.

use std::io::Write;

use super::key_open_in_log;

const BODY: &str = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n";

/// A log file holding `text`.
fn log(text: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("a temporary file");
    file.write_all(text.as_bytes()).expect("write the log");
    file
}

/// The output of `seq 1 n`.
fn seq(n: u32) -> String {
    let mut out = String::new();
    for i in 1..=n {
        out.push_str(&i.to_string());
        out.push('\n');
    }
    out
}

/// Whether a block is open at byte `at` of `text` kept whole as a log, with the
/// text after `at` as the route shows it.
fn open_at(text: &str, at: usize) -> bool {
    let file = log(text);
    key_open_in_log(Some(file.as_file()), at as u64, &text[at..])
}

#[test]
fn b30_seq_output_past_16_mib_is_no_open_key() {
    // 3,000,000 lines of digits, each of which could be key body, and no BEGIN.
    let text = seq(3_000_000);
    assert!(text.len() > 16 * 1024 * 1024, "{}", text.len());
    let at = text.len() - 1000;
    let at = at + text[at..].find('\n').expect("a line end") + 1;
    assert!(!open_at(&text, at), "digits taken as a key's body");
    // Base64-looking lines, far more than one read's worth, are no key either.
    let b64 = format!("header\n{}", BODY.repeat(400_000));
    assert!(!open_at(&b64, b64.len() - BODY.len()));
}

#[test]
fn b30_a_key_is_open_at_a_high_offset_however_far_its_begin() {
    let mut text = format!("{}-----BEGIN RSA PRIVATE KEY-----\n", seq(1000));
    text.push_str(&BODY.repeat(100_000)); // about 5 MB of body
    let at = text.len() - 10 * BODY.len();
    assert!(open_at(&text, at), "a window deep in a long key");
    // Its END closes it, and digits after it are ordinary output again.
    text.push_str("-----END RSA PRIVATE KEY-----\n");
    text.push_str(&seq(2_000_000));
    let at = text.len() - 6;
    assert!(!open_at(&text, at));
    // A line that cannot be body between the BEGIN and the window ends the block,
    // however many body-like lines follow it.
    let mut ended = String::from("-----BEGIN PRIVATE KEY-----\nMIIE\nerror: truncated\n");
    ended.push_str(&BODY.repeat(100_000));
    assert!(!open_at(&ended, ended.len() - BODY.len()));
    // A marker that is no BEGIN (a rule of dashes) opens nothing.
    let ruled = format!("------------\n{}", seq(2_000_000));
    assert!(!open_at(&ruled, ruled.len() - 6));
}

#[test]
fn b30_near_a_window_the_key_state_is_decided_without_reading_far() {
    let text = format!("x\n-----BEGIN EC PRIVATE KEY-----\n{}", BODY.repeat(3));
    assert!(open_at(&text, text.len() - BODY.len()));
    assert!(!open_at(&text, 1), "a window that starts before the key");
    let words = format!("{}plain words\n{BODY}", seq(100_000));
    assert!(!open_at(&words, words.len() - BODY.len()));
    // The first line shown cannot be body: the log is not asked.
    assert!(!key_open_in_log(None, 10, "done.\n"));
}

#[test]
fn b39_a_log_cut_by_its_cap_says_what_it_can() {
    // The kept log ends inside a key: the output past the cap is inside it.
    let kept = format!("-----BEGIN PRIVATE KEY-----\n{}", BODY.repeat(10));
    let file = log(&kept);
    let past = kept.len() as u64 + 5000;
    assert!(key_open_in_log(Some(file.as_file()), past, BODY));
    // The kept log ends outside one: digits past the cap are no key...
    let digits = log(&seq(10_000));
    let past = 1_000_000;
    assert!(!key_open_in_log(
        Some(digits.as_file()),
        past,
        "123456\n123457\n"
    ));
    // ...unless the text shows a key's end before its beginning.
    let tail = format!("{BODY}-----END PRIVATE KEY-----\nok\n");
    assert!(key_open_in_log(Some(digits.as_file()), past, &tail));
    assert!(key_open_in_log(None, past, &tail));
    assert!(!key_open_in_log(None, past, "123456\n"));
}

#[test]
fn b30_a_source_cut_inside_a_begin_line_masks_the_block() {
    // Fuzz finding: a key in one JSON string, each line behind a `path:` prefix with
    // a DCS string inside; a route's source cut inside its BEGIN marker learnt from
    // the log that no block was open there (the marker was not finished), and the
    // body after it showed. Inside a line, a block is open from the line's first
    // mask on (the key index's rule), and the look-back now says so too.
    use crate::{HookChain, KeyIndex, OutputContext, Pipeline, Redactor, Route, Window};
    let ctx = OutputContext {
        route: Route::Poll,
        command: "cat",
        return_code: None,
        owner_task_id: "t",
        session_id: "proc_0123456789ab",
        backend: "local",
        partial: false,
    };
    let p = Pipeline::with_redactor(
        HookChain::default(),
        std::sync::Arc::new(Redactor::builtin()),
    );
    let body = [
        "uM2RVTpVI/nD/AQft9p/2aLTm7zVcjJwmaiVaVA6AB9lUQNhEyYEaQhRtFGJ88/p",
        "8B1PJ30rh6UyZogsVuAgGk90g7akhEojyeRIU9bhlRPkCWCvKy/QRPirosVxak7u",
    ];
    let lines = [
        "-----BEGIN RSA PRIVATE KEY-----",
        body[0],
        body[1],
        "-----END RSA PRIVATE KEY-----",
    ];
    let ppk_lines = [
        "PuTTY-User-Key-File-3: ssh-rsa",
        "Encryption: none",
        "Private-Lines: 2",
        body[0],
        body[1],
        "Private-MAC: 0123456789abcdef0123456789abcdef",
    ];
    let forms: [(&str, &str); 3] = [
        ("", ""),
        ("/home/u/.ssh/id_rsa:", "\u{90}q\u{9c}"),
        ("web-1  | ", ""),
    ];
    for (prefix, inside, lines) in forms
        .iter()
        .flat_map(|&(p, i)| [(p, i, &lines[..]), (p, i, &ppk_lines[..])])
    {
        let printed: Vec<String> = lines
            .iter()
            .map(|l| format!("{prefix}{}{inside}{}", &l[..6], &l[6..]))
            .collect();
        let block = printed.join("\n");
        let json = format!(
            "{{\"key\": {}}}",
            serde_json::to_string(&format!("{block}\n")).unwrap_or_default()
        );
        for printed in [block, json] {
            let text = format!("log start\n{printed}\ndone");
            let file = log(&text);
            let mut index = KeyIndex::new();
            index.push(text.as_bytes());
            let begin = text
                .find("-----B")
                .or_else(|| text.find("Privat"))
                .unwrap_or(0);
            let at = text.find(&body[0][..6]).unwrap_or(0) + 9 + inside.len();
            let marker_end = at - 9 - inside.len();
            for from in (begin..=marker_end).filter(|f| text.is_char_boundary(*f)) {
                let source = &text[from..];
                let opens = [
                    key_open_in_log(Some(file.as_file()), from as u64, source),
                    index.open_at(from as u64).unwrap_or(false),
                ];
                for open in opens {
                    let start = at - from;
                    for window in [
                        Window::range(source, start..source.len()),
                        Window::last_chars_after(source, start, 100),
                        Window::range(source, 0..source.len()),
                    ] {
                        let out = p.show(&ctx, window.after_open_key(open));
                        let seen = crate::redact::visible_text(&out);
                        for line in body {
                            for run in line.as_bytes().windows(16) {
                                let run = std::str::from_utf8(run).unwrap_or_default();
                                assert!(
                                    !seen.contains(run) && !out.contains(run),
                                    "from {from} ({:?}), open {open} {opens:?}: {out:?}",
                                    &text[from..from + 4]
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn b30_the_log_look_back_keeps_a_key_in_one_string_longer_than_it_reads_open() {
    // A `cat -n` of a key escaped twice into one string far longer than the
    // look-back reads (64 KiB), an APC inside each line: a position deep inside the
    // string is inside the block, near its BEGIN or with the BEGIN out of sight
    // (fuzz finding: the look-back judged from inside a line with no BEGIN in
    // sight, and the state machine from inside an escaped line: closed).
    let body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7abcdefghijklmno";
    let mut lines = vec!["-----BEGIN RSA PRIVATE KEY-----".to_owned()];
    for idx in 0..1600usize {
        lines.push(body.chars().cycle().skip(idx % 60).take(64).collect());
    }
    let text = crate::redact::numbered_in_one_string(&lines, "\u{9f}apc\u{9c}");
    let last_body = text.find("-----E").unwrap_or(text.len());
    let first_body = text.find("     2").unwrap_or(0);
    for at in (first_body..last_body).step_by(1009) {
        if text.is_char_boundary(at) {
            assert!(open_at(&text, at), "offset {at} is inside the block");
        }
    }
}
