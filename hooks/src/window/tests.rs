//! Window and stream redaction: the shapes that leaked when routes cut first (B30).

use proptest::prelude::*;

use crate::{OutputContext, Pipeline, Route, Window};

fn ctx(command: &str) -> OutputContext<'_> {
    OutputContext {
        route: Route::Poll,
        command,
        return_code: None,
        owner_task_id: "t",
        session_id: "proc_0123456789ab",
        backend: "local",
        partial: false,
    }
}

const GHP: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";

/// A PEM block of `n_lines` 64-character body lines.
fn pem(n_lines: usize) -> String {
    let mut out = String::from("-----BEGIN RSA PRIVATE KEY-----\n");
    for idx in 0..n_lines {
        let line: String = (0..64)
            .map(|k| {
                let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
                alphabet[(idx * 7 + k * 13) % 64] as char
            })
            .collect();
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str("-----END RSA PRIVATE KEY-----\n");
    out
}

/// Every 10-character run of the secret's hidden middle (between the 6 characters
/// a mask keeps at the head and the 4 it keeps at the tail).
fn leaks(output: &str, secret: &str) -> Option<String> {
    let seen = strip_escapes(output);
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() < 20 {
        return None;
    }
    let middle = &chars[6..chars.len() - 4];
    middle
        .windows(10)
        .map(|w| w.iter().collect::<String>())
        .find(|run| seen.contains(run.as_str()))
}

/// What a person sees: escapes and zero-width characters removed.
fn strip_escapes(text: &str) -> String {
    crate::redact::visible_text(text)
}

/// A PuTTY key file (version 3) with `n_lines` private lines, and its secrets
/// (the private lines and the MAC).
fn ppk(n_lines: usize) -> (String, Vec<String>) {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let line = |idx: usize| -> String {
        (0..64)
            .map(|k| alphabet[(idx * 11 + k * 5 + 3) % 64] as char)
            .collect()
    };
    let private: Vec<String> = (0..n_lines).map(|idx| line(idx + 2)).collect();
    let mac: String = (0..64)
        .map(|k| b"0123456789abcdef"[(k * 7 + 1) % 16] as char)
        .collect();
    let text = format!(
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: key\nPublic-Lines: 2\n{}\n{}\nPrivate-Lines: {n_lines}\n{}\nPrivate-MAC: {mac}\n",
        line(0),
        line(1),
        private.join("\n"),
    );
    let mut secrets = private;
    secrets.push(mac);
    (text, secrets)
}

fn pem_lines(block: &str) -> Vec<String> {
    block
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn b30_a_tail_window_inside_a_long_key_shows_no_key_body() {
    let p = std::sync::Arc::new(Pipeline::redaction_only());
    let key = pem(60);
    let text = format!("starting\n{key}done\n");
    for n in [100, 1000, 2000, 3000] {
        let shown = p.show(&ctx("cat key"), Window::last_chars(&text, n));
        for line in pem_lines(&key) {
            assert!(
                leaks(&shown, &line).is_none(),
                "tail {n} leaked {line}: {shown}"
            );
        }
        assert!(
            shown.chars().count() <= n,
            "tail {n} is {} chars",
            shown.chars().count()
        );
        assert!(shown.ends_with("done\n"));
    }
    // A running job: no END yet.
    let open = format!("starting\n{}", &key[..key.len() - 40]);
    let shown = p.show(&ctx("cat key"), Window::last_chars(&open, 500));
    for line in pem_lines(&key) {
        assert!(
            leaks(&shown, &line).is_none(),
            "running tail leaked {line}: {shown}"
        );
    }
}

#[test]
fn b30_a_page_of_lines_inside_a_key_keeps_its_line_count() {
    let p = std::sync::Arc::new(Pipeline::redaction_only());
    let key = pem(30);
    let text = format!("one\ntwo\n{key}three\n");
    let n_lines = text.lines().count();
    let page = p.show(&ctx("cat key"), Window::lines(&text, 10, 8));
    assert_eq!(page.lines().count(), 8);
    assert!(
        page.lines().all(|l| l == "[REDACTED PRIVATE KEY]"),
        "{page}"
    );
    let whole = p.show(&ctx("cat key"), Window::all(&text));
    assert_eq!(whole.lines().count(), n_lines);
}

#[test]
fn b30_windows_that_start_or_end_inside_a_token_show_only_its_mask() {
    let p = std::sync::Arc::new(Pipeline::redaction_only());
    let text = format!("token {GHP} used\n");
    for n in 1..text.len() {
        let tail = p.show(&ctx("x"), Window::last_chars(&text, n));
        assert!(leaks(&tail, GHP).is_none(), "tail {n}: {tail}");
        let head = p.show(&ctx("x"), Window::first_chars(&text, n));
        assert!(leaks(&head, GHP).is_none(), "head {n}: {head}");
        let range = p.show(&ctx("x"), Window::range(&text, n / 2..n));
        assert!(
            leaks(&range, GHP).is_none(),
            "range {}..{n}: {range}",
            n / 2
        );
    }
}

#[test]
fn b30_colour_codes_and_zero_width_characters_do_not_hide_a_token() {
    let p = std::sync::Arc::new(Pipeline::redaction_only());
    let shapes = [
        format!("\x1b[01;31m\x1b[K{GHP}\x1b[m\x1b[K found"),
        format!("x {}\x1b[1m{}\x1b[0m y", &GHP[..10], &GHP[10..]),
        format!("a \x1b]8;;http://h\x07{GHP}\x1b]8;;\x07 b"),
        format!("{}\u{200b}{}", &GHP[..4], &GHP[4..]),
        format!("{}\u{202e}{}", &GHP[..12], &GHP[12..]),
        "key=\x1b[32msk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123\x1b[0m".to_owned(),
        "id \x1b[1mAKIA\x1b[0mIOSFODNN7EXAMPLE ok".to_owned(),
    ];
    for shape in &shapes {
        let shown = p.show(&ctx("grep --color=always"), Window::all(shape));
        for secret in [GHP, "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123"] {
            assert!(leaks(&shown, secret).is_none(), "{shape:?} -> {shown:?}");
        }
        assert!(
            !strip_escapes(&shown).contains("IOSFODNN7EXAMPLE"),
            "{shape:?} -> {shown:?}"
        );
        // Escapes outside the masked range are kept for raw routes.
        if shape.ends_with(" found") {
            assert!(shown.starts_with("\x1b[01;31m\x1b[K"), "{shown:?}");
        }
    }
}

#[test]
fn b30_a_hook_sees_the_window_and_its_output_is_still_redacted_with_context() {
    use std::sync::Arc;
    #[derive(Debug)]
    struct Upper;
    impl crate::Hook for Upper {
        fn name(&self) -> &str {
            "upper"
        }
        fn transform(
            &self,
            _ctx: &OutputContext<'_>,
            output: &str,
        ) -> Result<Option<String>, crate::HookError> {
            Ok(Some(format!("<{output}>")))
        }
    }
    let chain = crate::HookChain::new(vec![Arc::new(Upper)]);
    let p = Pipeline::new(chain, &crate::RedactorConfig::default()).expect("pipeline");
    let text = format!("line one\ntoken {GHP} end");
    let shown = p.show(&ctx("x"), Window::last_chars(&text, 20));
    assert!(leaks(&shown, GHP).is_none(), "{shown}");
    assert!(shown.ends_with("end>"), "{shown}");
}

#[test]
fn b30_a_growing_tail_hides_an_unfinished_token() {
    let p = std::sync::Arc::new(Pipeline::redaction_only());
    let partial = "line\ntoken ghp_abcdefghijklmnop";
    let shown = p.show(&ctx("x"), Window::last_chars(partial, 1000).growing(true));
    assert_eq!(shown, "line\ntoken ");
    let waiting = "Authorization: Bearer ";
    let shown = p.show(&ctx("x"), Window::last_chars(waiting, 1000).growing(true));
    assert_eq!(shown, "");
    // A prompt shows; a finished output shows whole (and masks what it can).
    let prompt = "done\n$ ";
    assert_eq!(
        p.show(&ctx("x"), Window::last_chars(prompt, 10).growing(true)),
        "done\n$ "
    );
    let shown = p.show(&ctx("x"), Window::last_chars(partial, 1000));
    assert!(shown.starts_with("line\ntoken ghp_ab"), "{shown}");
    assert!(!shown.contains("ghp_abcdefghijklmnop"), "{shown}");
}

#[test]
fn b30_a_stream_masks_a_key_line_by_line_without_holding_it() {
    let p = std::sync::Arc::new(Pipeline::redaction_only());
    let c = ctx("ssh-keygen");
    let mut stream = Pipeline::show_stream(&p, &c);
    let key = pem(20);
    let mut out = String::new();
    for line in key.split_inclusive('\n') {
        let shown = stream.push(line);
        // Each line is released as it comes (nothing held after a newline).
        assert_eq!(stream.held_bytes(), 0);
        out.push_str(&shown);
    }
    out.push_str(&stream.finish());
    assert_eq!(out.lines().count(), key.lines().count());
    for line in pem_lines(&key) {
        assert!(leaks(&out, &line).is_none());
    }
}

#[test]
fn b30_an_idle_stream_releases_prompts_and_holds_what_can_still_be_a_secret() {
    let p = std::sync::Arc::new(Pipeline::redaction_only());
    let c = ctx("bash");
    for (partial, released) in [
        ("$ ", "$ "),
        ("Password: ", "Password: "),
        ("$ ls -la", "$ ls -la"),
        (" 45%|████      | 45/100\r", " 45%|████      | 45/100\r"),
        ("token ghp_abc", "token "),
        ("Authorization: Bearer ", ""),
        (
            "deploying to https://build.example.com/path",
            "deploying to ",
        ),
        ("\x1b[32m$\x1b[0m ", "\x1b[32m$\x1b[0m "),
    ] {
        let mut stream = Pipeline::show_stream(&p, &c);
        let mut shown = stream.push(partial).into_string();
        shown.push_str(&stream.release_idle());
        assert_eq!(shown, released, "partial {partial:?}");
    }
    // The held part is masked whole when the rest arrives.
    let mut stream = Pipeline::show_stream(&p, &c);
    let mut out = stream.push("Authorization: Bearer ").into_string();
    out.push_str(&stream.release_idle());
    out.push_str(&stream.push("abcdefghijklmnopqrstuvwxyz123456\n"));
    assert!(!out.contains("ghijklmnop"), "{out}");
}

#[test]
fn b30_echoed_keystrokes_show_as_typed_and_a_token_begun_before_an_idle_is_still_masked() {
    let p = std::sync::Arc::new(Pipeline::redaction_only());
    let c = ctx("bash");
    let mut stream = Pipeline::show_stream(&p, &c);
    let mut shown = stream.push("$ ").into_string();
    shown.push_str(&stream.release_idle());
    for key in ["g", "i", "t", " ", "s"] {
        shown.push_str(&stream.push(key));
        shown.push_str(&stream.release_idle());
        assert!(shown.ends_with(key), "{key:?} not shown at once: {shown:?}");
    }
    // The head of a token goes out on idle; the rest is still masked with it.
    let mut stream = Pipeline::show_stream(&p, &c);
    let mut out = stream.push("key gh").into_string();
    out.push_str(&stream.release_idle());
    assert_eq!(out, "key gh");
    out.push_str(&stream.push(&format!("{}\n", &GHP[2..])));
    assert_eq!(out, "key ghp_ab...6789\n");
}

#[test]
fn b30_a_key_line_that_arrives_in_two_parts_shows_one_mask() {
    let p = std::sync::Arc::new(Pipeline::redaction_only());
    let c = ctx("cat key");
    let mut stream = Pipeline::show_stream(&p, &c);
    let mut out = stream
        .push("-----BEGIN RSA PRIVATE KEY-----\r\nJg/")
        .into_string();
    out.push_str(&stream.release_idle());
    out.push_str(&stream.push("MIIEowIBAAKCAQEA7bq3xGZ8rY0r\r\n-----END RSA PRIVATE KEY-----\r\n"));
    out.push_str(&stream.finish());
    assert_eq!(
        out,
        "[REDACTED PRIVATE KEY]\r\n[REDACTED PRIVATE KEY]\r\n[REDACTED PRIVATE KEY]\r\n"
    );
}

#[test]
fn b30_a_secret_split_at_every_offset_of_a_stream_is_masked() {
    let p = std::sync::Arc::new(Pipeline::redaction_only());
    let c = ctx("x");
    let text = format!("a\nsee {GHP} and\n{}", pem(3));
    for cut in 1..text.len() {
        if !text.is_char_boundary(cut) {
            continue;
        }
        let mut stream = Pipeline::show_stream(&p, &c);
        let mut out = stream.push(&text[..cut]).into_string();
        out.push_str(&stream.release_idle());
        out.push_str(&stream.push(&text[cut..]));
        out.push_str(&stream.finish());
        assert!(leaks(&out, GHP).is_none(), "cut {cut}: {out}");
        for line in pem_lines(&pem(3)) {
            assert!(leaks(&out, &line).is_none(), "cut {cut}: {out}");
        }
    }
}

/// Secrets a property run plants, each with a form that may decorate it.
fn secret_strategy() -> impl Strategy<Value = (String, u8)> {
    let token = prop_oneof![
        "[A-Za-z0-9]{36}".prop_map(|s| format!("ghp_{s}")),
        "[A-Za-z0-9]{40}".prop_map(|s| format!("sk-proj-{s}")),
        "[A-Z0-9]{16}".prop_map(|s| format!("AKIA{s}")),
        "[A-Za-z0-9]{30}".prop_map(|s| format!("xoxb-1234-{s}")),
    ];
    (token, 0u8..4)
}

fn decorate(secret: &str, form: u8, at: usize) -> String {
    let at = at % (secret.len() - 1) + 1;
    match form {
        0 => secret.to_owned(),
        1 => format!("\x1b[01;31m{secret}\x1b[m"),
        2 => format!("{}\x1b[1m{}", &secret[..at], &secret[at..]),
        _ => format!("{}\u{200b}{}", &secret[..at], &secret[at..]),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn b30_property_no_window_or_chunking_shows_ten_characters_of_a_secret(
        words in prop::collection::vec("[a-z]{1,8}( |\n|: |\r\n)", 5..60),
        secrets in prop::collection::vec((secret_strategy(), any::<usize>(), any::<usize>()), 1..4),
        with_key in any::<bool>(),
        key_at in any::<usize>(),
        windows in prop::collection::vec((any::<usize>(), any::<usize>()), 4),
        chunks in prop::collection::vec(1usize..300, 1..20),
    ) {
        let mut parts: Vec<String> = words;
        let mut planted = Vec::new();
        for ((secret, form), place, split) in &secrets {
            let at = place % (parts.len() + 1);
            parts.insert(at, format!("{} ", decorate(secret, *form, *split)));
            planted.push(secret.clone());
        }
        let key = pem(4);
        if with_key {
            let at = key_at % (parts.len() + 1);
            parts.insert(at, format!("\n{key}"));
            planted.extend(pem_lines(&key));
        }
        let text: String = parts.concat();
        let p = std::sync::Arc::new(Pipeline::redaction_only());
        let c = ctx("make");
        let mut outputs = vec![p.show(&c, Window::all(&text)).into_string()];
        for (a, b) in &windows {
            let n = a % (text.len() + 1);
            outputs.push(p.show(&c, Window::last_chars(&text, n)).into_string());
            outputs.push(p.show(&c, Window::first_chars(&text, n)).into_string());
            let (lo, hi) = (a % (text.len() + 1), b % (text.len() + 1));
            outputs.push(p.show(&c, Window::range(&text, lo.min(hi)..lo.max(hi))).into_string());
            let n_lines = text.lines().count();
            outputs.push(p.show(&c, Window::lines(&text, a % (n_lines + 1), b % 20)).into_string());
        }
        let mut stream = Pipeline::show_stream(&p, &c);
        let mut streamed = String::new();
        let mut pos = 0;
        for (idx, size) in chunks.iter().cycle().enumerate() {
            if pos >= text.len() {
                break;
            }
            let mut end = (pos + size).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            streamed.push_str(&stream.push(&text[pos..end]));
            if idx % 3 == 0 {
                streamed.push_str(&stream.release_idle());
            }
            pos = end;
        }
        streamed.push_str(&stream.finish());
        prop_assert_eq!(streamed.lines().count(), text.lines().count());
        outputs.push(streamed);
        for out in &outputs {
            for secret in &planted {
                prop_assert!(leaks(out, secret).is_none(), "leaked {:?} in {:?}\nfrom {:?}", secret, out, text);
            }
        }
    }
}

/// A token whose first byte went out on idle, before an escape (`s\x1b[1mk-proj-…`),
/// fed a byte at a time with the stream going idle every third byte: the rest of the
/// token stays held until it can match, so no run of it is shown (found by the B30
/// property test: its characters went out a few at a time before the pattern could
/// match them).
#[test]
fn b30_a_token_whose_head_went_out_on_idle_is_held_until_it_matches() {
    let secret = "sk-proj-aaAa0000a0AAA0aAA0aAAAaaAA0AAAA0A0aA0aaA";
    let text = format!("a a a a a s\x1b[1m{} done\n", &secret[1..]);
    let p = std::sync::Arc::new(Pipeline::redaction_only());
    let c = ctx("make");
    let mut stream = Pipeline::show_stream(&p, &c);
    let mut streamed = String::new();
    for (idx, ch) in text.char_indices() {
        streamed.push_str(&stream.push(&text[idx..idx + ch.len_utf8()]));
        if idx % 3 == 0 {
            streamed.push_str(&stream.release_idle());
        }
    }
    streamed.push_str(&stream.finish());
    assert_eq!(leaks(&streamed, secret), None, "{streamed:?}");
    assert!(
        strip_escapes(&streamed).ends_with("0aaA done\n"),
        "{streamed:?}"
    );
}

/// A token as a fresh corpus printed it: bold or underlined in overstrike,
/// split by a DCS or APC string, or plain.
fn corpus_token(secret: &str, form: u8, at: usize) -> String {
    let at = at % (secret.len() - 1) + 1;
    match form {
        0 => secret.chars().map(|c| format!("{c}\u{8}{c}")).collect(),
        1 => secret.chars().map(|c| format!("_\u{8}{c}")).collect(),
        2 => format!("{}\x1bPq#0;2\x1b\\{}", &secret[..at], &secret[at..]),
        3 => format!("{}\x1b_app\x1b\\{}", &secret[..at], &secret[at..]),
        _ => secret.to_owned(),
    }
}

/// A key block as a fresh corpus printed it: every line behind a prefix or
/// before a trailer, or the whole key as one JSON string escaped twice.
fn corpus_key(key: &str, form: u8) -> String {
    let prefixed = |prefix: &str, suffix: &str| {
        key.lines()
            .enumerate()
            .map(|(n, l)| format!("{}{l}{suffix}\n", prefix.replace('#', &(n + 1).to_string())))
            .collect::<String>()
    };
    match form {
        0 => prefixed("keys/id_rsa:", ""),
        1 => prefixed("", "$"),
        2 => prefixed("#:", ""),
        3 => prefixed("> ", ""),
        4 => prefixed("50% done\r", ""),
        5 => prefixed("2026-12-03T10:00:00Z web[1]: ", ""),
        6 => {
            let once = serde_json::json!({ "key": key }).to_string();
            format!("{}\n", serde_json::json!({ "config": once }))
        }
        _ => key.to_owned(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn b30_property_overstrike_prefixes_escaping_and_partial_tokens_never_show_a_secret(
        words in prop::collection::vec("[a-z]{1,8}( |\n|: )", 5..40),
        secrets in prop::collection::vec((secret_strategy(), 0u8..5, any::<usize>(), any::<usize>()), 1..3),
        key_form in 0u8..8,
        key_lines in 2usize..40,
        key_at in any::<usize>(),
        putty in any::<bool>(),
        windows in prop::collection::vec((any::<usize>(), any::<usize>()), 3),
        chunks in prop::collection::vec(1usize..200, 1..12),
        cut in any::<usize>(),
    ) {
        let mut parts: Vec<String> = words;
        let mut planted = Vec::new();
        for ((secret, _), form, place, split) in &secrets {
            let at = place % (parts.len() + 1);
            parts.insert(at, format!("{} ", corpus_token(secret, *form, *split)));
            planted.push(secret.clone());
        }
        let (key, key_secrets) = if putty {
            ppk(key_lines)
        } else {
            let key = pem(key_lines);
            let lines = pem_lines(&key);
            (key, lines)
        };
        let at = key_at % (parts.len() + 1);
        parts.insert(at, format!("\n{}", corpus_key(&key, key_form)));
        planted.extend(key_secrets);
        let text: String = parts.concat();
        let p = std::sync::Arc::new(Pipeline::redaction_only());
        let c = ctx("make");
        let mut outputs = vec![p.show(&c, Window::all(&text)).into_string()];
        for (a, b) in &windows {
            let n = a % (text.len() + 1);
            outputs.push(p.show(&c, Window::last_chars(&text, n)).into_string());
            let (lo, hi) = (a % (text.len() + 1), b % (text.len() + 1));
            outputs.push(p.show(&c, Window::range(&text, lo.min(hi)..lo.max(hi))).into_string());
            let n_lines = text.lines().count();
            outputs.push(p.show(&c, Window::lines(&text, a % (n_lines + 1), b % 20)).into_string());
        }
        // A running job cut anywhere: the growing windows (a page at the end, a
        // tail) hold what could still become a secret.
        let mut end = cut % (text.len() + 1);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let running = &text[..end];
        outputs.push(p.show(&c, Window::all(running).growing(true)).into_string());
        outputs.push(p.show(&c, Window::last_chars(running, 300).growing(true)).into_string());
        let n_lines = running.lines().count();
        outputs.push(
            p.show(&c, Window::lines(running, n_lines.saturating_sub(2), 5).growing(true)).into_string(),
        );
        let mut stream = Pipeline::show_stream(&p, &c);
        let mut streamed = String::new();
        let mut pos = 0;
        for (idx, size) in chunks.iter().cycle().enumerate() {
            if pos >= text.len() {
                break;
            }
            let mut end = (pos + size).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            streamed.push_str(&stream.push(&text[pos..end]));
            if idx % 3 == 0 {
                streamed.push_str(&stream.release_idle());
            }
            pos = end;
        }
        streamed.push_str(&stream.finish());
        outputs.push(streamed);
        for out in &outputs {
            for secret in &planted {
                prop_assert!(leaks(out, secret).is_none(), "leaked {:?} in {:?}\nfrom {:?}", secret, out, text);
            }
        }
    }
}

#[test]
fn b30_a_window_deep_inside_a_long_key_in_one_line_shows_only_masks() {
    // A PuTTY file of 1,100 private lines, a C1 SOS string inside each, escaped
    // twice into JSON with no MAC: one line of ~80 KB.
    let (file, secrets) = ppk(1100);
    let file = file[..file.find("Private-MAC").unwrap_or(file.len())].to_owned();
    let lines: Vec<String> = file
        .lines()
        .map(|l| {
            if l.len() > 8 {
                format!("{}\u{98}sos\u{9c}{}", &l[..6], &l[6..])
            } else {
                l.to_owned()
            }
        })
        .collect();
    let once = serde_json::to_string(&format!("{}\n", lines.join("\n"))).unwrap_or_default();
    let twice = serde_json::to_string(&format!("{{\"key\": {once}}}")).unwrap_or_default();
    let text = format!("before\n{{\"secret\": {twice}}}\nb");
    let line_start = text.find("{\"secret").unwrap_or(0);
    let p = Pipeline::redaction_only();
    let mut index = crate::KeyIndex::new();
    for part in text.as_bytes().chunks(4096) {
        index.push(part);
    }
    // A re-adopted session: an index that starts part-way, and the log.
    let mut part_way = crate::KeyIndex::starting_at(30_000);
    for part in text.as_bytes()[30_000..].chunks(4096) {
        part_way.push(part);
    }
    let mut log = tempfile::tempfile().unwrap_or_else(|e| panic!("{e}"));
    std::io::Write::write_all(&mut log, text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    for depth in [45, 20_000, 60_000, text.len() - line_start - 100] {
        for lookback in [1, 68, 2048] {
            let mut at = line_start + depth;
            while !text.is_char_boundary(at) {
                at += 1;
            }
            let mut from = at.saturating_sub(lookback);
            while !text.is_char_boundary(from) {
                from -= 1;
            }
            let source = &text[from..];
            let in_log = crate::key_open_in_log(Some(&log), from as u64, source);
            let opens = [
                index.open_at(from as u64).unwrap_or(in_log),
                part_way.open_at(from as u64).unwrap_or(in_log),
                in_log,
            ];
            let start = at - from;
            for (open, window) in opens.into_iter().flat_map(|open| {
                [
                    Window::last_chars(source, 45),
                    Window::last_chars(source, 400),
                    Window::range(source, start..source.len()),
                    Window::range(source, start..start + 360),
                    Window::last_chars_after(source, start, 45),
                ]
                .map(|w| (open, w))
            }) {
                let shown = p.show(&ctx("make"), window.after_open_key(open));
                let seen = strip_escapes(&shown);
                for secret in &secrets[..1100] {
                    assert!(
                        !seen.contains(&secret[8..24]),
                        "depth {depth}, lookback {lookback}, open {open} {opens:?} shows {secret}: {shown}"
                    );
                }
            }
        }
    }
}

/// A window deep inside a long key kept in one string (longer than a window's
/// context, so its context starts inside the line) shows only masks, whatever
/// the window's start cuts: a line's prefix, a body, a spelled escape.
#[test]
fn b30_a_window_deep_in_a_long_one_string_key_shows_only_masks() {
    let p = Pipeline::new(
        crate::HookChain::default(),
        &crate::RedactorConfig::default(),
    )
    .expect("pipeline");
    let escape = "\u{1b}^pm\u{1b}\\";
    let key = pem(400);
    let lines: Vec<String> = key
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let mut line = line.to_owned();
            line.insert_str(6, escape);
            format!("id_rsa:{}:{line}", i + 1)
        })
        .collect();
    let once = serde_json::to_string(&format!("{}\n", lines.join("\n"))).unwrap_or_default();
    let source = format!("start\n{{\"key\": {once}}}\ndone\n");
    assert!(source.len() > 2 * super::LINE_CONTEXT_BYTES);
    // What no window may show: 16 characters of a body line after its escape.
    let bodies: Vec<&str> = key.lines().skip(1).take(400).map(|l| &l[6..22]).collect();
    let last_body = source.find("-----E").unwrap_or(source.len());
    for start in (super::LINE_CONTEXT_BYTES + 7..last_body).step_by(97) {
        for n in [200, 3000] {
            let shown = p.show(
                &ctx("cat k.json"),
                Window::last_chars_after(&source, start, n),
            );
            let shown = shown.as_str();
            if let Some(body) = bodies.iter().find(|b| shown.contains(*b)) {
                panic!("a window from {start} shows {body}: {shown}");
            }
        }
    }
}

#[test]
fn b30_redact_after_deep_in_a_long_one_string_key_shows_only_masks() {
    // A `cat -n` of a key, escaped twice into one string longer than the context
    // (16 KiB), each line with an APC (C1) escape inside: the text after a cut
    // anywhere deep in it shows no body (fuzz finding: the context started inside a
    // line's `   786\t` prefix, where the key state was judged closed).
    let r = crate::Redactor::new(&crate::RedactorConfig::default()).expect("redactor");
    let key = pem(400);
    let lines: Vec<String> = key.lines().map(str::to_owned).collect();
    let source = crate::redact::numbered_in_one_string(&lines, "\u{9f}apc\u{9c}");
    assert!(source.len() > 2 * super::LINE_CONTEXT_BYTES);
    let bodies: Vec<&str> = key.lines().skip(1).take(400).map(|l| &l[6..22]).collect();
    let last_body = source.find("-----E").unwrap_or(source.len());
    for cut in (super::LINE_CONTEXT_BYTES + 7..last_body).step_by(89) {
        if !source.is_char_boundary(cut) {
            continue;
        }
        let shown = r.redact_after(&source[..cut], &source[cut..], crate::RedactMode::Code);
        if let Some(body) = bodies.iter().find(|b| shown.contains(*b)) {
            panic!("the text after {cut} shows {body}");
        }
    }
}

#[test]
fn b30_a_source_cut_anywhere_inside_a_one_string_key_shows_only_masks() {
    // A source that starts anywhere inside a key kept in one string (a `cat -n`,
    // escaped twice, an APC inside each line), with the state the key index gives
    // there (open): the cut piece before the string's next escaped line start is
    // the rest of a line of the block, whatever it starts with (a digit of the
    // number, half of a spelled tab or escape), so no window, look-back or stream
    // from there shows a body line (fuzz finding).
    let p = Pipeline::new(
        crate::HookChain::default(),
        &crate::RedactorConfig::default(),
    )
    .expect("pipeline");
    let key = pem(60);
    let lines: Vec<String> = key.lines().map(str::to_owned).collect();
    let text = crate::redact::numbered_in_one_string(&lines, "\u{9f}apc\u{9c}");
    let bodies: Vec<&str> = key.lines().skip(1).take(60).map(|l| &l[6..22]).collect();
    let first_body = text.find("     2").unwrap_or(0);
    let last_body = text.find("-----E").unwrap_or(text.len());
    let r = p.redactor();
    for from in first_body..last_body - 400 {
        if !text.is_char_boundary(from) {
            continue;
        }
        let source = &text[from..];
        let mut start = 300;
        while !source.is_char_boundary(start) {
            start += 1;
        }
        let shown = p.show(
            &ctx("cat k.json"),
            Window::range(source, start..source.len()).after_open_key(true),
        );
        let after = r.redact_after_state(
            &source[..start],
            true,
            &source[start..],
            crate::RedactMode::Code,
        );
        let mut stream =
            crate::StreamRedactor::new(std::sync::Arc::clone(r), crate::RedactMode::Code)
                .starting_in_key(true);
        let mut streamed = stream.push(source);
        streamed.push_str(&stream.finish());
        for (what, out) in [
            ("window", shown.as_str()),
            ("redact_after", &after),
            ("stream", &streamed),
        ] {
            if let Some(body) = bodies.iter().find(|b| out.contains(*b)) {
                panic!(
                    "a {what} of a source from {from} shows {body}: {:?}",
                    &text[from..from + 40]
                );
            }
        }
    }
}

proptest! {
    /// The `nth` newline at or after `from`, found by block counts, is the one a
    /// walk newline by newline finds, across block edges.
    #[test]
    fn nth_newline_is_the_nth_newline_from_its_start(
        lines in proptest::collection::vec(0usize..300, 0..60),
        from_pct in 0usize..100,
        nth in 0usize..70,
    ) {
        let text: String = lines.iter().map(|n| format!("{}\n", "x".repeat(*n))).collect();
        let bytes = text.as_bytes();
        let from = bytes.len() * from_pct / 100;
        let want = bytes[from..]
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(nth)
            .map(|(idx, _)| from + idx);
        prop_assert_eq!(super::nth_newline(bytes, from, nth), want);
    }
}

/// A window may start anywhere in a line whose token a DCS string overstrikes
/// (`ESC P … ESC \` then `n`): the terminator's backslash and the `n` after it
/// spell no line break, so the context reaches back to the token's head.
#[test]
fn b30_a_window_starting_after_a_string_terminator_inside_a_token_masks_it() {
    let secret = "sk-proj-anl0DgKx79HcMYRt5xXjBMqtB45tdToaZswTSc02";
    let text = format!(
        "{} sk-proj-AaaaAEGuj5lc0789ColeDti098hWZVmc\x1bPq#0;2\x1b\\isEcAbBV aaaa a \n",
        corpus_token(secret, 2, 8)
    );
    assert!(
        text.contains("\x1b\\n"),
        "the token holds a terminator before an n"
    );
    let p = Pipeline::redaction_only();
    let c = ctx("make");
    let starts = (0..text.len()).filter(|lo| text.is_char_boundary(*lo));
    for lo in starts {
        let range = p
            .show(&c, Window::range(&text, lo..text.len()))
            .into_string();
        assert_eq!(leaks(&range, secret), None, "a range from {lo}: {range:?}");
        let last = p
            .show(&c, Window::last_chars(&text, text.len() - lo))
            .into_string();
        assert_eq!(
            leaks(&last, secret),
            None,
            "the last chars from {lo}: {last:?}"
        );
    }
}

/// A stream that goes idle inside a terminal string still open right after a
/// token's head (`sk-proj-Zo29… ESC P q#0;2`, the rest after `ESC \`) holds the
/// head: the string's body is not text that ends the token.
#[test]
fn b30_an_idle_stream_inside_an_open_terminal_string_holds_the_token_before_it() {
    let secret = "sk-proj-Zo29EkqaObqiB86GO3i3sywicb2HA9sVhG7t3rnf";
    let p = std::sync::Arc::new(Pipeline::redaction_only());
    let c = ctx("make");
    for (body, split) in [("Pq#0;2", 18), ("_app", 12), ("]0;title", 30), ("P", 9)] {
        let mut stream = Pipeline::show_stream(&p, &c);
        let mut streamed = stream.push("done\naaaa ").into_string();
        let head = format!("{}\x1b{body}", &secret[..split]);
        streamed.push_str(&stream.push(&head).into_string());
        let idle = stream.release_idle().into_string();
        assert!(
            !idle.contains(&secret[..split]),
            "{body}: the idle release showed {idle:?}"
        );
        streamed.push_str(&idle);
        let rest = format!("\x1b\\{} a\n", &secret[split..]);
        streamed.push_str(&stream.push(&rest).into_string());
        streamed.push_str(&stream.finish().into_string());
        assert_eq!(leaks(&streamed, secret), None, "{body}: {streamed:?}");
        assert!(streamed.starts_with("done\naaaa "), "{streamed:?}");
    }
}
