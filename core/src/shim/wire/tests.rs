//! Tests for the shim frames: every split of a stream gives the same frames, in both
//! framings, and a failed encode leaves nothing behind.

use std::collections::BTreeMap;

use super::*;

fn stream(framing: Framing) -> Vec<u8> {
    let mut out = Vec::new();
    // The hello is always a line; what follows is in the link's framing.
    encode(
        Framing::Lines,
        &ToShim::Hello {
            protocol: 2,
            daemon: "0.1.0".to_owned(),
            capabilities: capabilities(),
        },
        b"",
        &mut out,
    );
    encode(
        framing,
        &ToShim::Stdin { id: 3, len: 5 },
        b"ab\ncd",
        &mut out,
    );
    encode(
        framing,
        &ToShim::Want {
            after: 10,
            mark_lag: None,
        },
        b"",
        &mut out,
    );
    out
}

fn frames(framing: Framing, chunks: &[&[u8]]) -> Vec<(ToShim, Vec<u8>)> {
    let mut reader = FrameReader::default();
    let mut got = Vec::new();
    for chunk in chunks {
        reader.feed(chunk);
        while let Some(frame) = reader.next().expect("valid") {
            let msg: ToShim = serde_json::from_slice(&frame.header).expect("a message");
            if matches!(msg, ToShim::Hello { .. }) {
                reader.set_framing(framing);
            }
            got.push((msg, frame.body));
        }
    }
    assert_eq!(reader.pending_bytes(), 0);
    got
}

#[test]
fn frames_parse_the_same_at_every_split() {
    for framing in [Framing::Lines, Framing::Lengths] {
        let bytes = stream(framing);
        let whole = frames(framing, &[&bytes]);
        assert_eq!(whole.len(), 3);
        assert_eq!(
            whole[1],
            (ToShim::Stdin { id: 3, len: 5 }, b"ab\ncd".to_vec())
        );
        for cut in 0..bytes.len() {
            assert_eq!(
                frames(framing, &[&bytes[..cut], &bytes[cut..]]),
                whole,
                "{framing:?} split at {cut}"
            );
        }
    }
}

#[test]
fn a_length_prefixed_frame_is_its_two_lengths_then_its_parts() {
    let mut out = Vec::new();
    encode(Framing::Lengths, &ToShim::Close { id: 7 }, b"xyz", &mut out);
    let header = br#"{"op":"close","id":7}"#;
    assert_eq!(&out[..4], &(header.len() as u32).to_le_bytes());
    assert_eq!(&out[4..8], &3u32.to_le_bytes());
    assert_eq!(&out[8..8 + header.len()], header);
    assert_eq!(&out[8 + header.len()..], b"xyz");
}

#[test]
fn oversized_frames_are_errors() {
    let mut reader = FrameReader::default();
    reader.feed(&vec![b'x'; MAX_HEADER_BYTES + 1]);
    assert!(matches!(reader.next(), Err(FrameError::HeaderTooLong(_))));
    let mut reader = FrameReader::default();
    reader.feed(
        format!(
            "{{\"op\":\"stdin\",\"id\":1,\"len\":{}}}\n",
            MAX_BODY_BYTES + 1
        )
        .as_bytes(),
    );
    assert!(matches!(reader.next(), Err(FrameError::BodyTooLong(..))));
    let mut reader = FrameReader::new(Framing::Lengths, 16, 16);
    reader.feed(&17u32.to_le_bytes());
    reader.feed(&0u32.to_le_bytes());
    assert!(matches!(reader.next(), Err(FrameError::HeaderTooLong(16))));
    let mut reader = FrameReader::new(Framing::Lengths, 16, 16);
    reader.feed(&2u32.to_le_bytes());
    reader.feed(&17u32.to_le_bytes());
    assert!(matches!(
        reader.next(),
        Err(FrameError::BodyTooLong(17, 16))
    ));
}

#[test]
fn an_unknown_op_is_a_frame_whose_message_does_not_parse() {
    let mut reader = FrameReader::default();
    reader.feed(b"{\"op\":\"teleport\"}\n");
    let frame = reader.next().expect("a frame").expect("complete");
    assert!(serde_json::from_slice::<ToShim>(&frame.header).is_err());
}

#[test]
fn a_failed_encode_leaves_the_buffer_as_it_was() {
    // A map with non-string keys fails half-way through (after its opening brace).
    let mut bad = BTreeMap::new();
    bad.insert(vec![1u8], 1u8);
    for framing in [Framing::Lines, Framing::Lengths] {
        let mut out = Vec::new();
        encode(
            framing,
            &ToShim::Want {
                after: 1,
                mark_lag: None,
            },
            b"",
            &mut out,
        );
        let before = out.clone();
        assert!(framing.encode(&bad, b"body", &mut out).is_err());
        assert_eq!(out, before, "{framing:?}: no partial frame left");
        encode(
            framing,
            &ToShim::Want {
                after: 2,
                mark_lag: None,
            },
            b"",
            &mut out,
        );
        let mut reader = FrameReader::new(framing, MAX_HEADER_BYTES, MAX_BODY_BYTES);
        reader.feed(&out);
        assert!(reader.next().expect("valid").is_some());
        assert!(reader.next().expect("valid, no debris").is_some());
    }
}

// B28: key marks cross versions. An older daemon's `want` (no `mark_lag`) and an
// older shim's `grew` and `exit` (no `mark`) parse as asking for and giving none;
// a newer side writes the fields only when it has them, and its `want` with a lag
// parses on an older shim (unknown fields are ignored there, as here).
#[test]
fn b28_key_marks_are_optional_both_ways() {
    let want: ToShim = serde_json::from_str(r#"{"op":"want","after":5}"#).expect("an old want");
    assert_eq!(
        want,
        ToShim::Want {
            after: 5,
            mark_lag: None
        }
    );
    let asked = ToShim::Want {
        after: 5,
        mark_lag: Some(266_000),
    };
    let text = serde_json::to_string(&asked).expect("encodes");
    assert_eq!(text, r#"{"op":"want","after":5,"mark_lag":266000}"#);
    let progress = r#"{"log_bytes":7,"total_ingested":7,"bytes_not_kept":0}"#;
    let grew: FromShim =
        serde_json::from_str(&format!(r#"{{"op":"grew","progress":{progress}}}"#)).expect("old");
    assert!(
        matches!(grew, FromShim::Grew { mark: None, .. }),
        "{grew:?}"
    );
    let given = FromShim::Grew {
        progress: Progress {
            log_bytes: 7,
            total_ingested: 7,
            bytes_not_kept: 0,
        },
        mark: Some(KeyMark { at: 4, open: true }),
    };
    let text = serde_json::to_string(&given).expect("encodes");
    assert!(text.ends_with(r#""mark":{"at":4,"open":true}}"#), "{text}");
    let back: FromShim = serde_json::from_str(&text).expect("parses");
    assert_eq!(back, given);
    // An unknown field (a newer side's) is ignored.
    let newer: ToShim =
        serde_json::from_str(r#"{"op":"want","after":1,"mark_lag":9,"later":true}"#)
            .expect("newer");
    assert!(matches!(
        newer,
        ToShim::Want {
            after: 1,
            mark_lag: Some(9)
        }
    ));
}
