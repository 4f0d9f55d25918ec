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
