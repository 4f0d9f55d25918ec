//! herd-plugin-example: a transform plugin that makes terminal output agent-friendly.
//!
//! Owns: nothing of herd; it is built against `herd-plugin-abi` alone and is the
//! template plugin authors copy (see README.md).
//!
//! A build or an install run under a PTY prints for a person: colours, spinners,
//! progress bars redrawn in place, one status line per crate or package. An agent
//! reading the log pays for every byte of that. This plugin rewrites output line by
//! line, in one pass, so it reads like the screen looked at the end and costs far
//! fewer tokens:
//!
//! 1. **Renders each line as a terminal would show it.** Escape sequences are
//!    interpreted, not only removed: `\r`, backspace, cursor-to-column (`ESC [ n G`,
//!    npm's spinner) and erase-in-line (`ESC [ K`, cargo's progress bar) move and
//!    clear within the line, so a line redrawn many times keeps only what was left
//!    on screen. Colours, OSC titles and links, and other sequences are dropped.
//! 2. **Drops pure progress lines** still on screen: spinner glyphs alone, bars
//!    of block glyphs (`━━━━╸`, `░░░░`), and bracketed bars beside a number
//!    (`Building [===>    ] 12/40: syn`).
//! 3. **Folds identical lines** into one with a count (`line [x5]`), and blank
//!    runs into one blank line.
//! 4. **Folds runs of similar status lines** (3 or more consecutive distinct lines
//!    with the same lead, such as `Compiling x v1.2` or `npm http fetch GET 200
//!    <url>`) into one summary line naming what they were about, followed by the
//!    run's last line as it was:
//!    `   Compiling [15 lines folded: proc-macro2, quote, syn, +12 more]`.
//!
//! Invariant: a line whose visible text contains `error` or `warning` (any case)
//! is kept, verbatim as rendered, once for every time it was shown; it is never
//! folded or dropped. A diagnostic that starts with such a line (`error[E0308]:
//! mismatched types`, `warning: unused variable`) is kept whole through the blank
//! line that ends it, with its `-->` location, code snippet and notes, unless a
//! cargo status line (`   Compiling x`) shows it ended earlier; a block without
//! an end stops after `MAX_BLOCK_LINES` lines.
//!
//! Lines that look like trouble without saying `error` or `warning` (`npm warn`,
//! `npm ERR!`, `FAILED`, `panicked`, `Traceback`, `cannot`, ...) are never folded
//! into a summary either, only counted when repeated.
//!
//! Caveats: every rule looks at one line (and for folding, its neighbours), so the
//! cost is linear in the output. Cursor movement to other lines (full-screen
//! programs, multi-line progress displays) is not followed; those lines are
//! rendered one by one.
//!
//! It returns "unchanged" when none of that changes the text.

use std::borrow::Cow;

use herd_plugin_abi::HookInput;

/// Identical consecutive lines are folded into one from this many on.
const FOLD_FROM: usize = 2;

/// Consecutive distinct lines with the same lead are summarised from this many on.
const RUN_FROM: usize = 3;

/// How many names a run summary lists before `+N more`.
const RUN_NAMES: usize = 8;

/// A diagnostic block ends at a blank line, a cargo status line or after this
/// many lines, whichever comes first: a header with nothing after it (cargo's last
/// `error: could not compile ...`) must not keep everything that follows verbatim.
const MAX_BLOCK_LINES: usize = 64;

/// Cursor moves stop at this column (past the drawn text), as a terminal stops at
/// its width.
const MAX_COLUMN: usize = 1024;

/// Lines longer than this (in characters) are content, not status: never summarised.
const RUN_MAX_CHARS: usize = 200;

/// The transform herd calls; see the crate docs for what it does.
///
/// # Errors
///
/// Never fails; the signature is the one `export_plugin!` expects.
pub fn transform(input: &HookInput<'_>) -> Result<Option<String>, String> {
    Ok(tidy(input.output.as_str()))
}

/// Applies every step; `None` when the text would not change.
pub fn tidy(text: &str) -> Option<String> {
    let out = tidy_text(text);
    (out != text).then_some(out)
}

/// Applies every step and returns the result, changed or not.
fn tidy_text(text: &str) -> String {
    let ends_with_newline = text.ends_with('\n');
    let body = text.strip_suffix('\n').unwrap_or(text);
    let mut lines = Lines::default();
    if !text.is_empty() {
        for raw in body.split('\n') {
            lines.push(visible_line(raw));
        }
    }
    lines.finish(ends_with_newline)
}

/// What a line is, for deciding what to do with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Blank,
    /// A spinner or progress bar left on screen: dropped.
    Progress,
    /// Says `error` or `warning`: kept verbatim. `opens_block` when it heads a
    /// diagnostic whose following lines are kept verbatim too.
    Alarm {
        opens_block: bool,
    },
    /// Looks like trouble in other words: folded only when repeated.
    Notable {
        opens_block: bool,
    },
    Plain,
}

/// The output being built, with the lines not yet written because they may fold.
#[derive(Debug, Default)]
struct Lines<'a> {
    out: String,
    /// Consecutive foldable lines, each with how many times it repeated.
    pending: Vec<(Cow<'a, str>, usize)>,
    /// Whether the last line written (or pending) is blank.
    last_blank: bool,
    /// How many more lines the open diagnostic block may take; 0 when none is open.
    n_block_left: usize,
}

impl<'a> Lines<'a> {
    /// Takes one rendered line.
    fn push(&mut self, line: Cow<'a, str>) {
        let kind = classify(&line);
        if self.n_block_left > 0 {
            self.n_block_left -= 1;
            match kind {
                Kind::Blank => {
                    self.n_block_left = 0;
                    self.verbatim(&line);
                    return;
                }
                _ if is_cargo_status(&line) => self.n_block_left = 0,
                Kind::Alarm { opens_block: true } | Kind::Notable { opens_block: true } => {}
                _ => {
                    self.verbatim(&line);
                    return;
                }
            }
        }
        match kind {
            Kind::Blank => {
                if !self.last_blank {
                    self.flush();
                    self.out.push('\n');
                    self.last_blank = true;
                }
            }
            Kind::Progress => {}
            Kind::Alarm { opens_block } | Kind::Notable { opens_block } if opens_block => {
                self.verbatim(&line);
                self.n_block_left = MAX_BLOCK_LINES;
            }
            Kind::Alarm { .. } => self.verbatim(&line),
            Kind::Notable { .. } | Kind::Plain => self.foldable(trim_end_cow(line)),
        }
    }

    /// Writes a line exactly as it is, after whatever was pending.
    fn verbatim(&mut self, line: &str) {
        self.flush();
        self.out.push_str(line);
        self.out.push('\n');
        self.last_blank = line.is_empty();
    }

    fn foldable(&mut self, line: Cow<'a, str>) {
        self.last_blank = false;
        match self.pending.last_mut() {
            Some((prev, n)) if *prev == line => *n += 1,
            _ => {
                let continues_run = self.pending.last().is_some_and(|(prev, _)| {
                    run_key(prev).is_some_and(|k| Some(k) == run_key(&line))
                });
                if !continues_run {
                    self.flush();
                }
                self.pending.push((line, 1));
            }
        }
    }

    /// Writes the pending lines: one summary for a run, else line by line.
    fn flush(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        if pending.len() >= RUN_FROM
            && let Some((last, rest)) = pending.split_last()
        {
            push_summary(&mut self.out, rest);
            push_counted(&mut self.out, &last.0, last.1);
            return;
        }
        for (line, n) in &pending {
            push_counted(&mut self.out, line, *n);
        }
    }

    fn finish(mut self, ends_with_newline: bool) -> String {
        self.flush();
        if !ends_with_newline && self.out.ends_with('\n') {
            self.out.pop();
        }
        self.out
    }
}

fn push_counted(out: &mut String, line: &str, n: usize) {
    out.push_str(line);
    if n >= FOLD_FROM {
        out.push_str(&format!(" [x{n}]"));
    }
    out.push('\n');
}

/// One line standing for `run`: the words every line starts with, how many lines
/// there were and the first word after that lead in each (a URL by its last part).
fn push_summary(out: &mut String, run: &[(Cow<'_, str>, usize)]) {
    let Some((first, _)) = run.first() else {
        return;
    };
    let indent = &first[..first.len() - first.trim_start().len()];
    let mut lead: Vec<&str> = first.split_whitespace().collect();
    for (line, _) in run {
        let n_same = lead
            .iter()
            .zip(line.split_whitespace())
            .take_while(|(a, b)| *a == b)
            .count();
        lead.truncate(n_same);
    }
    let mut names: Vec<&str> = Vec::new();
    for (line, _) in run {
        if let Some(name) = line.split_whitespace().nth(lead.len()).map(short_name)
            && !name.is_empty()
            && !names.contains(&name)
        {
            names.push(name);
        }
    }
    let n_lines: usize = run.iter().map(|(_, n)| n).sum();
    out.push_str(indent);
    out.push_str(&lead.join(" "));
    out.push_str(&format!(" [{n_lines} lines folded"));
    for (idx, name) in names.iter().take(RUN_NAMES).enumerate() {
        out.push_str(if idx == 0 { ": " } else { ", " });
        out.push_str(name);
    }
    if names.len() > RUN_NAMES {
        out.push_str(&format!(", +{} more", names.len() - RUN_NAMES));
    }
    out.push_str("]\n");
}

/// A word as a name: a path or URL by its last non-empty part, without trailing
/// punctuation.
fn short_name(word: &str) -> &str {
    let word = word.trim_end_matches([',', ';', ':', '.']);
    if word.contains('/') {
        word.rsplit('/')
            .find(|part| !part.is_empty())
            .unwrap_or(word)
    } else {
        word
    }
}

/// The lead lines must share to be summarised together: the indentation and the
/// first word, which must start with a letter. A lower-case first word (a tool's
/// name, as in `npm http fetch`) takes up to two more lower-case words with it.
/// `None` for lines that are never summarised.
fn run_key(line: &str) -> Option<(&str, &str)> {
    if line.chars().count() > RUN_MAX_CHARS || is_notable(&line.to_ascii_lowercase()) {
        return None;
    }
    let body = line.trim_start();
    let indent = &line[..line.len() - body.len()];
    let mut words = body.split(' ');
    let first = words.next()?;
    if !first.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let is_lower_word = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase());
    let mut end = first.len();
    if is_lower_word(first) {
        for word in words.take(2) {
            if !is_lower_word(word) {
                break;
            }
            end += 1 + word.len();
        }
    }
    Some((indent, &body[..end]))
}

fn classify(line: &str) -> Kind {
    if line.trim().is_empty() {
        return Kind::Blank;
    }
    let lower = line.to_ascii_lowercase();
    if is_alarm(&lower) {
        return Kind::Alarm {
            opens_block: opens_block(&lower),
        };
    }
    // Before the trouble words: a bar's label (npm's `rollbackFailedOptional`)
    // is not trouble.
    if is_progress(line) {
        return Kind::Progress;
    }
    if is_notable(&lower) {
        return Kind::Notable {
            opens_block: opens_block(&lower),
        };
    }
    Kind::Plain
}

/// The words the crate-level invariant protects (`lower` is lower-cased).
fn is_alarm(lower: &str) -> bool {
    lower.contains("error") || lower.contains("warning")
}

/// Words that mark trouble without `error` or `warning` (`lower` is lower-cased).
fn is_notable(lower: &str) -> bool {
    const WORDS: &[&str] = &[
        "warn",
        "err!",
        "fail",
        "fatal",
        "panic",
        "exception",
        "traceback",
        "abort",
        "denied",
        "deprecat",
        "cannot",
        "can't",
        "could not",
        "unable",
        "not found",
        "invalid",
        "conflict",
        "vulnerab",
    ];
    WORDS.iter().any(|w| lower.contains(w))
}

/// Whether a trouble line heads a diagnostic: it starts with the level word
/// (`error[E0308]: ...`, `warning: ...`, `Traceback ...`) or names it after a
/// colon (`main.c:3:5: error: ...`).
fn opens_block(lower: &str) -> bool {
    const LEVELS: &[&str] = &[
        "error",
        "warning",
        "fatal",
        "panic",
        "traceback",
        "failed",
        "failure",
        "exception",
    ];
    let body = lower.trim_start();
    LEVELS.iter().any(|level| {
        body.starts_with(level)
            || lower.contains(&format!(": {level}"))
            || lower.contains(&format!(" {level}:"))
    })
}

/// A line cargo prints between diagnostics: a capitalised verb right-aligned to
/// 12 columns (`   Compiling x`, `    Finished ...`).
fn is_cargo_status(line: &str) -> bool {
    let body = line.trim_start_matches(' ');
    let n_indent = line.len() - body.len();
    let verb = body.split(' ').next().unwrap_or("");
    n_indent > 0
        && n_indent + verb.len() == 12
        && body.len() > verb.len()
        && verb.starts_with(|c: char| c.is_ascii_uppercase())
        && verb.bytes().all(|b| b.is_ascii_alphabetic())
}

/// Spinner glyphs alone, a bar of block glyphs (`━━━━━━━━╸ 1.2/3.4 MB`,
/// `⸨░░░░░░⸩ ⠙ idealTree`), or a bracketed bar beside a number
/// (`[=====>   ] 12/40`).
fn is_progress(line: &str) -> bool {
    let is_spinner = |c: char| ('\u{2800}'..='\u{28ff}').contains(&c);
    line.chars().all(|c| c.is_whitespace() || is_spinner(c))
        || has_glyph_bar(line)
        || (line.bytes().any(|b| b.is_ascii_digit()) && has_bracket_bar(line))
}

/// `[` then at least 5 of ` =>#-.*~` then `]`.
fn has_bracket_bar(line: &str) -> bool {
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        rest = &rest[open + 1..];
        let inner_len = rest.bytes().take_while(|b| b" =>#-.*~".contains(b)).count();
        if inner_len >= 5 && rest[inner_len..].starts_with(']') {
            return true;
        }
    }
    false
}

/// At least 4 consecutive bar glyphs (block elements, heavy lines).
fn has_glyph_bar(line: &str) -> bool {
    let is_bar = |c: char| matches!(c, '\u{2580}'..='\u{259f}' | '━' | '╸' | '╺' | '■' | '□');
    let mut n_run = 0;
    for c in line.chars() {
        n_run = if is_bar(c) { n_run + 1 } else { 0 };
        if n_run >= 4 {
            return true;
        }
    }
    false
}

fn trim_end_cow(line: Cow<'_, str>) -> Cow<'_, str> {
    match line {
        Cow::Borrowed(s) => Cow::Borrowed(s.trim_end()),
        Cow::Owned(s) if s.trim_end().len() == s.len() => Cow::Owned(s),
        Cow::Owned(s) => Cow::Owned(s.trim_end().to_owned()),
    }
}

/// What a terminal shows for one line (the text between two `\n`) once every
/// byte of it has been drawn: `\r`, backspace, `ESC [ n G` (to column n) and
/// `ESC [ n C`/`D` (right, left) move the cursor; `ESC [ K` (0, 1 or 2) erases;
/// printable characters overwrite what is under the cursor. Other escape
/// sequences (colours, OSC titles and links, charset selection) and control
/// characters show nothing. Borrows when the line has nothing to interpret.
pub fn visible_line(raw: &str) -> Cow<'_, str> {
    if !raw.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Cow::Borrowed(raw);
    }
    let mut cells: Vec<char> = Vec::with_capacity(raw.len());
    let mut cursor = 0usize;
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => cursor = 0,
            '\x08' => cursor = cursor.saturating_sub(1),
            '\x1b' => match chars.next() {
                Some('[') => {
                    let mut params = String::new();
                    let mut last = None;
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            last = Some(c);
                            break;
                        }
                        params.push(c);
                    }
                    // The first parameter; too many digits saturate.
                    let n = params
                        .bytes()
                        .take_while(u8::is_ascii_digit)
                        .fold(0usize, |n, d| {
                            n.saturating_mul(10).saturating_add(usize::from(d - b'0'))
                        });
                    match last {
                        Some('G') => cursor = (n.max(1) - 1).min(max_column(&cells)),
                        Some('C') => {
                            cursor = cursor.saturating_add(n.max(1)).min(max_column(&cells));
                        }
                        Some('D') => cursor = cursor.saturating_sub(n.max(1)),
                        Some('K') if !params.starts_with('?') => match n {
                            0 => cells.truncate(cursor),
                            1 => {
                                for cell in cells.iter_mut().take(cursor + 1) {
                                    *cell = ' ';
                                }
                            }
                            _ => cells.clear(),
                        },
                        _ => {}
                    }
                }
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    // A string up to BEL or ST (`ESC \`): OSC titles and links, DCS.
                    while let Some(c) = chars.next() {
                        if c == '\x07' {
                            break;
                        }
                        if c == '\x1b' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                Some('(' | ')' | '*' | '+' | '#' | '%') => {
                    // Charset and line-size selection carry one more byte.
                    chars.next();
                }
                _ => {}
            },
            c if c.is_control() && c != '\t' => {}
            c => {
                if cursor < cells.len() {
                    cells[cursor] = c;
                } else {
                    cells.resize(cursor, ' ');
                    cells.push(c);
                }
                cursor += 1;
            }
        }
    }
    Cow::Owned(cells.into_iter().collect())
}

/// How far right a cursor move may go: the drawn text or [`MAX_COLUMN`], whichever
/// is wider. A terminal stops at its last column; without a bound, `ESC [ 999999999 C`
/// would make us allocate that many cells.
fn max_column(cells: &[char]) -> usize {
    cells.len().max(MAX_COLUMN)
}

herd_plugin_abi::export_plugin! {
    name: "tidy-terminal",
    version: env!("CARGO_PKG_VERSION"),
    init: || Ok(()),
    transform: transform,
}

#[cfg(test)]
mod tests;
