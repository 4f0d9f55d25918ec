//! The block read-out against the sequential redaction: the same bytes for random
//! logs with secrets and private-key blocks, read in random pieces on 1 to 4
//! threads.

use proptest::prelude::*;

use super::*;

/// One line of a random log: plain text, a secret, part of a key block, a line
/// with escapes or invisible characters around a token, or a long line.
fn line(kind: u8, n: usize) -> String {
    let filler = |len: usize| "abcdefghij klmnop ".repeat(len / 18 + 1)[..len].to_owned();
    match kind % 12 {
        0..=2 => format!(
            "INFO worker-{n} processed batch {n} status=ok {}",
            filler(n % 90)
        ),
        3 => format!("token ghp_abcdefghijklmnopqrstuvwxyz0123456789{n} used"),
        4 => "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345".to_owned(),
        5 => "-----BEGIN RSA PRIVATE KEY-----".to_owned(),
        6 | 7 => "MIIEpAIBAAKCAQEA0123456789abcdefghijklmnopqrstuvwxyzABCDEF".to_owned(),
        8 => "-----END RSA PRIVATE KEY-----".to_owned(),
        9 => format!("db postgres://user:hunter2pass{n}@db.example:5432/app"),
        10 => "see \x1b[1msk-\u{200b}proj-AbCdEfGhIjKlMnOpQrStUvWx_yz-12\x1b[0m here".to_owned(),
        _ => filler(20_000 + n * 37),
    }
}

/// A log of `lines` with `ends` (line ends, `\r\n` among them), at least a few
/// blocks long.
fn log_of(lines: &[(u8, usize)], crlf: bool) -> String {
    let mut text = String::new();
    while text.len() < 2 * BLOCK_BYTES + BLOCK_BYTES / 2 {
        for (kind, n) in lines {
            text.push_str(&line(*kind, *n));
            text.push_str(if crlf && n % 3 == 0 { "\r\n" } else { "\n" });
        }
    }
    text
}

/// Reads `text` out as the daemon does: pieces of the given sizes appended to the
/// unconsumed rest of the last read, the key state carried. With `reread`, as the
/// log read-out does: each read starts where the last one's blocks ended and reads
/// its unconsumed rest again from the text.
fn read_out(text: &str, pieces: &[usize], threads: usize, reread: bool) -> String {
    read_out_as(text, pieces, threads, reread, |v| v, |v| v)
}

/// A text the read-out copies block by block before it reads it, as it does a
/// log file's mapped pages.
#[derive(Debug)]
struct Changing(Vec<u8>);

impl AsRef<[u8]> for Changing {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl LogText for Changing {
    fn may_change(&self) -> bool {
        true
    }
}

/// [`read_out`] of texts held as `T`.
fn read_out_as<T: LogText + std::fmt::Debug>(
    text: &str,
    pieces: &[usize],
    threads: usize,
    reread: bool,
    hold: impl Fn(Vec<u8>) -> T,
    give_back: impl Fn(T) -> Vec<u8>,
) -> String {
    let pipeline = Pipeline::redaction_only();
    let mut out: Vec<u8> = Vec::new();
    let mut carry: Vec<u8> = Vec::new();
    let mut key_open = false;
    let mut pos = 0;
    let mut idx = 0;
    while pos < text.len() || !carry.is_empty() {
        let mut next = (pos + pieces[idx % pieces.len()]).min(text.len());
        idx += 1;
        while !text.is_char_boundary(next) {
            next += 1;
        }
        let edge = pos - carry.len();
        carry.extend_from_slice(&text.as_bytes()[pos..next]);
        pos = next;
        let at_end = pos == text.len();
        let read = if reread {
            text.as_bytes()[edge..pos].to_vec()
        } else {
            std::mem::take(&mut carry)
        };
        assert_eq!(blocks_end(&read, at_end), blocks(&read, at_end).1);
        let shown = pipeline
            .show_log_blocks("make", hold(read), key_open, at_end, threads)
            .expect("a plain pipeline reads out in blocks");
        for (piece, extent) in shown.pieces().zip(shown.extents()) {
            match (piece, extent) {
                (Piece::Read { at, bytes }, Extent::Same(range)) => {
                    assert_eq!(bytes, &text.as_bytes()[edge + at..edge + at + bytes.len()]);
                    assert_eq!(range, at..at + bytes.len());
                }
                // A changed block is shown again the same from the log alone.
                (Piece::Redacted(bytes), Extent::Changed { block, key_open }) => {
                    let again = pipeline
                        .show_log_block("make", &text.as_bytes()[edge..][block], key_open)
                        .expect("a plain pipeline shows a block");
                    assert_eq!(again.as_bytes(), bytes);
                }
                (piece, extent) => panic!("{piece:?} is not {extent:?}"),
            }
            out.extend_from_slice(piece.bytes());
        }
        key_open = shown.key_open_after();
        let consumed = shown.consumed();
        carry = give_back(shown.into_text()).split_off(consumed);
        if at_end {
            assert!(carry.is_empty(), "everything is consumed at the end");
            break;
        }
    }
    String::from_utf8(out).expect("shown text is text")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]

    #[test]
    fn b30_the_parallel_read_out_equals_the_sequential_redaction(
        lines in proptest::collection::vec((0u8..12, 0usize..400), 1..60),
        pieces in proptest::collection::vec(1usize..200_000, 1..6),
        threads in 1usize..5,
        crlf in any::<bool>(),
        reread in any::<bool>(),
        copied in any::<bool>(),
    ) {
        let text = log_of(&lines, crlf);
        let expected = Redactor::builtin().redact(&text, RedactMode::Code).into_owned();
        let got = if copied {
            read_out_as(&text, &pieces, threads, reread, Changing, |c| c.0)
        } else {
            read_out(&text, &pieces, threads, reread)
        };
        prop_assert!(got == expected, "the read-out differs from the sequential redaction");
    }
}

#[test]
fn b30_unchanged_blocks_are_handed_out_as_the_text_read() {
    let text = log_of(&[(0, 7), (1, 300)], false);
    let pipeline = Pipeline::redaction_only();
    let shown = pipeline
        .show_log_blocks("make", text.clone().into_bytes(), false, true, 2)
        .expect("a plain pipeline reads out in blocks");
    // Two runs of clean blocks, joined into one range of the text.
    assert_eq!(shown.parts().count(), 1);
    assert_eq!(shown.consumed(), text.len());
    assert_eq!(shown.parts().next(), Some(text.as_bytes()));
}

#[test]
fn b30_a_key_block_across_runs_is_masked_on_every_thread() {
    // A key block that opens in the first run and goes on past the second's start.
    let mut text = log_of(&[(0, 1)], false);
    text.push_str("-----BEGIN RSA PRIVATE KEY-----\n");
    while text.len() < 6 * BLOCK_BYTES {
        text.push_str("MIIEpAIBAAKCAQEA0123456789abcdefghijklmnopqrstuvwxyzABCDEF\n");
    }
    let expected = Redactor::builtin()
        .redact(&text, RedactMode::Code)
        .into_owned();
    assert_eq!(read_out(&text, &[BLOCK_BYTES * 2], 3, false), expected);
    assert_eq!(read_out(&text, &[BLOCK_BYTES * 2], 3, true), expected);
    let copied = read_out_as(&text, &[BLOCK_BYTES * 2], 3, true, Changing, |c| c.0);
    assert_eq!(
        copied, expected,
        "a text copied block by block (a mapped log)"
    );
    assert!(!expected.contains("MIIEpAIBAAKCAQEA"));
}

#[test]
fn b30_hooks_an_env_dump_or_config_patterns_keep_their_own_route() {
    let plain = Pipeline::redaction_only();
    assert!(plain.shows_log_blocks("make"));
    assert!(!plain.shows_log_blocks("env"));
    let config = crate::RedactorConfig {
        extra_patterns: vec!["internal-[0-9]+".to_owned()],
    };
    let extra = Pipeline::new(crate::HookChain::default(), &config).expect("a valid pattern");
    assert!(!extra.shows_log_blocks("make"));
    assert!(
        extra
            .show_log_blocks("make", b"a\n".to_vec(), false, true, 2)
            .is_none()
    );
}

#[test]
fn b30_the_read_out_stops_at_the_first_block_that_is_not_text() {
    // Clean blocks, then a token, then a block with a byte that is not UTF-8, then
    // more text: the blocks before it are shown, redacted; it and the rest not.
    let mut text = log_of(&[(0, 3)], false).into_bytes();
    text.extend_from_slice(b"token ghp_abcdefghijklmnopqrstuvwxyz0123456789 used\n");
    let bad_block = text.len() + BLOCK_BYTES;
    while text.len() < bad_block + 10 {
        text.extend_from_slice(b"INFO worker processed batch status=ok\n");
    }
    let (cut, _) = blocks(&text, true);
    let bad = cut
        .iter()
        .find(|b| b.contains(&bad_block))
        .expect("a block holds the byte")
        .clone();
    text[bad_block] = 0xff;
    text.extend_from_slice(log_of(&[(1, 9)], false).as_bytes());
    for threads in 1..4 {
        let shown = Pipeline::redaction_only()
            .show_log_blocks("make", text.clone(), false, true, threads)
            .expect("a plain pipeline reads out in blocks");
        assert!(shown.not_text(), "{threads} threads");
        assert_eq!(shown.consumed(), bad.start, "{threads} threads");
        let before = std::str::from_utf8(&text[..bad.start]).expect("text before it");
        let expected = Redactor::builtin()
            .redact(before, RedactMode::Code)
            .into_owned();
        let got: Vec<u8> = shown.parts().flatten().copied().collect();
        assert_eq!(
            String::from_utf8(got).expect("text"),
            expected,
            "{threads} threads"
        );
        assert!(!expected.contains("ghp_abcdefghijklmnop"));
    }
}
