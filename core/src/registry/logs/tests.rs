//! `read_chunk`'s one-read decoding against the part-by-part decoding it
//! replaced, on text with multi-byte characters and invalid bytes cut at every
//! offset.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

use herd_hooks::{KEY_LOOKBACK_BYTES, LINE_CONTEXT_BYTES};

use super::{chunk_end, chunk_next_byte, read_chunk};
use crate::text;

/// The reading before `read_chunk` read in one go: the chunk, then the context
/// before it and after it from the file, each part decoded on its own.
fn part_by_part(
    path: &std::path::Path,
    from_byte: u64,
    max_bytes: usize,
    is_running: bool,
) -> (String, std::ops::Range<usize>, u64) {
    let file = File::open(path).expect("the log opens");
    let len = file.metadata().expect("metadata").len();
    let from_byte = from_byte.min(len);
    let max_bytes = max_bytes.max(1);
    let mut bytes =
        vec![0; usize::try_from((len - from_byte).min(max_bytes as u64)).expect("small")];
    crate::output::read_fully(&file, &mut bytes, from_byte).expect("read");
    let at_end = from_byte + bytes.len() as u64 >= len;
    let keep = chunk_end(&bytes, max_bytes, is_running, at_end);
    let lead = if from_byte > 0 {
        bytes[..keep.min(3)]
            .iter()
            .take_while(|b| (**b & 0xC0) == 0x80)
            .count()
    } else {
        0
    };
    let before = crate::output::text_before(&file, from_byte + lead as u64).expect("read");
    let after = if keep > 0 && !matches!(bytes[keep - 1], b'\n' | b'\r') {
        let mut after = bytes[keep..].to_vec();
        let want = LINE_CONTEXT_BYTES.saturating_sub(after.len());
        let mut more = vec![0; want];
        let n = file
            .read_at(&mut more, from_byte + bytes.len() as u64)
            .expect("read");
        after.extend_from_slice(&more[..n]);
        after
    } else {
        Vec::new()
    };
    let chunk = String::from_utf8_lossy(&bytes[lead..keep]);
    let after = text::decode_tail(&after, true, true);
    let source = format!("{before}{chunk}{after}");
    (
        source,
        before.len()..before.len() + chunk.len(),
        from_byte + keep as u64,
    )
}

#[test]
fn one_read_decodes_as_the_parts_did_at_every_cut() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("log");
    // Lines of ASCII, two-, three- and four-byte characters, a line longer than
    // the chunk, and bytes that are not UTF-8 (a lone continuation byte, a
    // truncated sequence).
    let mut log: Vec<u8> = Vec::new();
    for n in 0..14 {
        log.extend_from_slice(format!("line {n} café 日本語 🦀 ok\n").as_bytes());
        if n % 5 == 2 {
            log.extend_from_slice(b"bad \x80 here \xe6\x97 cut\n");
        }
        if n % 7 == 3 {
            log.extend_from_slice("é".repeat(80).as_bytes());
            log.push(b'\n');
        }
    }
    // Enough before the cuts that the look-back is cut too.
    let mut file = File::create(&path).expect("create");
    let pad = "ab é\n".repeat(KEY_LOOKBACK_BYTES / 5 + 3);
    file.write_all(pad.as_bytes()).expect("write");
    file.write_all(&log).expect("write");
    file.write_all("trailing 日".as_bytes()).expect("write");
    drop(file);
    let len = std::fs::metadata(&path).expect("metadata").len();
    let base = pad.len() as u64;
    for from in (0..20).chain(base - 8..len) {
        for (max, running) in [(5, true), (150, false), (1 << 20, false)] {
            let read = read_chunk(&path, from, max, running, &|_| None)
                .expect("reads")
                .expect("a log");
            let (source, range, next) = part_by_part(&path, from, max, running);
            assert_eq!(read.source, source, "source from {from} max {max}");
            assert_eq!(read.range, range, "range from {from} max {max}");
            assert_eq!(read.next_byte, next, "next from {from} max {max}");
            // A dump starts the next chunk where this says, found
            // without the context or redaction, for a finished session's log.
            if !running {
                let end = chunk_next_byte(&path, from, max).expect("reads");
                assert_eq!(end, Some(read.next_byte), "end from {from} max {max}");
            }
        }
    }
}
