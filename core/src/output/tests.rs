//! Unit tests for the output tail.

use super::*;

#[test]
fn b5_tail_stays_bounded_and_keeps_the_latest_bytes() {
    let mut tail = Tail::new(10);
    for i in 0..100u8 {
        tail.push(&[i; 3], 0);
    }
    let (view, cut) = tail.view();
    assert_eq!(view.len(), 10);
    assert_eq!(view, &[96, 97, 97, 97, 98, 98, 98, 99, 99, 99][..]);
    assert!(cut);
    assert_eq!(tail.total_ingested(), 300);
    assert!(
        tail.bytes.capacity() <= 64,
        "tail capacity {}",
        tail.bytes.capacity()
    );
}

#[test]
fn b5_big_chunk_keeps_its_end() {
    let mut tail = Tail::new(4);
    tail.push(b"abcdefgh", 0);
    assert_eq!(tail.view(), (&b"efgh"[..], true));
    let mut small = Tail::new(4);
    small.push(b"ab", 0);
    assert_eq!(small.view(), (&b"ab"[..], false));
}

#[test]
fn b30_the_tail_keeps_the_key_state_of_everything_ingested() {
    // A key far longer than the tail: deep in it the state is a lookup, and it is
    // open though the tail and any fixed look-back lost the BEGIN long ago.
    let body = b"MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n";
    let mut tail = Tail::new(4096);
    tail.push(b"build ok\n-----BEGIN RSA PRIVATE KEY-----\n", 0);
    for _ in 0..5_000 {
        tail.push(body, 0);
    }
    let deep = tail.total_ingested() - 3 * body.len() as u64;
    assert_eq!(tail.key_open_at(deep), Some(true));
    tail.push(b"-----END RSA PRIVATE KEY-----\n", 0);
    for n in 0..20_000 {
        tail.push(format!("{n}\n").as_bytes(), 0);
    }
    assert_eq!(tail.key_open_at(tail.total_ingested() - 4), Some(false));
    assert_eq!(tail.key_open_at(3), Some(false));
    // Output that went by unseen (not kept, not read): the log decides there.
    tail.count_not_kept(100);
    tail.push(body, 0);
    assert_eq!(tail.key_open_at(tail.total_ingested() - 10), None);
}

#[test]
fn b30_a_backlog_that_goes_by_unheld_keeps_the_key_state_known() {
    // A chatty job's backlog is counted and read by the key index, not held: the
    // state after it is a lookup, not a read of the log back to its start.
    let body = b"MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n";
    let line = b"herd-bench ingest line 0123456789 abcdefghijklmnop\n";
    let mut tail = Tail::new(64);
    tail.push(b"build ok\n", 0);
    for _ in 0..5_000 {
        tail.pass(line);
    }
    assert_eq!(tail.view(), (&b""[..], true), "nothing of it is held");
    let after_lines = tail.total_ingested();
    assert_eq!(tail.key_open_at(after_lines), Some(false));
    tail.pass(b"-----BEGIN RSA PRIVATE KEY-----\n");
    for _ in 0..2_000 {
        tail.pass(body);
    }
    assert_eq!(tail.key_open_at(tail.total_ingested() - 5), Some(true));
    tail.push(body, 0);
    assert_eq!(tail.view(), (&body[..], true), "only what follows is held");
    assert_eq!(tail.key_open_at(tail.total_ingested() - 5), Some(true));
    tail.pass(b"-----END RSA PRIVATE KEY-----\n");
    tail.pass(line);
    assert_eq!(tail.key_open_at(tail.total_ingested() - 5), Some(false));
    assert_eq!(
        tail.total_ingested(),
        after_lines + 32 + 2_001 * 53 + 30 + 51
    );
}

/// A nonblocking pipe holding `bytes`, its write end kept open unless `close`.
fn pipe_with(bytes: &[u8], close: bool) -> (std::os::fd::OwnedFd, Option<std::os::fd::OwnedFd>) {
    let (read, write) = nix::unistd::pipe().expect("a pipe");
    nix::fcntl::fcntl(
        &read,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .expect("nonblocking");
    assert_eq!(
        nix::unistd::write(&write, bytes).expect("write"),
        bytes.len()
    );
    (read, (!close).then_some(write))
}

#[test]
fn b5_a_spliced_pipe_lands_in_the_log_byte_for_byte_after_what_was_written() {
    use std::os::fd::AsFd;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("log");
    let mut log = LogWriter::new(path.clone(), 1 << 20);
    // Before the file exists a splice cannot go: the reader writes the first bytes.
    let (pipe, writer) = pipe_with(b"second\nthird\n", false);
    assert_eq!(log.splice_from(pipe.as_fd(), 1 << 20), Spliced::Unavailable);
    assert_eq!(log.write(b"first\n"), 0);
    assert_eq!(log.splice_from(pipe.as_fd(), 1 << 20), Spliced::Moved(13));
    assert_eq!(log.splice_from(pipe.as_fd(), 1 << 20), Spliced::Empty);
    drop(writer);
    assert_eq!(log.splice_from(pipe.as_fd(), 1 << 20), Spliced::Eof);
    assert_eq!(
        std::fs::read(&path).expect("the log"),
        b"first\nsecond\nthird\n"
    );
}

#[test]
fn b5_a_splice_stops_at_the_log_cap_and_leaves_the_rest_in_the_pipe() {
    use std::os::fd::AsFd;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("log");
    let mut log = LogWriter::new(path.clone(), 10);
    assert_eq!(log.write(b"abc"), 0);
    let (pipe, _writer) = pipe_with(b"defghijklmnop", true);
    assert_eq!(log.splice_from(pipe.as_fd(), 1 << 20), Spliced::Moved(7));
    // At the cap: the rest is read and counted as not kept, as before splices.
    assert_eq!(log.splice_from(pipe.as_fd(), 1 << 20), Spliced::Unavailable);
    let mut rest = [0u8; 16];
    let n = nix::unistd::read(&pipe, &mut rest).expect("read the rest");
    assert_eq!(&rest[..n], b"klmnop");
    assert_eq!(log.write(&rest[..n]), 6);
    assert_eq!(std::fs::read(&path).expect("the log"), b"abcdefghij");
}
