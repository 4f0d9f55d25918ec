//! Table tests for every secret family, text that must stay, the mask format,
//! mode detection, extra patterns and streaming across chunk boundaries.

use super::*;

fn check(mode: RedactMode, input: &str, expected: &str) {
    let r = Redactor::builtin();
    let got = r.redact(input, mode);
    assert_eq!(got, expected, "input: {input:?}");
}

fn code(input: &str, expected: &str) {
    check(RedactMode::Code, input, expected);
}

fn dump(input: &str, expected: &str) {
    check(RedactMode::SecretDump, input, expected);
}

#[test]
fn mask_format_keeps_6_and_4_or_stars() {
    assert_eq!(mask("abcdefghijklmnopqr"), "abcdef...opqr");
    assert_eq!(mask("abcdefghijklmnopq"), "***");
    assert_eq!(mask(""), "***");
}

#[test]
fn provider_prefixes_are_masked() {
    let cases = [
        ("sk-abcdefghijklmnopqrstuvwxyz", "sk-abc...wxyz"),
        ("sk-proj-AbCdEfGhIjKlMnOpQrStUvWx_yz-12", "sk-pro...z-12"),
        ("sk-ant-api03-abcdefghijklmnopqrstuv", "sk-ant...stuv"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_ab...6789"),
        (
            "github_pat_11ABCDEFG0123456789_abcdefghijkl",
            "github...ijkl",
        ),
        ("gho_abcdefghijklmnopqrstuvwxyz0123", "gho_ab...0123"),
        ("ghu_abcdefghijklmnopqrstuvwxyz0123", "ghu_ab...0123"),
        ("ghs_abcdefghijklmnopqrstuvwxyz0123", "ghs_ab...0123"),
        ("ghr_abcdefghijklmnopqrstuvwxyz0123", "ghr_ab...0123"),
        ("xoxb-1234567890-abcdefghijkl", "xoxb-1...ijkl"),
        ("xoxp-1234567890-abcdefghijkl", "xoxp-1...ijkl"),
        ("xapp-1-A0123456789-abcdef", "xapp-1...cdef"),
        ("AIzaSyA1234567890abcdefghijklmnopqrstu", "AIzaSy...rstu"),
        ("AKIAABCDEFGHIJKLMNOP", "AKIAAB...MNOP"),
        ("hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "hf_abc...EFGH"),
        ("glpat-abcdefghij1234567890", "glpat-...7890"),
        ("gldt-abcdefghij1234567890", "gldt-a...7890"),
        ("GR1348941abcdefghij1234567890", "GR1348...7890"),
        ("npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm_ab...6789"),
        ("pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdo", "pypi-A...Zmdo"),
        ("sk_live_abcdefghijklmnop1234", "sk_liv...1234"),
        ("sk_test_abcdefghijklmnop1234", "sk_tes...1234"),
        ("rk_live_abcdefghijklmnop1234", "rk_liv...1234"),
        (
            "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz012",
            "SG.abc...z012",
        ),
        ("xai-abcdefghijklmnopqrstuvwxyz0123", "xai-ab...0123"),
        ("gsk_abcdefghijklmnopqrstuvwxyz0123", "gsk_ab...0123"),
        ("pplx-abcdefghijklmnopqrstuvwxyz", "pplx-a...wxyz"),
        ("r8_abcdefghijklmnopqrstuvwxyz", "r8_abc...wxyz"),
        ("dop_v1_abcdef0123456789abcdef", "dop_v1...cdef"),
        ("tvly-abcdefghijklmnopqrstuv", "tvly-a...stuv"),
        ("fc-0123456789abcdef0123456789abcdef", "fc-012...cdef"),
        ("fw_abcdefghijklmnopqrstuv", "fw_abc...stuv"),
        ("pk-lf-0123456789-abcdefgh", "pk-lf-...efgh"),
        (
            "gAAAAABlabcdefghijklmnopqrstuvwxyz0123456789ABCDEF==",
            "gAAAAA...EF==",
        ),
        // Zhipu: 32 hex, a dot, 16+ alphanumerics.
        (
            "0123456789abcdef0123456789abcdef.AbCdEfGhIjKlMnOp",
            "012345...MnOp",
        ),
    ];
    for (secret, masked) in cases {
        code(
            &format!("using {secret} now"),
            &format!("using {masked} now"),
        );
    }
}

#[test]
fn short_tokens_become_stars() {
    code("AWS ASIAABCDEFGHIJKLMNOP.", "AWS ASIAAB...MNOP.");
    code("call +14155550123 today", "call *** today");
}

#[test]
fn jwt_is_masked() {
    code(
        "token=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U;",
        "token=eyJhbG...sR8U;",
    );
}

#[test]
fn authorization_keeps_the_scheme() {
    code(
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz",
        "Authorization: Bearer abcdef...wxyz",
    );
    code(
        "proxy-authorization: Basic dXNlcjpwYXNz",
        "proxy-authorization: Basic ***",
    );
    code(
        r#"-H "Authorization: token ghp_abcdefghijklmnopqrstuvwxyz0123456789""#,
        r#"-H "Authorization: token ghp_ab...6789""#,
    );
    code("authorization=opaquevalue123", "authorization=***");
}

#[test]
fn api_key_headers_are_masked() {
    code(
        "x-api-key: abcdefghijklmnopqrstuvwxyz",
        "x-api-key: abcdef...wxyz",
    );
    code("X-Goog-Api-Key: short", "X-Goog-Api-Key: ***");
    code(
        "curl 'https://h/x?apikey=abcdefghijklmnopqrst&q=1'",
        "curl 'https://h/x?apikey=abcdef...qrst&q=1'",
    );
    code("X-Auth-Token: $TOKEN", "X-Auth-Token: $TOKEN");
}

#[test]
fn private_key_blocks_are_replaced() {
    code(
        "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----\nafter",
        "before\n[REDACTED PRIVATE KEY]\n[REDACTED PRIVATE KEY]\n[REDACTED PRIVATE KEY]\n[REDACTED PRIVATE KEY]\nafter",
    );
    code(
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----",
        "[REDACTED PRIVATE KEY]\n[REDACTED PRIVATE KEY]\n[REDACTED PRIVATE KEY]",
    );
    // Public keys and certificates stay.
    code(
        "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
        "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
    );
}

#[test]
fn database_passwords_are_masked() {
    code(
        "postgres://app:s3cr3t@db:5432/x",
        "postgres://app:***@db:5432/x",
    );
    code("postgresql://u:pw@h/db", "postgresql://u:***@h/db");
    code(
        "mysql://root:hunter2@localhost/db",
        "mysql://root:***@localhost/db",
    );
    code(
        "mongodb+srv://me:p%40ss@cluster0.mongodb.net",
        "mongodb+srv://me:***@cluster0.mongodb.net",
    );
    code("redis://:authpass@cache:6379", "redis://:***@cache:6379");
    code("amqp://guest:guest@rabbit//", "amqp://guest:***@rabbit//");
    // Templates are code, not secrets.
    code(
        "postgres://{user}:{password}@{host}/db",
        "postgres://{user}:{password}@{host}/db",
    );
}

#[test]
fn url_userinfo_tokens_are_masked() {
    code(
        "remote https://abcdefghijklmnopqrstuv@github.com/o/r",
        "remote https://abcdef...stuv@github.com/o/r",
    );
    code("ssh://git@github.com/o/r", "ssh://git@github.com/o/r");
}

#[test]
fn telegram_bot_tokens_keep_the_bot_id() {
    code(
        "bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawX ok",
        "bot 123456789:*** ok",
    );
}

#[test]
fn env_dump_assignments_are_masked() {
    dump(
        "OPENAI_API_KEY=abcdefghijklmnopqrstuvwxyz",
        "OPENAI_API_KEY=abcdef...wxyz",
    );
    dump("DB_PASSWORD=hunter2", "DB_PASSWORD=***");
    dump(
        "export GITHUB_TOKEN=\"abcdefghijklmnopqrstuvwx\"",
        "export GITHUB_TOKEN=\"abcdef...uvwx\"",
    );
    dump(
        "declare -x AWS_SECRET_ACCESS_KEY=\"wJalrXUtnFEMIK7MDENGbPxRfiCY\"",
        "declare -x AWS_SECRET_ACCESS_KEY=\"wJalrX...fiCY\"",
    );
    dump(
        "app.auth.token=abcdefghijklmnopqrstuv",
        "app.auth.token=abcdef...stuv",
    );
    // A reference, a path-like value and non-secret names stay.
    dump("API_KEY=$OTHER", "API_KEY=$OTHER");
    dump(
        "SSH_AUTH_SOCK=/run/user/1000/ssh-agent",
        "SSH_AUTH_SOCK=/run/user/1000/ssh-agent",
    );
    dump("PGPASSWORD=/looks/like/path", "PGPASSWORD=***");
    dump(
        "KEYBOARD=us\nMONKEY=1\nPWD=/home/u",
        "KEYBOARD=us\nMONKEY=1\nPWD=/home/u",
    );
}

#[test]
fn json_and_yaml_fields_are_masked_in_secret_files() {
    dump(
        r#"{"apiKey": "abcdefghijklmnopqrstuvwxyz", "name": "x"}"#,
        r#"{"apiKey": "abcdef...wxyz", "name": "x"}"#,
    );
    dump(
        r#"{\"access_token\": \"short1\"}"#,
        r#"{\"access_token\": \"***\"}"#,
    );
    dump(
        "db:\n  password: hunter2\n  host: db",
        "db:\n  password: ***\n  host: db",
    );
    dump(
        "client_secret: 'abcdefghijklmnopqrstuv'",
        "client_secret: 'abcdef...stuv'",
    );
}

#[test]
fn b30_secret_named_assignments_are_masked_and_ordinary_ones_stay_outside_dumps() {
    code("DB_PASSWORD=hunter2", "DB_PASSWORD=***");
    code("KEY=value", "KEY=value");
    code(
        "LOG_LEVEL=debug CACHE_KEY=user42",
        "LOG_LEVEL=debug CACHE_KEY=user42",
    );
    code(r#"{"token": "abc"}"#, r#"{"token": "abc"}"#);
}

#[test]
fn text_that_must_stay() {
    let keep = [
        "HOME=/home/u",
        "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nAuthor: A <a@b.c>",
        "a1b2c3d fix: skip flaky test (#123)",
        "id 123e4567-e89b-12d3-a456-426614174000 done",
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "task-runner sk-learn disk-usage 42",
        "the skeleton key is in the desk",
        "2024-05-01T12:00:00+00:00 INFO started pid=4242 port=8080",
        "fw_update: ok; am_i_root: no; sk_buff alloc",
        "https://example.com/path?q=1",
        "Authorization header missing",
        "ssh://git@github.com/o/r",
    ];
    for text in keep {
        code(text, text);
        dump(text, text);
    }
}

#[test]
fn mode_detection() {
    let dumps = [
        "env",
        "printenv | sort",
        "ls; env",
        "/usr/bin/env",
        "cat .env",
        "cat ./app/.env.production",
        "sudo cat ~/.bashrc",
        "grep KEY config.yaml",
        "tail -n 5 prod.env",
        "export",
        "declare -p",
        "cat ~/.git-credentials",
        "head -1 ~/.pgpass",
    ];
    for c in dumps {
        assert_eq!(RedactMode::for_command(c), RedactMode::SecretDump, "{c}");
    }
    let plain = [
        "cargo test",
        "cat README.md",
        "echo env",
        "make deploy",
        "grep -r env src/",
    ];
    for c in plain {
        assert_eq!(RedactMode::for_command(c), RedactMode::Code, "{c}");
    }
    let r = Redactor::builtin();
    assert_eq!(r.redact_output("cat .env", "SECRET=abc"), "SECRET=***");
    assert_eq!(r.redact_output("cat notes.txt", "SECRET=abc"), "SECRET=abc");
}

#[test]
fn extra_patterns_are_validated_and_applied() {
    let cfg = RedactorConfig {
        extra_patterns: vec![r"ACME-[0-9]{6}".into(), r"internal=([a-z]+)".into()],
    };
    let r = Redactor::new(&cfg).expect("valid patterns");
    assert_eq!(
        r.redact(
            "id ACME-123456 internal=abcdefghijklmnopqrstu",
            RedactMode::Code
        ),
        "id *** internal=abcdef...rstu"
    );
    let bad = RedactorConfig {
        extra_patterns: vec!["ok".into(), "(unclosed".into()],
    };
    match Redactor::new(&bad) {
        Err(err @ Error::BadPattern { .. }) => {
            assert!(err.to_string().contains("`(unclosed`"), "{err}");
        }
        other => panic!("expected BadPattern, got {other:?}"),
    }
    for pattern in ["x*", "\\b", "(?:)", "a?", "\\B|x", "^"] {
        let empty = RedactorConfig {
            extra_patterns: vec![pattern.into()],
        };
        assert!(
            matches!(Redactor::new(&empty), Err(Error::EmptyMatchPattern { .. })),
            "{pattern:?} must be refused"
        );
    }
}

/// The environment-dump automaton of the built-in patterns is compiled on the first
/// dump redacted, not with the redactor; with config patterns it is compiled at once
/// (a set too large for it is refused by `Redactor::new`). Both redact a dump alike.
#[test]
fn the_dump_automaton_is_built_on_the_first_dump_unless_config_adds_patterns() {
    let builtin = Redactor::builtin();
    assert!(builtin.dump.compiled.get().is_none());
    let text = "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789\nHOME=/home/u";
    let _ = builtin.redact(text, RedactMode::Code);
    assert!(
        builtin.dump.compiled.get().is_none(),
        "code mode needs no dump automaton"
    );
    let masked = builtin.redact(text, RedactMode::SecretDump).into_owned();
    assert!(builtin.dump.compiled.get().is_some());
    assert!(
        !masked.contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        "{masked}"
    );
    let cfg = RedactorConfig {
        extra_patterns: vec![r"ACME-[0-9]{6}".into()],
    };
    let configured = Redactor::new(&cfg).expect("valid patterns");
    assert!(configured.dump.compiled.get().is_some());
    assert_eq!(configured.redact(text, RedactMode::SecretDump), masked);
}

/// No input can panic the redactor, whatever the config patterns (B30): the
/// pattern `\b` with an escape in the output used to lose the whole session.
#[test]
fn b30_odd_inputs_never_panic_the_redactor() {
    let cfg = RedactorConfig {
        extra_patterns: vec!["internal-[a-z]+".into(), "(?m)^secret:.*$".into()],
    };
    let r = Redactor::new(&cfg).expect("valid patterns");
    for text in [
        "\x1b",
        "\x1b[",
        "\x1b\x1b\x1b[31m",
        "\u{200b}",
        "\u{202e}\u{202e}",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----BEGIN",
        "\x1b[1m-----BEGIN PRIVATE KEY-----\x1b[0m\nMIIE\n",
        "secret:\x1b[31m\nx",
        "\u{9b}\u{9d}",
        "é\x1b\u{200b}é",
    ] {
        for mode in [RedactMode::Code, RedactMode::SecretDump] {
            let _ = r.redact(text, mode);
        }
    }
}

/// Every case, fed in two chunks split at every byte, gives the same output as
/// redacting the whole text.
#[test]
fn stream_split_at_every_boundary_matches_whole_text() {
    let r = Arc::new(Redactor::builtin());
    let texts = [
        "build ok\nkey sk-proj-abcdefghijklmnopqrstuvwxyz0123 used\nbye",
        "x\n-----BEGIN PRIVATE KEY-----\nMIIE\nabc\n-----END PRIVATE KEY-----\ny\n",
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz\npostgres://u:pw@h/db\n",
        "no newline ghp_abcdefghijklmnopqrstuvwxyz0123456789 tail",
        r#"{"msg": "token ghp_ab\u001b^pm\u001b\\cdefghijklmnopqrstuvwxyz0123456789 tail"}"#,
        r#"{"msg": "token ghp_ab\\x1b[1mcdefghijklmnopqrstuvwxyz0123456789"}"#,
    ];
    for text in texts {
        let whole = r.redact(text, RedactMode::Code).into_owned();
        for split in 0..=text.len() {
            if !text.is_char_boundary(split) {
                continue;
            }
            let mut s = StreamRedactor::new(Arc::clone(&r), RedactMode::Code);
            let mut out = s.push(&text[..split]);
            out.push_str(&s.push(&text[split..]));
            out.push_str(&s.finish());
            assert_eq!(out, whole, "split at {split} of {text:?}");
        }
    }
}

#[test]
fn stream_memory_is_bounded_on_a_long_line() {
    let r = Arc::new(Redactor::builtin());
    let mut s = StreamRedactor::new(r, RedactMode::Code);
    let chunk = "progress ".repeat(1000);
    let mut n_out = 0;
    for _ in 0..20 {
        n_out += s.push(&chunk).len();
    }
    assert!(
        s.held_bytes() <= 64 * 1024 + chunk.len(),
        "held {}",
        s.held_bytes()
    );
    n_out += s.finish().len();
    assert_eq!(n_out, chunk.len() * 20);
}

#[test]
fn b30_a_stream_through_a_long_one_string_key_shows_only_masks() {
    // A `cat -n` of a key escaped twice into one string far longer than what a
    // stream holds of a line (64 KiB), a C1 APC inside each line: the parts emitted
    // after the first forced cut keep the key state of the string's lines (fuzz
    // finding: the kept context started inside a line's `   741\t` prefix).
    let r = Arc::new(Redactor::builtin());
    let mut lines = vec!["-----BEGIN RSA PRIVATE KEY-----".to_owned()];
    let mut bodies = Vec::new();
    for idx in 0..1600u32 {
        let body: String = (0..64u32)
            .map(|col| {
                char::from(
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                        [((idx * 7 + col * 13 + idx * col) % 64) as usize],
                )
            })
            .collect();
        bodies.push(body[6..22].to_owned());
        lines.push(body);
    }
    let text = crate::redact::numbered_in_one_string(&lines, "\u{9f}apc\u{9c}");
    assert!(text.len() > 2 * 64 * 1024);
    for chunk in [997, 4096, 65_536, 100_003] {
        let mut s = StreamRedactor::new(Arc::clone(&r), RedactMode::Code);
        let mut out = String::new();
        let mut at = 0;
        while at < text.len() {
            let mut end = (at + chunk).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            out.push_str(&s.push(&text[at..end]));
            at = end;
        }
        out.push_str(&s.finish());
        if let Some(body) = bodies.iter().find(|b| out.contains(b.as_str())) {
            panic!("chunks of {chunk}: the stream shows {body}");
        }
    }
}

#[test]
fn side_scanner_families_respect_boundaries() {
    // Telegram needs 8-10 digits at a boundary and exactly 35 token bytes.
    code(
        "x 12345678901:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawX",
        "x 12345678901:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawX",
    );
    code(
        "t=123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawX.",
        "t=123456789:***.",
    );
    // A 40-hex git hash followed by a dot is not a Zhipu key.
    code(
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904.AbCdEfGhIjKlMnOpQr",
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904.AbCdEfGhIjKlMnOpQr",
    );
    // Time stamps and ports around colons stay.
    code(
        "12:00:00.123 0.0.0.0:8080 v1.2.3",
        "12:00:00.123 0.0.0.0:8080 v1.2.3",
    );
    // Userinfo needs 8+ bytes and no colon; the scheme starts at a boundary.
    code("see Xhttps://abcdefghij@h", "see Xhttps://abcdefghij@h");
    code(
        "git+https://abcdefghijklmnopqrstu@h/r",
        "git+https://abcdef...rstu@h/r",
    );
}

#[test]
fn overlapping_families_take_the_leftmost() {
    // The DB pattern starts first; the userinfo scanner must not re-mask inside it.
    code(
        "redis://default:abcdefghijkl@cache",
        "redis://default:***@cache",
    );
    // A token inside an Authorization header is masked once, scheme kept.
    code(
        "authorization: Bearer sk-proj-abcdefghijklmnopqrstuvwxyz",
        "authorization: Bearer sk-pro...wxyz",
    );
}

#[test]
fn tokens_split_by_zero_width_or_control_chars_are_masked() {
    code(
        "key sk-proj-abc\u{200b}defghijklmnopqrstuvwxyz end",
        "key sk-pro...wxyz end",
    );
    code(
        "t ghp_abcdefghij\u{0}klmnopqrstuvwxyz0123456789.",
        "t ghp_ab...6789.",
    );
    code(
        "\x1b[1mbold\x1b[0m ghp_\u{feff}abcdefghijklmnopqrstuvwxyz0123456789",
        "\x1b[1mbold\x1b[0m ghp_ab...6789",
    );
    // Invisible characters outside secrets survive byte for byte.
    let keep = "a\u{200b}b \x1b[31mred\x1b[0m \u{2588}\u{2588} done";
    code(keep, keep);
}

#[test]
fn b30_an_nf_escape_and_overstrike_before_a_token_do_not_hide_it() {
    // Fuzz finding: `ESC SP g` is an nF escape a terminal shows nothing of; the
    // backspace after it writes the token's first `g` over the `e` before, so a
    // terminal shows `ozng` + `hp_…` glued: the token, whole.
    let r = Redactor::builtin();
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let bold: String = token.chars().map(|c| format!("{c}\u{8}{c}")).collect();
    let text = format!("^ntn\r0ozne\x1b {bold} \ntwl0");
    let out = r.redact(&text, RedactMode::Code);
    let seen = crate::redact::visible_text(&out);
    assert!(!seen.contains("hijklmnop"), "{out:?} shows {seen:?}");
    // Every nF form (any intermediates, then a final byte) is removed, and the
    // token after it is found.
    for escape in [
        "\x1b(B", "\x1b$(B", "\x1b!x", "\x1b\"0", "\x1b ,q", "\x1b#8", "\x1b%G",
    ] {
        let text = format!("token {escape}{token} used");
        let out = r.redact(&text, RedactMode::Code);
        assert!(!out.contains("hijklmnop"), "{escape:?}: {out:?}");
    }
    // `ESC SP` before a token: a terminal takes the token's first letter as the
    // escape's final byte and shows the rest; a reader of the bytes sees it whole.
    // Both readings are matched, so neither shows it.
    for text in [
        format!("ne\x1b {token}"),
        format!("key=\x1b {token} more"),
        format!("\x1b#{token}\n"),
    ] {
        let out = r.redact(&text, RedactMode::Code);
        assert!(!out.contains("hijklmnop"), "{text:?}: {out:?}");
        let seen = crate::redact::visible_text(&out);
        assert!(!seen.contains("hijklmnop"), "{text:?}: {seen:?}");
    }
    // A token glued to a word by no seam stays a word (no over-masking).
    code(
        "xghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "xghp_abcdefghijklmnopqrstuvwxyz0123456789",
    );
}

#[test]
fn b30_a_long_text_redacted_in_blocks_is_redacted_as_one() {
    // Keys, tokens and escapes on both sides of every block edge: the blocks of
    // whole lines, with the key state carried, mask what one pass masks.
    let r = Redactor::builtin();
    let lines = [
        "2026-12-03T10:00:00Z INFO listening on 0.0.0.0:8080",
        "-----BEGIN RSA PRIVATE KEY-----",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
        "web-1  | MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
        "\x1b[1mtoken\x1b[0m ghp_abcdefghijklmnopqrstuvwxyz0123456789 used",
        "-----END RSA PRIVATE KEY-----",
        "postgres://app:s3cr3tpassw0rd@db.internal:5432/app",
        "12345",
    ];
    let mut text = String::new();
    let mut n = 0usize;
    while text.len() < 300 * 1024 {
        // Vary the period so the edges fall everywhere in the pattern.
        text.push_str(lines[(n * 7 + n / 13) % lines.len()]);
        text.push('\n');
        n += 1;
    }
    let (found, _) = r.find(&text, RedactMode::Code, false);
    let whole = super::splice(&text, &found);
    assert!(r.redact(&text, RedactMode::Code) == whole);
    assert!(!whole.contains("s3cr3tpassw0rd") && !whole.contains("hijklmnop"));
}

/// Key blocks printed by other tools and escapings than the corpus tests use: every
/// body line is masked, and so are tokens in overstrike of other providers.
#[test]
fn b30_keys_and_tokens_in_other_listings_and_escapings_are_masked() {
    fn base64(mut x: u64, n: usize) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(A[usize::try_from(x % 64).unwrap_or(0)])
            })
            .collect()
    }
    let r = Redactor::builtin();
    let body: Vec<String> = (0..6).map(|i| base64(i + 7, 64)).collect();
    let pem = format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----\n",
        body.join("\n")
    );
    let each = |f: &dyn Fn(usize, &str) -> String| -> String {
        pem.lines().enumerate().map(|(i, l)| f(i, l)).collect()
    };
    let quoted = |q: char, sep: &str| {
        let items: Vec<String> = pem.lines().map(|l| format!("{q}{l}{q}")).collect();
        format!("[{}]\n", items.join(sep))
    };
    let once = serde_json::to_string(&pem).unwrap_or_default();
    let twice = serde_json::to_string(&once).unwrap_or_default();
    let thrice = serde_json::to_string(&twice).unwrap_or_default();
    let mut long = "x".repeat(200 * 1024);
    long.push_str(&pem);
    let cases: Vec<(&str, String)> = vec![
        (
            "grep -rn, deep path",
            each(&|i, l| format!("/home/u/proj/secrets/prod/id_rsa:{}:{l}\n", i + 1)),
        ),
        ("grep -b", each(&|i, l| format!("id_rsa:{}:{l}\n", i * 65))),
        (
            "diff -u, removed",
            format!(
                "--- a/id_rsa\n+++ /dev/null\n@@ -1,8 +0,0 @@\n{}",
                each(&|_, l| format!("-{l}\n"))
            ),
        ),
        ("diff -u, context", each(&|_, l| format!(" {l}\n"))),
        ("diff, normal", each(&|_, l| format!("> {l}\n"))),
        ("nl", each(&|i, l| format!("{:>6}\t{l}\n", i + 1))),
        ("sed -n l", each(&|_, l| format!("{l}$\n"))),
        ("cat -v, CRLF", each(&|_, l| format!("{l}^M\n"))),
        ("JSON thrice", format!("{{\"key\": {thrice}}}\n")),
        (
            "YAML block scalar",
            format!("tls:\n  key: |\n{}", each(&|_, l| format!("    {l}\n"))),
        ),
        ("YAML list", each(&|_, l| format!("  - {l}\n"))),
        (
            "Python repr",
            format!("{}\n", format!("{pem:?}").replace('"', "'")),
        ),
        ("Python list of lines", quoted('\'', ", ")),
        ("pprint list", quoted('\'', ",\n ")),
        ("JSON list", quoted('"', ", ")),
        (
            "kubectl prefix",
            each(&|_, l| format!("[pod/api-7d9f/app] {l}\n")),
        ),
        ("after 200 KiB without a newline", long),
    ];
    for (name, text) in &cases {
        let out = visible_text(&r.redact(text, RedactMode::Code));
        for line in &body {
            assert!(
                !out.contains(&line[8..40]),
                "{name}: a key body line shows: {out:.2000}"
            );
        }
    }
    let tokens = [
        "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "AKIAIOSFODNN7EXAMPL3",
        "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "glpat-AbCdEfGhIjKlMnOpQrSt",
    ];
    for token in tokens {
        let bold: String = token.chars().map(|c| format!("{c}\u{8}{c}")).collect();
        let under: String = token.chars().map(|c| format!("_\u{8}{c}")).collect();
        let head_bold: String = token[..4]
            .chars()
            .map(|c| format!("{c}\u{8}{c}"))
            .chain(std::iter::once(token[4..].to_owned()))
            .collect();
        for shown in [bold, under, head_bold, format!("50% [==>  ]\r{token}")] {
            let out = visible_text(&r.redact(&format!("tok {shown}\n"), RedactMode::Code));
            assert!(
                !out.contains(&token[6..token.len() - 4]),
                "{token} shows: {out:?}"
            );
        }
    }
}

/// A string escape that nothing ends (fuzz finding): its body is what a reader of
/// the bytes sees, so a token in it is masked.
#[test]
fn b30_a_token_inside_an_unterminated_escape_string_is_masked() {
    let r = Redactor::builtin();
    for intro in [
        "\u{1b}^", "\u{1b}]", "\u{1b}P", "\u{1b}X", "\u{1b}_", "\u{9e}",
    ] {
        let text = format!("tnzoz{intro}wl,0 ghp_SSD98YFaVbpawVKLvNyBnzBAoyihSxGXj1Ay ");
        let out = r.redact(&text, RedactMode::Code);
        assert!(!out.contains("VbpawVKLvNyBnzBAoyih"), "{intro:?}: {out:?}");
    }
    // A terminated one still hides its body, and the token around it is found.
    let split = "dcs glpat-AbCdEfGh\u{1b}Pq#0;2\u{1b}\\IjKlMnOpQrSt\n";
    let out = r.redact(split, RedactMode::Code);
    assert!(!out.contains("IjKlMnOpQr"), "{out:?}");
}

#[test]
fn b30_a_key_whose_lines_carry_a_prefix_escaped_into_one_string_is_masked() {
    let r = Redactor::builtin();
    let body = [
        "BOaQJUkL4sd+v8y8ZVSFNZnWBrTcq3Dz8s6OlFWWm78GTD97sSQU7JutC9govLCr",
        "liqlRsiDnAEgpTuPdMGcyiy1RctzlhNb48l1dn+XlJd4ZmCBUIV9OGKzS0B+1bGn",
        "Hns4Ya2+ZXEWW7FVKKZHe9Hdz73RZT4Q+vDPMZeMJf/1M/mXqhJpOIRuakespD0c",
    ];
    let text = format!(
        "log start\n{{\"key\": \"web-1  | -----BEGIN RSA PRIVATE KEY-----\\nweb-1  | {}\\nweb-1  | {}\\nweb-1  | {}\\nweb-1  | -----END RSA PRIVATE KEY-----\\n\"}}\ndone",
        body[0], body[1], body[2]
    );
    let twice = format!(
        "{{\"a\": \"{}\"}}",
        text.replace('\\', "\\\\").replace('"', "\\\"")
    );
    let unclosed = text.replace("web-1  | -----END RSA PRIVATE KEY-----\\n", "");
    for text in [text.clone(), twice, unclosed] {
        for mode in [RedactMode::Code, RedactMode::SecretDump] {
            let out = r.redact(&text, mode);
            for line in body {
                assert!(!out.contains(&line[8..40]), "{out}");
            }
            assert!(
                out.contains("log start") && out.contains("web-1  | "),
                "{out}"
            );
        }
    }
}

#[test]
fn b30_a_key_escaped_into_json_is_masked_whatever_each_line_carries() {
    let r = Redactor::builtin();
    let body = [
        "BOaQJUkL4sd+v8y8ZVSFNZnWBrTcq3Dz8s6OlFWWm78GTD97sSQU7JutC9govLCr",
        "liqlRsiDnAEgpTuPdMGcyiy1RctzlhNb48l1dn+XlJd4ZmCBUIV9OGKzS0B+1bGn",
        "Hns4Ya2+ZXEWW7FVKKZHe9Hdz73RZT4Q",
    ];
    let prefixes: [fn(usize, &str) -> String; 8] = [
        |_, l| l.to_owned(),
        |_, l| format!("/home/u/.ssh/id_rsa:{l}"),
        |i, l| format!("id_rsa:{}:{l}", i + 1),
        |_, l| format!("{l}$"),
        |_, l| format!(" 42% [=====>     ]\r{l}"),
        |_, l| format!("web-1  | {l}"),
        |_, l| format!("+{l}"),
        |i, l| format!("{:>6}\t{l}", i + 1),
    ];
    for (n, prefix) in prefixes.iter().enumerate() {
        for end in [true, false] {
            let mut lines = vec!["-----BEGIN RSA PRIVATE KEY-----"];
            lines.extend(body);
            if end {
                lines.push("-----END RSA PRIVATE KEY-----");
            }
            let block: Vec<String> = lines
                .iter()
                .enumerate()
                .map(|(i, l)| prefix(i, l))
                .collect();
            for text in in_one_string(&format!("{}\n", block.join("\n")), "secret") {
                let text = format!("before\n{text}\nafter words\n");
                let out = r.redact(&text, RedactMode::Code);
                for line in body {
                    assert!(!out.contains(&line[8..24]), "prefix {n}, end {end}: {out}");
                }
                assert!(out.ends_with("\nafter words\n"), "{out}");
            }
        }
    }
}

#[test]
fn b30_a_match_whose_replacement_declines_does_not_hide_the_secrets_it_covers() {
    let r = Redactor::builtin();
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    for text in [
        format!("url postgres://app:${{DB}}{token}@db/x"),
        format!("Authorization: ${{AUTH}}{token}"),
    ] {
        let out = r.redact(&text, RedactMode::Code);
        assert!(!out.contains("ghijklmnopqrstuv"), "{text}: {out}");
    }
}

#[test]
fn b30_a_window_cut_inside_the_last_line_of_a_one_string_key_shows_no_tail() {
    let r = Redactor::builtin();
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let body: Vec<String> = (0..6)
        .map(|i| {
            (0..64)
                .map(|j| alphabet[(i * 13 + j * 7) % 64] as char)
                .collect()
        })
        .collect();
    let last = body.last().cloned().unwrap_or_default();
    // Escaped once and twice, no END and no escaped newline after the last line.
    for (quote, newline) in [("\"", "\\n"), ("\\\"", "\\\\n")] {
        let key = format!("-----BEGIN PRIVATE KEY-----{newline}{}", body.join(newline));
        let text = format!("start\n{{\"data\": {quote}{key}{quote}, \"next\": 1}}\nend\n");
        let last_at = text.rfind(&last).unwrap_or(0);
        let mut index = KeyIndex::new();
        index.push(text.as_bytes());
        for cut in [1, 10, 40, 60] {
            let at = last_at + cut;
            let (before, window) = text.split_at(at);
            for open in [
                r.key_open_at_end(before),
                index.open_at(at as u64) == Some(true),
            ] {
                assert!(open, "the block is open at {cut}");
                let out = r.redact_after_state("", open, window, RedactMode::Code);
                let tail = &last[cut..];
                assert!(
                    !out.contains(&tail[..tail.len().min(4)]),
                    "cut at {cut} of {quote}: {out:?}"
                );
                assert!(out.contains(", \"next\": 1}\nend\n"), "{out:?}");
            }
        }
    }
}

#[test]
fn b30_a_window_inside_an_overstruck_token_behind_a_log_prefix_masks_it_whole() {
    // Fuzz finding (a harness error, not a leak): a window starting inside an
    // underlined `ghp_` token behind a `web-1  | ` prefix was shown from a source
    // that itself began inside the token, which no route builds (a route's source
    // starts `KEY_LOOKBACK_BYTES` before its window, longer than any token's line).
    // What B30 promises: with the token's head in the source, a window that starts
    // at any byte of the token, plain, underlined or bold, shows only its mask.
    use crate::{HookChain, OutputContext, Pipeline, Route, Window};
    let ctx = OutputContext {
        route: Route::Poll,
        command: "cargo test",
        return_code: None,
        owner_task_id: "t",
        session_id: "proc_0123456789ab",
        backend: "local",
        partial: false,
    };
    let p = Pipeline::with_redactor(HookChain::default(), Arc::new(Redactor::builtin()));
    let token = "ghp_oABit1ws1bepos1fomo4l3NX4oPlJpb3H2rD";
    let hidden: Vec<char> = token.chars().skip(6).take(token.len() - 10).collect();
    let runs: Vec<String> = hidden.windows(10).map(|w| w.iter().collect()).collect();
    for overstrike in ["", "_\u{8}", "bold"] {
        let line: String = match overstrike {
            "" => token.to_owned(),
            "bold" => token.chars().map(|c| format!("{c}\u{8}{c}")).collect(),
            under => token.chars().map(|c| format!("{under}{c}")).collect(),
        };
        let text = format!("rt\nweb-1  | {line}\ndone");
        let token_at = text.find("web-1  | ").map_or(0, |i| i + "web-1  | ".len());
        // The source starts at the output, the line, or the token's first byte.
        for from in [0, 3, token_at] {
            let source = &text[from..];
            for at in (token_at..token_at + line.len()).filter(|at| text.is_char_boundary(*at)) {
                let start = at - from;
                for window in [
                    Window::range(source, start..source.len()),
                    Window::range(source, start..start + 7),
                    Window::last_chars_after(source, start, 359),
                    Window::lines(source, 0, 8),
                    Window::first_chars(source, start + 30),
                ] {
                    let out = p.show(&ctx, window);
                    for seen in [out.as_str().to_owned(), visible_text(&out)] {
                        assert!(
                            !runs.iter().any(|run| seen.contains(run.as_str())),
                            "{overstrike:?} from {from}, at {at}: {out:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn b30_escapes_spelled_out_in_a_string_do_not_hide_a_key_or_a_token() {
    // Terminal output kept in a JSON string (a log line, a tool's answer) spells its
    // escapes out (`\u001b^pm\u001b\\`, once more escaped for each level): who
    // decodes it sees what a terminal shows, a key or a token whole.
    use crate::redact::keys::tests::{PPK, PPK_SECRETS};
    let r = Redactor::builtin();
    let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAs1Zq3mJ0Yy9p8r7Tz0Xw6bVv\nQ2hhbmdlTWVQbGVhc2VUaGlzSXNBVGVzdEtleQ1x\n-----END RSA PRIVATE KEY-----";
    let pem_secrets = ["AAKCAQEAs1Zq3mJ0Yy9p8r", "WVQbGVhc2VUaGlzSXNBVGVz"];
    let ppk_secrets = [
        "WVQbGVhc2VUaGlzSXNBVGVz",
        "mF0ZVBhcnRJc0hlcmVBbmRN",
        "6c1a9e0f2b3d4c5e6f70",
    ];
    let _ = PPK_SECRETS;
    for escape in [
        "\u{1b}^pm\u{1b}\\",
        "\u{1b}Pq#0;2\u{1b}\\",
        "\u{1b}]0;t\u{7}",
        "\u{1b}[1;31m",
    ] {
        for (key, secrets) in [(pem, &pem_secrets[..]), (PPK.trim_end(), &ppk_secrets[..])] {
            // Each line behind `grep -n`'s prefix, the escape inside the line.
            let lines: Vec<String> = key
                .lines()
                .enumerate()
                .map(|(i, line)| {
                    let mut line = line.to_owned();
                    if line.len() > 8 {
                        line.insert_str(6, escape);
                    }
                    format!("id_rsa:{}:{line}", i + 1)
                })
                .collect();
            let block = format!("{}\n", lines.join("\n"));
            for text in in_one_string(&block, "a") {
                let out = r.redact(&text, RedactMode::Code);
                for secret in secrets {
                    assert!(!out.contains(secret), "{escape:?} shows {secret}: {out}");
                }
            }
        }
        // A token with the escape inside, in a JSON string and in a Python repr.
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let inside = format!("token {}{escape}{}", &token[..6], &token[6..]);
        let json = serde_json::to_string(&inside).unwrap_or_default();
        let repr = inside
            .replace('\\', "\\\\")
            .replace('\u{1b}', "\\x1b")
            .replace('\u{7}', "\\x07");
        for text in [json, repr] {
            let out = r.redact(&text, RedactMode::Code);
            assert!(!out.contains("ijklmnopqrstuvwxyz"), "{escape:?}: {out}");
        }
    }
    // Cut at any line inside the block, the text before the cut ends inside it.
    for escape in ["\u{1b}^pm\u{1b}\\", "\u{1b}[1;31m"] {
        let lines: Vec<String> = PPK
            .lines()
            .enumerate()
            .map(|(i, line)| {
                let mut line = line.to_owned();
                line.insert_str(6.min(line.len()), escape);
                format!("id_rsa:{}:{line}", i + 1)
            })
            .collect();
        let text = serde_json::to_string(&format!("{}\n", lines.join("\n"))).unwrap_or_default();
        let (first, last) = (lines[12].as_str(), lines[14].as_str());
        let json_of = |line: &str| serde_json::to_string(line).unwrap_or_default();
        let from = text.find(json_of(first).trim_matches('"')).unwrap_or(0);
        let to = text.find(json_of(last).trim_matches('"')).unwrap_or(0);
        assert!(0 < from && from < to, "{text}");
        let mid = from + 3;
        for cut in from + 1..to {
            // At a line's start (escaped), where a window's context starts in a
            // line longer than the context (see `window::context_start`).
            if !text[..cut].ends_with("\\n") {
                continue;
            }
            assert!(
                key_open_at_end(&text[..cut]),
                "{escape:?} cut at {cut}: {}",
                &text[..cut]
            );
            if cut > mid {
                assert!(
                    r.key_open_after(&text[mid..cut], true),
                    "{escape:?} {mid}..{cut}"
                );
            }
        }
    }
    // Text that only looks like an escape stays as it is.
    for text in [
        r#"{"path": "C:\\u001\\x1"}"#,
        r"printf '\033' | od -c",
        r#""a\nb""#,
    ] {
        assert_eq!(r.redact(text, RedactMode::Code), text);
    }
}

#[test]
fn b30_a_secret_after_a_spelled_line_end_or_tab_in_a_string_is_masked() {
    // A JSON log's message spells its line ends (`"x\nghp_…"`): for whoever
    // decodes it the token starts a line, so the `n` before it is no word of it.
    let r = Redactor::builtin();
    for t in [
        "{\"a\": \"x\\nghp_xF7ZBCS8PuZPSKjRmG53h7DbKDZ8ZgXO9kG2\"}",
        "{\"a\": \"x\\tghp_xF7ZBCS8PuZPSKjRmG53h7DbKDZ8ZgXO9kG2\"}",
        "{\"a\": \"x\\rghp_xF7ZBCS8PuZPSKjRmG53h7DbKDZ8ZgXO9kG2\"}",
        "{\"a\": \"x\\\\nghp_xF7ZBCS8PuZPSKjRmG53h7DbKDZ8ZgXO9kG2\"}",
        "{\"a\": \"x\\nsk-proj-abcdefghijklmnopqrstuvwxyz0123\"}",
        "{\"a\": \"x\\nAKIAIOSFODNN7EXAMPLF\"}",
        "{\"a\": \"x\\neyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U\"}",
        "{\"a\": \"x\\nhttps://bob:s3cretPassw0rd@example.com/x\"}",
        "{\"a\": \"x\\nAuthorization: Bearer abcdefghijklmnopqrstuvwxyz012345\"}",
        "{\"a\": \"x\\npassword=hunter2hunter2\"}",
        "{\"a\": \"x\\nxoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx\"}",
    ] {
        let out = r.redact(t, RedactMode::Code);
        assert_ne!(out, t, "nothing masked in {t}");
        for secret in [
            "ZPSKjRmG53h7",
            "ijklmnopqrst",
            "OSFODNN7",
            "NHl0w5N_",
            "s3cretPassw0rd",
            "hunter2",
            "1234567890123-abc",
        ] {
            assert!(!out.contains(secret), "{t} shows {secret}: {out}");
        }
    }
    // A word glued to an escaped backslash and an `n` is not made a token.
    let path = r#"{"p": "C:\\nightly\\build"}"#;
    assert_eq!(r.redact(path, RedactMode::Code), path);
}

#[test]
fn b30_a_key_overstruck_with_a_string_escape_inside_each_line_is_masked() {
    // `man`-style overstrike with a string escape between two overstruck
    // characters of each line; and the escape's own bytes underlined with the
    // line (fuzz finding).
    use crate::redact::keys::tests::PPK;
    let r = Redactor::builtin();
    let secrets = ["WVQbGVhc2VUaGlz", "mF0ZVBhcnRJc0hl", "6c1a9e0f2b3d4c5e6f70"];
    let strike = |text: &str, bold: bool| -> String {
        text.chars()
            .map(|c| {
                if bold {
                    format!("{c}\u{8}{c}")
                } else {
                    format!("_\u{8}{c}")
                }
            })
            .collect()
    };
    for escape in [
        "\u{9f}apc\u{9c}",
        "\u{1b}_apc\u{1b}\\",
        "\u{1b}]0;t\u{7}",
        "\u{90}q\u{9c}",
    ] {
        for (bold, all) in [(false, false), (true, false), (false, true)] {
            if all && escape.starts_with('\u{1b}') {
                continue;
            }
            let text: String = PPK
                .lines()
                .enumerate()
                .map(|(i, line)| {
                    let at = 6.min(line.len());
                    let struck = if all {
                        strike(&format!("{}{escape}{}", &line[..at], &line[at..]), bold)
                    } else {
                        format!(
                            "{}{escape}{}",
                            strike(&line[..at], bold),
                            strike(&line[at..], bold)
                        )
                    };
                    format!("{:>6}\t{struck}\n", i + 1)
                })
                .collect();
            let out = crate::redact::visible_text(&r.redact(&text, RedactMode::Code));
            for secret in secrets {
                assert!(
                    !out.contains(secret),
                    "{escape:?} {bold} {all} shows {secret}: {out}"
                );
            }
        }
    }
}

#[test]
fn b30_a_putty_key_in_one_string_with_progress_frames_before_each_line_is_masked() {
    // Each line behind a `\r` progress frame, the block escaped into one string
    // (fuzz finding): the frame before a line is not the line.
    use crate::redact::keys::tests::{PPK, PPK_SECRETS};
    let r = Redactor::builtin();
    let framed: String = PPK
        .lines()
        .map(|line| format!(" 42% [=====>     ]\r{line}\n"))
        .collect();
    for text in in_one_string(&framed, "a") {
        let out = r.redact(&text, RedactMode::Code);
        for secret in PPK_SECRETS {
            assert!(!out.contains(secret), "shows {secret}: {out}");
        }
        // The progress frames before the block's first line stay.
        assert!(out.contains("PuTTY-User-Key-File-3"), "{out}");
    }
}

#[test]
fn b30_a_putty_key_in_one_string_with_a_diff_marker_before_each_line_is_masked() {
    // A diff of a PuTTY key file, escaped into one string (fuzz finding): a `+` or
    // `-` before each line is the diff's, not part of a header's name, so the
    // `Private-Lines` header goes on with the block.
    use crate::redact::keys::tests::{PPK, PPK_SECRETS};
    let r = Redactor::builtin();
    for marker in ["+", "-"] {
        let marked: String = PPK
            .lines()
            .map(|line| format!("{marker}{line}\n"))
            .collect();
        for text in in_one_string(&marked, "secret") {
            let out = r.redact(&text, RedactMode::Code);
            for secret in PPK_SECRETS {
                assert!(!out.contains(secret), "{marker}: shows {secret}: {out}");
            }
        }
    }
}

#[test]
fn b30_a_numbered_putty_key_in_one_string_with_a_spelled_title_escape_in_each_line_is_masked() {
    // `cat -n` of a PuTTY key file with an OSC title escape inside each line,
    // the terminal output kept in a JSON string twice, so the escape is spelled
    // (`\u001b]0;title\u0007`) and splits header names (fuzz finding).
    use crate::redact::keys::tests::{PPK, PPK_SECRETS};
    let r = Redactor::builtin();
    let numbered: String = PPK
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let mut line = line.to_owned();
            line.insert_str(6.min(line.len()), "\u{1b}]0;title\u{7}");
            format!("{:6}\t{line}\n", i + 1)
        })
        .collect();
    for text in in_one_string(&numbered, "secret") {
        let out = r.redact(&text, RedactMode::Code);
        for secret in PPK_SECRETS {
            assert!(!out.contains(secret), "shows {secret}: {out}");
        }
    }
}
