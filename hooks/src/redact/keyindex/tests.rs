//! The key index against the rule it stands for: at every line start it answers
//! what the look-back over the text before it answers, however the output was
//! chunked; deep in a long key it answers open, after `seq` or base64 closed.

use proptest::prelude::*;

use super::KeyIndex;
use crate::redact::key_open_after;

const BODY: &str = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n";

fn at(n: usize) -> u64 {
    n as u64
}

fn index_of(text: &str, chunk: usize) -> KeyIndex {
    let mut index = KeyIndex::new();
    for piece in text.as_bytes().chunks(chunk.max(1)) {
        index.push(piece);
    }
    index
}

/// Line starts of `text` (past the first byte).
fn line_starts(text: &str) -> Vec<usize> {
    memchr::memchr_iter(b'\n', text.as_bytes())
        .map(|nl| nl + 1)
        .collect()
}

#[test]
fn b30_the_index_answers_a_window_deep_in_a_long_key_and_not_after_seq() {
    let mut text = String::from("build\n-----BEGIN RSA PRIVATE KEY-----\n");
    text.push_str(&BODY.repeat(50_000)); // about 2.6 MB of body
    let deep = text.len() - 7 * BODY.len();
    text.push_str("-----END RSA PRIVATE KEY-----\n");
    let after_end = text.len();
    for n in 1..200_000 {
        text.push_str(&format!("{n}\n"));
    }
    let index = index_of(&text, 4096);
    assert_eq!(index.open_at(at(deep)), Some(true), "deep in the key");
    assert_eq!(
        index.open_at(at(deep + 5)),
        Some(true),
        "inside a body line"
    );
    assert_eq!(index.open_at(6), Some(false), "before the BEGIN line");
    assert_eq!(index.open_at(at(after_end)), Some(false), "after its END");
    assert_eq!(
        index.open_at(at(text.len() - 3)),
        Some(false),
        "deep in seq output"
    );
}

#[test]
fn b30_the_index_keeps_a_key_in_one_string_longer_than_a_line_it_holds_open() {
    // A `cat -n` of a key escaped twice into one string far longer than the
    // unfinished line the index holds (64 KiB), an APC inside each line: past the
    // first cut, offsets inside the string are still inside the block (fuzz
    // finding: the cut fell inside a line's `   741\t` prefix, which closed it).
    let mut lines = vec!["-----BEGIN RSA PRIVATE KEY-----".to_owned()];
    for idx in 0..1600usize {
        let body: String = BODY
            .trim_end()
            .chars()
            .cycle()
            .skip(idx % 50)
            .take(64)
            .collect();
        lines.push(body);
    }
    let text = crate::redact::numbered_in_one_string(&lines, "\u{9f}apc\u{9c}");
    assert!(text.len() > 2 * 64 * 1024);
    let last_body = text.find("-----E").unwrap_or(text.len());
    for chunk in [4096, 65_536, 100_003] {
        let index = index_of(&text, chunk);
        for offset in (70 * 1024..last_body).step_by(997) {
            assert_eq!(
                index.open_at(at(offset)),
                Some(true),
                "chunks of {chunk}: offset {offset} is inside the block"
            );
        }
    }
}

#[test]
fn b30_an_index_that_starts_late_answers_only_what_it_saw_decided() {
    // Started inside a key (a re-adopted session): the state there is unknown
    // until a line decides it.
    let text = format!("{BODY}{BODY}done.\n{BODY}-----BEGIN EC PRIVATE KEY-----\n{BODY}");
    let mut index = KeyIndex::starting_at(1000);
    index.push(text.as_bytes());
    let done = 1000 + 2 * BODY.len() as u64;
    assert_eq!(index.open_at(1000 + BODY.len() as u64), None);
    assert_eq!(index.open_at(done), None, "the deciding line's start");
    assert_eq!(index.open_at(done + 6), Some(false));
    assert_eq!(index.open_at(1000 + text.len() as u64 - 4), Some(true));
    // Bytes that went by unseen: nothing after them is known until decided.
    index.skip(10);
    assert_eq!(index.open_at(1000 + text.len() as u64 + 20), None);
}

#[test]
fn b30_an_index_that_starts_inside_a_begin_marker_does_not_call_the_block_closed() {
    // Fuzz finding: a re-adopted session's index that starts inside a BEGIN marker
    // (behind a `grep -n` prefix) read the rest of the marker as a line that closes
    // every block, so a page deep in the key was shown unmasked; the log knows.
    let text =
        format!("log\nid_rsa:1:-----BEGIN RSA PRIVATE KEY-----\nid_rsa:2:{BODY}id_rsa:3:{BODY}");
    for cut in ["PRI", "-----", "KEY-"] {
        let skip = text.find(cut).map_or(0, |idx| idx + 2);
        let mut index = KeyIndex::starting_at(at(skip));
        index.push(&text.as_bytes()[skip..]);
        for line_start in line_starts(&text).into_iter().filter(|&s| s > skip) {
            let open = index.open_at(at(line_start));
            assert!(
                open.is_none_or(|open| open),
                "started at {skip}: the index says {open:?} at {line_start}"
            );
        }
    }
}

#[test]
fn b30_a_marker_hidden_by_escapes_opens_a_block_in_the_index() {
    let text = format!("log\n--\x1b[1m---BEGIN RSA PRIVATE KEY-----\x1b[0m\n{BODY}{BODY}");
    let index = index_of(&text, 7);
    assert_eq!(index.open_at(at(text.len() - BODY.len())), Some(true));
}

#[test]
fn b30_output_with_no_dash_costs_the_index_no_line_reading() {
    // A run of NULs (`head -c 1G /dev/zero`), lines of escapes and controls: every
    // byte is hidden, but with no `-` no marker can be seen, so no line is
    // stripped or parsed, whether it ends with a newline or is cut at the cap.
    let mut index = KeyIndex::new();
    let zeros = vec![0u8; 1 << 20];
    for piece in zeros.chunks(65_536) {
        index.push(piece);
    }
    let escaped = "\x1b[1;31mstatus\x1b[0m \x07\x00\x01\n".repeat(10_000);
    for piece in escaped.as_bytes().chunks(4096) {
        index.push(piece);
    }
    assert_eq!(index.lines_read, 0);
    assert_eq!(index.open_at(at(zeros.len() + 100)), Some(false));
    // A marker among hidden bytes after all that still opens a block.
    let key = format!("\0--\0---BEGIN RSA PRIVATE KEY-----\n{BODY}");
    index.push(key.as_bytes());
    let end = zeros.len() + escaped.len() + key.len();
    assert_eq!(index.open_at(at(end - 3)), Some(true));
    assert!(index.lines_read > 0);
}

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just(BODY.trim_end().to_owned()),
        1 => Just("-----BEGIN RSA PRIVATE KEY-----".to_owned()),
        1 => Just("-----END RSA PRIVATE KEY-----".to_owned()),
        1 => Just("web-1  | -----BEGIN PRIVATE KEY-----".to_owned()),
        1 => Just("\x1b[32m-----BEGIN EC PRIVATE KEY-----\x1b[0m".to_owned()),
        1 => Just("12345".to_owned()),
        1 => Just(String::new()),
        1 => Just("Proc-Type: 4,ENCRYPTED".to_owned()),
        2 => Just("error: something else happened".to_owned()),
        1 => Just("progress 40%\rMIIEvQIBADANBgkqhkiG9w0B".to_owned()),
        1 => Just("Private-Lines: 14".to_owned()),
        1 => Just("key.ppk:Public-Lines: 2".to_owned()),
        1 => Just("Private-MAC: 6c1a9e0f2b3d4c5e".to_owned()),
        1 => Just("Argon2-Salt: 5b2ec0f1".to_owned()),
        1 => "[a-zA-Z0-9 +/=:|-]{0,40}",
        1 => Just("\0\0\0\0\0\0\0\0".to_owned()),
        1 => Just("\x1b[1mstatus\x1b[0m\x07".to_owned()),
        1 => Just("--\0---BEGIN RSA PRIVATE KEY-----".to_owned()),
        1 => Just("\0-----END RSA PRIVATE KEY---\x1b[0m--".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn b30_the_index_agrees_with_the_look_back_at_every_line_start(
        lines in prop::collection::vec(line(), 0..40),
        chunk in 1usize..64,
    ) {
        let text = lines.join("\n") + "\n";
        let index = index_of(&text, chunk);
        for start in line_starts(&text) {
            let want = key_open_after(&text[..start], false);
            prop_assert_eq!(index.open_at(at(start)), Some(want), "at {} of {:?}", start, text);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// An index that skips what another read, and goes on from that one's line
    /// mark, answers what an index that read everything answers.
    #[test]
    fn b30_an_index_going_on_from_another_s_line_mark_answers_as_one_that_read_it_all(
        lines in prop::collection::vec(line(), 1..40),
        chunk in 1usize..64,
        split_pct in 0usize..=100,
    ) {
        let text = lines.join("\n") + "\n";
        let full = index_of(&text, chunk);
        let split = text.len() * split_pct / 100;
        let first = index_of(&text[..split], chunk);
        let Some((mark, open)) = first.line_mark() else {
            return Err(TestCaseError::fail("an index from the start always has a mark"));
        };
        let mark = usize::try_from(mark).unwrap_or(usize::MAX);
        prop_assert!(mark <= split && (mark == 0 || text.as_bytes()[mark - 1] == b'\n'));
        let mut going_on = KeyIndex::new();
        going_on.skip_known(at(mark), open);
        for piece in text.as_bytes()[mark..].chunks(chunk) {
            going_on.push(piece);
        }
        for offset in mark..=text.len() {
            prop_assert_eq!(
                going_on.open_at(at(offset)),
                full.open_at(at(offset)),
                "at {} (mark {}) of {:?}", offset, mark, text
            );
        }
    }
}

#[test]
fn b30_the_index_and_the_log_look_back_know_a_putty_key_file_however_long() {
    let mut text = String::from(
        "build\nPuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: k\nPublic-Lines: 1\nAAAAB3NzaC1yc2EAAAADAQABAAABAQ\nPrivate-Lines: 30000\n",
    );
    text.push_str(&BODY.repeat(30_000)); // about 1.6 MB of private lines
    let deep = text.len() - 5 * BODY.len();
    text.push_str("Private-MAC: 6c1a9e0f2b3d4c5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d\n");
    let after_mac = text.len();
    text.push_str("12345\n67890\n");
    for chunk in [1, 7, 4096, 1 << 20] {
        let index = index_of(&text, chunk);
        assert_eq!(index.open_at(at(deep)), Some(true), "chunk {chunk}");
        assert_eq!(index.open_at(at(after_mac)), Some(false), "chunk {chunk}");
    }
    assert!(key_open_after(&text[..deep], false));
    assert!(!key_open_after(&text[..after_mac], false));
    let mut file = tempfile::NamedTempFile::new().expect("a temporary file");
    std::io::Write::write_all(&mut file, text.as_bytes()).expect("write the log");
    assert!(crate::key_open_in_log(
        Some(file.as_file()),
        at(deep),
        &text[deep..]
    ));
    assert!(!crate::key_open_in_log(
        Some(file.as_file()),
        at(after_mac),
        &text[after_mac..]
    ));
}
