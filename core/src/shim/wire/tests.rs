//! Tests for the shim frames: every split of a stream gives the same frames.

use super::*;

fn stream() -> Vec<u8> {
    let mut out = Vec::new();
    encode(
        &ToShim::Hello {
            protocol: 1,
            daemon: "0.1.0".to_owned(),
        },
        b"",
        &mut out,
    );
    encode(&ToShim::Stdin { id: 3, len: 5 }, b"ab\ncd", &mut out);
    encode(&ToShim::Want { after: 10 }, b"", &mut out);
    out
}

fn frames(chunks: &[&[u8]]) -> Vec<(ToShim, Vec<u8>)> {
    let mut reader = FrameReader::default();
    let mut got = Vec::new();
    for chunk in chunks {
        reader.feed(chunk);
        while let Some(frame) = reader.next().expect("valid") {
            let msg: ToShim = serde_json::from_slice(&frame.header).expect("a message");
            got.push((msg, frame.body));
        }
    }
    assert_eq!(reader.pending_bytes(), 0);
    got
}

#[test]
fn frames_parse_the_same_at_every_split() {
    let bytes = stream();
    let whole = frames(&[&bytes]);
    assert_eq!(whole.len(), 3);
    assert_eq!(
        whole[1],
        (ToShim::Stdin { id: 3, len: 5 }, b"ab\ncd".to_vec())
    );
    for cut in 0..bytes.len() {
        assert_eq!(
            frames(&[&bytes[..cut], &bytes[cut..]]),
            whole,
            "split at {cut}"
        );
    }
}

#[test]
fn oversized_frames_are_errors() {
    let mut reader = FrameReader::default();
    reader.feed(&vec![b'x'; MAX_HEADER_BYTES + 1]);
    assert!(matches!(reader.next(), Err(FrameError::HeaderTooLong)));
    let mut reader = FrameReader::default();
    reader.feed(
        format!(
            "{{\"op\":\"stdin\",\"id\":1,\"len\":{}}}\n",
            MAX_BODY_BYTES + 1
        )
        .as_bytes(),
    );
    assert!(matches!(reader.next(), Err(FrameError::BodyTooLong(_))));
}

#[test]
fn an_unknown_op_is_a_frame_whose_message_does_not_parse() {
    let mut reader = FrameReader::default();
    reader.feed(b"{\"op\":\"teleport\"}\n");
    let frame = reader.next().expect("a frame").expect("complete");
    assert!(serde_json::from_slice::<ToShim>(&frame.header).is_err());
}
