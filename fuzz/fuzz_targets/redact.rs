//! The redactor with arbitrary extra patterns and arbitrary text: no panic, and when
//! `Redactor::new` accepts the patterns, a secret planted in the text never comes
//! out (no run of 10 characters of a token, of 16 of a key line, nor a command
//! line's password whole), by any entry point (`redact`, `redact_output`,
//! `redact_after`, `redact_command`, a `StreamRedactor` and a `ShownStream` fed in
//! arbitrary chunks, `Pipeline::show` over every kind of window, the block read-out),
//! as a terminal shows it (escapes removed, overstrike resolved as `col -b` does).
//!
//! The secrets (`plant`): a `ghp_` token, a PEM private key (a few lines, or more
//! than 64 KiB of them), a PuTTY `.ppk` file, or a password in a command line; each
//! line behind a prefix (`path:`, `grep -n`, `cat -A`'s `$`, a `\r` progress frame,
//! a log prefix, a diff marker, `nl`), in JSON once or twice, in overstrike (bold or
//! underlined), with a terminated DCS/SOS/PM/APC/OSC string inside.
//!
//! Windows as the routes cut them: a page or chunk that starts deep inside a key
//! learns the key state at its start from a `KeyIndex` fed the output in chunks (or
//! from the log, by `key_open_in_log`, where the index did not see it), exactly as
//! herd-core asks; and the output cut inside the secret while it is still being
//! written (`growing`): the unfinished part must be held back on every route.
//! Where the index answers at a line start, it must agree with the look-back.
//!
//! Input format (so seeds can be written by hand): byte 0 holds flags (bits 0-2 the
//! window, bit 3 "use the extra patterns", bit 4 "the token is on a line with the
//! text around it", bit 5 "the secret is printed in bold overstrike, `c\bc`", bit 6
//! "go idle now and then", bit 7 the `SecretDump` mode), bytes 1-2 a size
//! (little-endian), byte 3 seeds the secret; byte 4 the form (bits 0-1 the kind:
//! token, PEM key, PuTTY key, command line; bits 2-4 the line prefix; bits 5-6 the
//! escaping: none, JSON, JSON twice, underline; bit 7 a string escape inside every
//! line); byte 5 more (bits 0-2 which string escape, bit 3 a long key, bit 4 no END
//! line, bit 5 cut the output inside the secret, bits 6-7 how the key state at a
//! window's start is learnt: the index from the start, an index that starts
//! part-way, the log alone, no log); the rest is UTF-8 (lossily) split at U+001E
//! into the text before the secret, the text after it, the command and the extra
//! patterns (separated by U+001F).

#![no_main]

#[path = "redact/plant.rs"]
mod plant;

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write as _;
use std::sync::{Arc, OnceLock};

use herd_hooks::{
    HookChain, KeyIndex, OutputContext, Pipeline, RedactMode, Redactor, RedactorConfig, Route,
    StreamRedactor, Window, key_open_at_end, key_open_in_log, key_state_matters,
};
use libfuzzer_sys::fuzz_target;
use plant::{Form, Kind, Planted, Runs};

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
                '\u{1b}' => {
                    return if chars.get(at + 1) == Some(&'\\') {
                        at + 2
                    } else {
                        at
                    };
                }
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
                    while chars
                        .get(at)
                        .is_some_and(|n| (0x20..=0x2f).contains(&(*n as u32)))
                    {
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
            '\u{ad}'
            | '\u{61c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}' => idx + 1,
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

/// What one execution checks against.
struct Judge<'a> {
    planted: &'a Planted,
    runs: Runs<'a>,
    text: &'a str,
    patterns: &'a [String],
}

impl Judge<'_> {
    /// `out` must show no run of a fragment, raw, as `col -b` shows it, or as a
    /// terminal does.
    fn check(&self, what: &str, out: &str) {
        for (reading, shown) in [
            ("raw", out.to_owned()),
            ("col -b", col_b(out)),
            ("terminal", seen(out)),
        ] {
            if let Some(run) = self.runs.first_in(&shown) {
                panic!(
                    "{what} let {run:?} of the planted secret out ({reading})\npatterns: {:?}\ntext: {:?}\nout: {out:?}",
                    self.patterns, self.text
                );
            }
        }
    }

    /// Only the whole fragment counts (a part shown alone is a documented caveat).
    fn check_whole(&self, what: &str, out: &str) {
        for shown in [out.to_owned(), col_b(out), seen(out)] {
            for f in &self.planted.fragments {
                assert!(
                    !shown.contains(f.as_str()),
                    "{what} let the planted secret out whole\npatterns: {:?}\ntext: {:?}\nout: {out:?}",
                    self.patterns,
                    self.text
                );
            }
        }
    }
}

/// One execution's input, decoded.
struct Case<'a> {
    flags: u8,
    n: usize,
    seed: u8,
    extra: u8,
    mode: RedactMode,
    command: &'a str,
    redactor: Arc<Redactor>,
    pipeline: Pipeline,
}

impl Case<'_> {
    fn ctx(&self) -> OutputContext<'_> {
        OutputContext {
            route: Route::Poll,
            command: self.command,
            return_code: None,
            owner_task_id: "fuzz",
            session_id: "proc_000000000000",
            backend: "local",
            partial: false,
        }
    }
}

/// The whole-text entry points.
fn whole_text(case: &Case<'_>, judge: &Judge<'_>, text: &str) {
    let redactor = &case.redactor;
    judge.check("redact", &redactor.redact(text, case.mode));
    judge.check("redact_output", &redactor.redact_output(case.command, text));
    let mut split = case.n.min(text.len());
    while !text.is_char_boundary(split) {
        split -= 1;
    }
    let (head, tail) = text.split_at(split);
    let joined = format!(
        "{}{}",
        redactor.redact(head, case.mode),
        redactor.redact_after(head, tail, case.mode)
    );
    // Each part alone may hold half the token; together they must not hold it whole.
    judge.check_whole("redact + redact_after", &joined);
    judge.check(
        "Pipeline::show_command",
        case.pipeline.show_command(text).as_str(),
    );
    if let Some(blocks) = case.pipeline.show_log_blocks(
        case.command,
        text.as_bytes().to_vec(),
        false,
        true,
        1 + usize::from(case.seed & 1),
    ) {
        let mut shown = Vec::new();
        for part in blocks.parts() {
            shown.extend_from_slice(part);
        }
        shown.extend_from_slice(blocks.unconsumed());
        judge.check(
            "Pipeline::show_log_blocks",
            &String::from_utf8_lossy(&shown),
        );
    }
}

/// At most this many idles per stream: an idle judges the whole held line (up to
/// 64 KiB), and a real stream idles after a pause, not every few bytes.
const MAX_IDLES: usize = 16;

/// The streams, fed in chunks of a size from the input, going idle now and then:
/// every third chunk, or on a long text `MAX_IDLES` times spread over it (idling
/// every third chunk of a long key cost 70 s per input).
fn streams(case: &Case<'_>, judge: &Judge<'_>, text: &str) {
    let chunk = 1 + case.n % 64;
    let idle = case.flags & 0x40 != 0;
    let idle_every = (text.len().div_ceil(chunk) / MAX_IDLES).max(3);
    let mut stream = StreamRedactor::new(Arc::clone(&case.redactor), case.mode);
    let pipeline = Arc::new(Pipeline::with_redactor(
        HookChain::default(),
        Arc::clone(&case.redactor),
    ));
    let mut shown = Pipeline::show_stream(&pipeline, &case.ctx());
    let (mut out, mut out_shown) = (String::new(), String::new());
    let mut at = 0;
    let mut n_chunks = 0usize;
    while at < text.len() {
        let mut end = (at + chunk).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push_str(&stream.push(&text[at..end]));
        out_shown.push_str(shown.push(&text[at..end]).as_str());
        n_chunks += 1;
        if idle && n_chunks % idle_every == 0 {
            out.push_str(&stream.release_idle());
            out_shown.push_str(shown.release_idle().as_str());
        }
        at = end;
    }
    out.push_str(&stream.finish());
    out_shown.push_str(shown.finish().as_str());
    judge.check("StreamRedactor", &out);
    judge.check("ShownStream", &out_shown);
}

/// `Pipeline::show` over the window the flags choose.
fn windows(case: &Case<'_>, judge: &Judge<'_>, text: &str) {
    let (n, seed) = (case.n, case.seed);
    let window = match case.flags & 0x07 {
        0 => Window::all(text),
        1 => Window::last_chars(text, n),
        2 => Window::first_chars(text, n),
        3 => Window::range(text, n..n.saturating_add(usize::from(seed) * 4)),
        4 => Window::lines(text, n % 8, usize::from(seed % 8)),
        5 => Window::last_chars_after(text, n, usize::from(seed)),
        6 => Window::all(text).growing(true),
        _ => Window::last_chars(text, n).after_open_key(seed & 1 == 1),
    };
    judge.check(
        "Pipeline::show",
        case.pipeline.show(&case.ctx(), window).as_str(),
    );
}

/// A route's view from `at` on (a page, a chunk, a heartbeat): its source starts
/// `lookback` bytes before `at` (herd reads a fixed look-back before a window; a
/// shorter one here, so a source may start anywhere inside a key block, but never
/// after the head of a token the window cuts, which herd's always holds),
/// and the key state where the source starts comes from the session's key index,
/// or the log where the index did not see it, asked only when the source's first
/// line could be key body (as herd-core's `key_open_at` does).
fn deep_windows(case: &Case<'_>, judge: &Judge<'_>, text: &str, at: usize, lookback: usize) {
    let mut from = at.saturating_sub(lookback);
    while !text.is_char_boundary(from) {
        from -= 1;
    }
    let source = &text[from..];
    let chunk = 1 + (usize::from(case.seed) * 31 + case.n) % 4096;
    let index = match case.extra >> 6 {
        0 => {
            let mut index = KeyIndex::new();
            for part in text.as_bytes().chunks(chunk) {
                index.push(part);
            }
            Some(index)
        }
        1 => {
            // A re-adopted session: the index starts part-way, not knowing the state.
            let skip = (case.n / 2).min(text.len());
            let mut index = KeyIndex::starting_at(skip as u64);
            for part in text.as_bytes()[skip..].chunks(chunk) {
                index.push(part);
            }
            Some(index)
        }
        _ => None,
    };
    // Where the index answers at a line start, it agrees with the look-back.
    if let Some(index) = &index
        && (from == 0 || text.as_bytes()[from - 1] == b'\n')
        && let Some(open) = index.open_at(from as u64)
    {
        let looked = key_open_at_end(&text[..from]);
        assert_eq!(
            open, looked,
            "the key index says open={open} at {from}, the look-back {looked}\ntext: {text:?}"
        );
    }
    let key_open = if from == 0 || !key_state_matters(source) {
        false
    } else {
        match index.as_ref().and_then(|i| i.open_at(from as u64)) {
            Some(open) => open,
            None if case.extra >> 6 == 3 => key_open_in_log(None, from as u64, source),
            None => {
                let log = tempfile::tempfile().and_then(|mut f| {
                    f.write_all(text.as_bytes())?;
                    Ok(f)
                });
                key_open_in_log(log.as_ref().ok(), from as u64, source)
            }
        }
    };
    // With no log and no index answer, herd knows a block is open where the source
    // starts only from what follows it (an END before any BEGIN: `key_open_in_log`
    // with no log); a key with no END whose BEGIN lies before the source cannot be
    // known there, so its body is not judged (masking every body-like page of a
    // session whose log is gone would mask `seq` and base64 pages too).
    let told = index
        .as_ref()
        .and_then(|i| i.open_at(from as u64))
        .is_some();
    let shown_end = {
        let shown = seen(source);
        shown.contains("-----END") || shown.contains("Private-MAC:")
    };
    if case.extra >> 6 == 3 && !told && judge.planted.head.is_none() && !shown_end {
        return;
    }
    let start = at - from;
    let n = case.n % 512;
    for window in [
        Window::range(source, start..start + n * 8),
        Window::range(source, start..source.len()),
        Window::last_chars_after(source, start, n),
        Window::lines(source, usize::from(case.seed % 4), 1 + n % 16),
        Window::first_chars(source, n * 4),
    ] {
        judge.check(
            "Pipeline::show from deep inside",
            case.pipeline
                .show(&case.ctx(), window.after_open_key(key_open))
                .as_str(),
        );
    }
    let out =
        case.redactor
            .redact_after_state(&source[..start], key_open, &source[start..], case.mode);
    judge.check("redact_after_state from deep inside", &out);
    let mut stream =
        StreamRedactor::new(Arc::clone(&case.redactor), case.mode).starting_in_key(key_open);
    let mut out = stream.push(source);
    out.push_str(&stream.finish());
    judge.check("StreamRedactor from deep inside", &out);
}

/// The output cut at `cut`, inside the secret, while it is still being written:
/// the paged and windowed routes hold the unfinished part back as streams do.
fn unfinished(case: &Case<'_>, judge: &Judge<'_>, text: &str, cut: usize) {
    let source = &text[..cut];
    let n = case.n % 4096;
    for window in [
        Window::all(source),
        Window::range(source, cut.saturating_sub(usize::from(case.seed) * 4)..cut),
        Window::range(source, 0..cut),
        Window::last_chars(source, n),
        Window::lines(source, usize::from(case.seed % 8), 4096),
    ] {
        judge.check(
            "Pipeline::show of unfinished output",
            case.pipeline
                .show(&case.ctx(), window.growing(true))
                .as_str(),
        );
    }
}

/// The command-line entry points, for a password in a command line.
fn command_line(case: &Case<'_>, judge: &Judge<'_>, command: &str) {
    judge.check_whole(
        "Redactor::redact_command",
        &case.redactor.redact_command(command),
    );
    judge.check_whole(
        "Pipeline::show_command",
        case.pipeline.show_command(command).as_str(),
    );
    judge.check_whole(
        "Pipeline::show_command_head",
        case.pipeline
            .show_command_head(command, case.n % 256)
            .as_str(),
    );
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 6 {
        return;
    }
    let (flags, size, seed) = (data[0], u16::from_le_bytes([data[1], data[2]]), data[3]);
    let (form_byte, extra) = (data[4], data[5]);
    let rest = String::from_utf8_lossy(&data[6..]);
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
    let form = Form::new(flags, seed, form_byte, extra);
    let planted = match form.kind {
        Kind::Token => plant::planted_token(&form),
        Kind::Pem | Kind::Ppk => plant::key(&form),
        Kind::Command => plant::command(&form, after),
    };
    // A fragment the fuzzer wrote itself is no leak of the planted one.
    if plant::copies_a_fragment(&rest, &planted) {
        return;
    }
    let mode = if flags & 0x80 != 0 {
        RedactMode::SecretDump
    } else {
        RedactMode::Code
    };
    let case = Case {
        flags,
        n: usize::from(size),
        seed,
        extra,
        mode,
        command,
        pipeline: Pipeline::with_redactor(HookChain::default(), Arc::clone(&redactor)),
        redactor,
    };
    if form.kind == Kind::Command {
        let judge = Judge {
            runs: Runs::new(&planted, planted.min_run),
            planted: &planted,
            text: &planted.printed,
            patterns: &patterns,
        };
        command_line(&case, &judge, &planted.printed);
        return;
    }
    // A token stands alone on its line, or between words on one (`token ghp_...
    // used`), as tools print them; a key block on lines of its own.
    let inline = flags & 0x10 != 0 && form.kind == Kind::Token;
    let sep = if inline { " " } else { "\n" };
    let secret_at = before.len() + sep.len();
    let text = format!("{before}{sep}{}{sep}{after}", planted.printed);
    let secret_end = secret_at + planted.printed.len();
    let judge = Judge {
        runs: Runs::new(&planted, planted.min_run),
        planted: &planted,
        text: &text,
        patterns: &patterns,
    };
    whole_text(&case, &judge, &text);
    streams(&case, &judge, &text);
    windows(&case, &judge, &text);
    let span = secret_end - secret_at;
    let mut at = secret_at + case.n % (span + 1);
    while !text.is_char_boundary(at) {
        at += 1;
    }
    let mut lookback = 1 + (usize::from(seed) * 37 + case.n) % 2048;
    // A route's source holds the head of a token its window cuts (see `Planted::head`).
    if let Some(head) = planted.head {
        lookback = lookback.max(at.saturating_sub(secret_at + head));
    }
    deep_windows(&case, &judge, &text, at, lookback);
    if extra & 0x20 != 0 && at > secret_at {
        unfinished(&case, &judge, &text, at);
    }
});
