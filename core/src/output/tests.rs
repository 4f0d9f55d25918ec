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
