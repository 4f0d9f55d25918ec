//! Unit tests of the detach key's notation and the decoding of typed bytes.

use super::{DetachKey, decode_keys};

#[test]
fn caret_notation_names_the_control_byte() {
    for (text, byte, name) in [
        ("^\\", 0x1c, "Ctrl-\\"),
        ("^X", 0x18, "Ctrl-X"),
        ("^x", 0x18, "Ctrl-X"),
        ("^A", 0x01, "Ctrl-A"),
        ("^]", 0x1d, "Ctrl-]"),
        ("^@", 0x00, "Ctrl-@"),
        ("^_", 0x1f, "Ctrl-_"),
    ] {
        let key = DetachKey::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!((key.byte(), key.name().as_str()), (byte, name), "{text}");
    }
}

#[test]
fn anything_but_one_control_key_is_refused_saying_what_is_accepted() {
    for text in ["", "^", "X", "^XY", "^1", "^?", "ctrl-x", "^é"] {
        let err = DetachKey::parse(text).expect_err(text);
        assert!(
            err.contains("caret notation") && err.contains(&format!("`{text}`")),
            "{text}: {err}"
        );
    }
}

#[test]
fn a_character_cut_between_reads_is_sent_whole() {
    let mut carry = Vec::new();
    let euro = "€".as_bytes();
    assert_eq!(decode_keys(&mut carry, &[b'a', euro[0], euro[1]]), "a");
    assert_eq!(decode_keys(&mut carry, &[euro[2], 0x03]), "€\u{3}");
    assert!(carry.is_empty());
    // A byte that is no UTF-8 at all is not held back.
    assert_eq!(
        decode_keys(&mut carry, &[0xff, b'\x1b', b'[', b'A']),
        "\u{fffd}\x1b[A"
    );
    assert!(carry.is_empty());
}

// B7: the queries the live stream held while the screen was rebuilt
// are found, in order, to be asked of the real terminal once it is painted;
// other escapes are not queries.
#[test]
fn b7_queries_held_by_the_catch_up_are_found() {
    let mut found = String::new();
    super::terminal::queries_in(
        "a\x1b[6nb\x1b[1mc\x1b[?2004$p\x1b[c\x1b[?25h\x1b[18t\x1b[?$p\x1b[5",
        &mut found,
    );
    assert_eq!(found, "\x1b[6n\x1b[?2004$p\x1b[c\x1b[18t");
}
