//! The redactor with arbitrary extra patterns and arbitrary text: no panic, and when
//! `Redactor::new` accepts the patterns, a GitHub token planted in the text never
//! comes out whole, by any entry point (`redact`, `redact_output`, `redact_after`,
//! a `StreamRedactor` fed in arbitrary chunks, `Pipeline::show` over every kind of
//! window).
//!
//! Input format (so seeds can be written by hand): byte 0 holds flags (bits 0-2 the
//! window, bit 3 "use the extra patterns", bit 4 "the token is on a line with the
//! text around it", bit 5 "the token is printed in overstrike, `c\bc`, as `man`
//! bolds it; outputs are checked as a terminal shows them: escapes removed, then
//! `col -b`", bit 6 "go idle now and
//! then", bit 7 the `SecretDump` mode), bytes 1-2 a size (little-endian), byte 3 seeds the token;
//! the rest is UTF-8 (lossily) split at U+001E into the text before the token, the
//! text after it, the command and the extra patterns (separated by U+001F).

#![no_main]

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use herd_hooks::{
    HookChain, OutputContext, Pipeline, RedactMode, Redactor, RedactorConfig, Route,
    StreamRedactor, Window,
};
use libfuzzer_sys::fuzz_target;

/// At most this many extra patterns, each at most this long: compiling is the
/// slow part, and longer patterns find nothing shorter ones do not.
const MAX_PATTERNS: usize = 4;
const MAX_PATTERN_BYTES: usize = 128;

fn builtin() -> Arc<Redactor> {
    static BUILTIN: OnceLock<Arc<Redactor>> = OnceLock::new();
    Arc::clone(BUILTIN.get_or_init(|| Arc::new(Redactor::builtin())))
}

/// The redactor for `patterns`, `None` when they are refused. Compiling is most of
/// an execution's time and mutations often change only the text, so the last
/// few hundred are kept.
fn redactor_for(patterns: &[String]) -> Option<Arc<Redactor>> {
    thread_local! {
        static CACHE: RefCell<HashMap<Vec<String>, Option<Arc<Redactor>>>> =
            RefCell::new(HashMap::new());
    }
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(found) = cache.get(patterns) {
            return found.clone();
        }
        if cache.len() >= 256 {
            cache.clear();
        }
        let built = Redactor::new(&RedactorConfig {
            extra_patterns: patterns.to_vec(),
        })
        .ok()
        .map(Arc::new);
        cache.insert(patterns.to_vec(), built.clone());
        built
    })
}

/// A `ghp_` token of 36 alphanumerics derived from `seed`, which the built-in
/// family masks.
fn token(seed: u8) -> String {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut state = u32::from(seed).wrapping_mul(2_654_435_761).wrapping_add(1);
    let body: String = (0..36)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            char::from(ALNUM[state as usize % ALNUM.len()])
        })
        .collect();
    format!("ghp_{body}")
}

/// `text` as a terminal shows it: escape sequences as a terminal's parser consumes
/// them (CSI, the OSC/DCS/SOS/PM/APC strings up to their terminator, nF escapes:
/// ESC, intermediates 0x20..=0x2F, a final 0x30..=0x7E; the two-byte Fp/Fe/Fs
/// ones; their C1 forms), other controls but tab, newline, carriage return and
/// backspace, and zero-width and bidi characters removed; then overstrike as `col
/// -b` resolves it. Written apart from the redactor's own stripper, from the
/// families, so the two are checked against each other. A string or CSI stops
/// before a newline (the redactor never hides one; a terminal would hide more,
/// which could only hide a token, never show one).
fn seen(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut idx = 0;
    let string_end = |mut at: usize| -> usize {
        while let Some(&c) = chars.get(at) {
            match c {
                '\u{7}' | '\u{9c}' => return at + 1,
                '\u{1b}' => return if chars.get(at + 1) == Some(&'\\') { at + 2 } else { at },
                c if (c as u32) < 0x20 => return at,
                _ => at += 1,
            }
        }
        at
    };
    let csi_end = |mut at: usize| -> usize {
        while let Some(&c) = chars.get(at) {
            match c as u32 {
                0x20..=0x3f => at += 1,
                0x40..=0x7e => return at + 1,
                _ => return at,
            }
        }
        at
    };
    while idx < chars.len() {
        let c = chars[idx];
        idx = match c {
            '\u{1b}' => match chars.get(idx + 1).map(|n| *n as u32) {
                Some(0x5b) => csi_end(idx + 2),
                Some(0x5d | 0x50 | 0x58 | 0x5e | 0x5f) => string_end(idx + 2),
                Some(0x20..=0x2f) => {
                    let mut at = idx + 1;
                    while chars.get(at).is_some_and(|n| (0x20..=0x2f).contains(&(*n as u32))) {
                        at += 1;
                    }
                    match chars.get(at).map(|n| *n as u32) {
                        Some(0x30..=0x7e) => at + 1,
                        _ => at,
                    }
                }
                Some(0x30..=0x7e) => idx + 2,
                _ => idx + 1,
            },
            '\u{9b}' => csi_end(idx + 1),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => string_end(idx + 1),
            '\t' | '\n' | '\r' | '\u{8}' => {
                out.push(c);
                idx + 1
            }
            c if c.is_control() => idx + 1,
            '\u{ad}' | '\u{61c}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{feff}' => idx + 1,
            c => {
                out.push(c);
                idx + 1
            }
        };
    }
    col_b(&out)
}

/// `text` as `col -b` shows it: a backspace lets the next character overwrite the
/// previous one.
fn col_b(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{8}' {
            if chars.peek().is_some_and(|n| !n.is_control()) && !out.ends_with('\n') {
                out.pop();
            }
            continue;
        }
        out.push(c);
    }
    out
}

fn check(what: &str, out: &str, token: &str, text: &str, patterns: &[String]) {
    assert!(
        !out.contains(token) && !col_b(out).contains(token) && !seen(out).contains(token),
        "{what} let the planted token out\npatterns: {patterns:?}\ntext: {text:?}\nout: {out:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (flags, size, seed) = (data[0], u16::from_le_bytes([data[1], data[2]]), data[3]);
    let rest = String::from_utf8_lossy(&data[4..]);
    let mut parts = rest.splitn(4, '\u{1e}');
    let before = parts.next().unwrap_or_default();
    let after = parts.next().unwrap_or_default();
    let command = parts.next().unwrap_or("cargo test");
    let patterns: Vec<String> = match parts.next() {
        Some(part) if flags & 0x08 != 0 => part
            .split('\u{1f}')
            .filter(|p| !p.is_empty() && p.len() <= MAX_PATTERN_BYTES)
            .take(MAX_PATTERNS)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    let redactor = if patterns.is_empty() {
        builtin()
    } else {
        match redactor_for(&patterns) {
            Some(r) => r,
            // Refused patterns are the config's error, reported at load: nothing to show.
            None => return,
        }
    };
    let token = token(seed);
    let printed = if flags & 0x20 != 0 {
        token.chars().map(|c| format!("{c}\u{8}{c}")).collect()
    } else {
        token.clone()
    };
    // The token stands alone on its line, or between words on one (`token ghp_...
    // used`), as tools print them.
    let text = if flags & 0x10 != 0 {
        format!("{before} {printed} {after}")
    } else {
        format!("{before}\n{printed}\n{after}")
    };
    let n = usize::from(size);
    let mode = if flags & 0x80 != 0 {
        RedactMode::SecretDump
    } else {
        RedactMode::Code
    };

    check(
        "redact",
        &redactor.redact(&text, mode),
        &token,
        &text,
        &patterns,
    );
    check(
        "redact_output",
        &redactor.redact_output(command, &text),
        &token,
        &text,
        &patterns,
    );
    let mut split = n.min(text.len());
    while !text.is_char_boundary(split) {
        split -= 1;
    }
    let (head, tail) = text.split_at(split);
    let joined = format!(
        "{}{}",
        redactor.redact(head, mode),
        redactor.redact_after(head, tail, mode)
    );
    // Each part alone may hold half the token; together they must not hold it whole.
    check("redact + redact_after", &joined, &token, &text, &patterns);

    // A stream fed in chunks of a size from the input, going idle now and then.
    let mut stream = StreamRedactor::new(Arc::clone(&redactor), mode);
    let chunk = 1 + n % 64;
    let mut out = String::new();
    let mut at = 0;
    let mut n_chunks = 0u32;
    while at < text.len() {
        let mut end = (at + chunk).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push_str(&stream.push(&text[at..end]));
        n_chunks += 1;
        if flags & 0x40 != 0 && n_chunks % 3 == 0 {
            out.push_str(&stream.release_idle());
        }
        at = end;
    }
    out.push_str(&stream.finish());
    check("StreamRedactor", &out, &token, &text, &patterns);

    let pipeline = Pipeline::with_redactor(HookChain::default(), Arc::clone(&redactor));
    let ctx = OutputContext {
        route: Route::Poll,
        command,
        return_code: None,
        owner_task_id: "fuzz",
        session_id: "proc_000000000000",
        backend: "local",
        partial: false,
    };
    let window = match flags & 0x07 {
        0 => Window::all(&text),
        1 => Window::last_chars(&text, n),
        2 => Window::first_chars(&text, n),
        3 => Window::range(&text, n..n.saturating_add(usize::from(seed) * 4)),
        4 => Window::lines(&text, n % 8, usize::from(seed % 8)),
        5 => Window::last_chars_after(&text, n, usize::from(seed)),
        6 => Window::all(&text).growing(true),
        _ => Window::last_chars(&text, n).after_open_key(seed & 1 == 1),
    };
    let shown = pipeline.show(&ctx, window);
    check("Pipeline::show", shown.as_str(), &token, &text, &patterns);
    let command_shown = pipeline.show_command(&text);
    check(
        "Pipeline::show_command",
        command_shown.as_str(),
        &token,
        &text,
        &patterns,
    );
});
