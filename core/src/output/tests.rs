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
