//! Secrets inside escape bodies: masked in place, the escape kept well-formed.

use super::bodies;
use crate::{RedactMode, Redactor};

#[test]
fn b30_credentials_inside_an_osc8_link_target_are_masked() {
    let redactor = Redactor::builtin();
    let pass = "Sup3rS3cretPassw0rd";
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    for (text, kept) in [
        (
            format!("\x1b]8;;https://deploy:{pass}@git.example.com/repo\x1b\\repo\x1b]8;;\x1b\\\n"),
            vec![
                "\x1b]8;;https://deploy:",
                "@git.example.com/repo\x1b\\repo\x1b]8;;\x1b\\",
            ],
        ),
        (
            format!("see \x1b]8;id=1;ftp://me:{pass}@ftp.example.com/\x07here\x1b]8;;\x07 ok"),
            vec![
                "see \x1b]8;id=1;ftp://me:",
                "@ftp.example.com/\x07here\x1b]8;;\x07 ok",
            ],
        ),
        (
            format!(
                "\x1b]8;;https://api.example.com/?access_token={token}\x1b\\link\x1b]8;;\x1b\\"
            ),
            vec![
                "\x1b]8;;https://api.example.com/?access_token=",
                "\x1b\\link\x1b]8;;\x1b\\",
            ],
        ),
        (
            format!("\x1b]0;deploy with {token}\x07$ "),
            vec!["\x1b]0;deploy with ", "\x07$ "],
        ),
        (
            format!("\x1bP1;1|{token}\x1b\\"),
            vec!["\x1bP1;1|", "\x1b\\"],
        ),
        (
            format!("\u{9d}8;;https://u:{pass}@h/\u{9c}x\u{9d}8;;\u{9c}"),
            vec!["\u{9d}8;;https://u:", "@h/\u{9c}x\u{9d}8;;\u{9c}"],
        ),
    ] {
        let out = redactor.redact(&text, RedactMode::Code);
        assert!(
            !out.contains(pass) && !out.contains(&token[8..]),
            "{text:?}: {out:?}"
        );
        for part in kept {
            assert!(out.contains(part), "{text:?} lost {part:?}: {out:?}");
        }
        // Still one escape for each: the body holds no control byte of the mask.
        assert_eq!(bodies(&out).len(), bodies(&text).len(), "{out:?}");
    }
}

#[test]
fn b30_escape_bodies_without_secrets_stay() {
    let redactor = Redactor::builtin();
    for text in [
        "\x1b]8;;https://example.com/docs/page.html\x1b\\docs\x1b]8;;\x1b\\",
        "\x1b]0;user@host: ~/src\x07",
        "\x1b]133;A\x07$ ls\n",
        "\x1b[1;32mok\x1b[0m",
    ] {
        assert_eq!(redactor.redact(text, RedactMode::Code), text);
    }
}
