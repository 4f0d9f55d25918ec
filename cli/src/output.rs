//! Writing to stdout and stderr from the binary.
//!
//! Everything the user sees goes through these helpers so that a closed pipe
//! surfaces as an `io::Error` of kind `BrokenPipe` (mapped to a quiet exit by
//! `main`) instead of a panic, and so the `print_stdout` lint stays meaningful.
//!
//! Text a job controls (its command line, its output preview) is shown through
//! [`visible`] or [`visible_lines`] in every human printer. A job could otherwise
//! retitle the user's terminal (`ESC ] 0 ;`), clear it (`ESC [ 2 J`), hide text with
//! backspaces or a lone carriage return, or reorder what the user reads with a bidi
//! override (U+202E), all from a `herd ps`. Those characters are rendered as visible
//! text instead of dropped, so the user can still tell that they were there. The
//! rendering is for eyes, not for parsing: a job that prints a literal `\e` looks
//! the same as one that prints ESC, and `--json` is the exact form.
//! `herd logs` is the deliberate exception: it prints the job's own bytes, but for
//! the questions a job asked its terminal (B7; they reach a log while a terminal
//! was attached), which [`raw`] leaves out on a terminal: that terminal would type
//! its answers into whatever reads it next, the user's shell.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write;

/// Writes `text` and a newline to stdout.
///
/// # Errors
/// The write error, e.g. `BrokenPipe` when the reader went away.
pub(crate) fn line(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.write_all(b"\n")?;
    out.flush()
}

/// Writes `text` to stdout as is; on a terminal, without the terminal queries it
/// holds ([`without_queries`]), also one split across two writes: a possible
/// query's start at the end of `text` is held for the next write (and dropped if
/// none comes: it was an unfinished escape sequence).
///
/// # Errors
/// The write error.
pub(crate) fn raw(text: &str) -> std::io::Result<()> {
    static ON_A_TERMINAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    static HELD: std::sync::Mutex<QueryFilter> = std::sync::Mutex::new(QueryFilter::new());
    let text =
        if *ON_A_TERMINAL.get_or_init(|| std::io::IsTerminal::is_terminal(&std::io::stdout())) {
            let mut held = HELD
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Cow::Owned(held.filter(text).into_owned())
        } else {
            Cow::Borrowed(text)
        };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// [`without_queries`] over a stream written in chunks: a query split between
/// two chunks is left out too.
#[derive(Debug, Default)]
pub(crate) struct QueryFilter {
    /// The start of a possible query that ended the last chunk.
    held: String,
}

impl QueryFilter {
    /// A filter holding nothing.
    pub(crate) const fn new() -> QueryFilter {
        QueryFilter {
            held: String::new(),
        }
    }

    /// The next chunk without the queries it holds, completing the start of one
    /// the last chunk ended with; the start of a possible query that ends it is
    /// held back.
    pub(crate) fn filter<'a>(&mut self, text: &'a str) -> Cow<'a, str> {
        if self.held.is_empty() && !text.contains('\x1b') {
            return Cow::Borrowed(text);
        }
        let mut joined = std::mem::take(&mut self.held);
        joined.push_str(text);
        // ESC is ASCII: where it is, is a character boundary.
        let cut = herd_pty::unfinished_query_at(joined.as_bytes()).unwrap_or(joined.len());
        self.held = joined[cut..].to_owned();
        Cow::Owned(without_queries(&joined[..cut]).into_owned())
    }
}

/// The length of the terminal query `text` starts with, if it starts with one
/// (B7; the one list is herd-pty's [`herd_pty::match_query`]).
pub(crate) fn query_len(text: &str) -> Option<usize> {
    match herd_pty::match_query(text.as_bytes(), false) {
        herd_pty::QueryMatch::Query(_, len) => Some(len),
        herd_pty::QueryMatch::Prefix | herd_pty::QueryMatch::NoMatch => None,
    }
}

/// `text` without the terminal queries it holds.
pub(crate) fn without_queries(text: &str) -> Cow<'_, str> {
    if !text.contains('\x1b') {
        return Cow::Borrowed(text);
    }
    let mut kept = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\x1b') {
        kept.push_str(&rest[..at]);
        rest = &rest[at..];
        let skip = query_len(rest).unwrap_or_else(|| {
            kept.push('\x1b');
            1
        });
        rest = &rest[skip..];
    }
    kept.push_str(rest);
    Cow::Owned(kept)
}

/// Writes `value` (a `Value` or a typed answer) as one line of compact JSON.
///
/// # Errors
/// The write error, or a value that does not serialise (none of herd's do).
pub(crate) fn json_line<T: serde::Serialize + ?Sized>(value: &T) -> std::io::Result<()> {
    line(&serde_json::to_string(value).map_err(std::io::Error::other)?)
}

/// Writes `value` (a `Value` or a typed answer) as pretty JSON.
///
/// # Errors
/// The write error, or a value that does not serialise (none of herd's do).
pub(crate) fn json_pretty<T: serde::Serialize + ?Sized>(value: &T) -> std::io::Result<()> {
    line(&serde_json::to_string_pretty(value).map_err(std::io::Error::other)?)
}

/// Writes `text` and a newline to stderr; errors are ignored (nowhere left to report them).
/// Asks `question` on stderr and reads one line from stdin: true for `y` or `yes`.
///
/// # Errors
/// A stdin that cannot be read.
pub(crate) fn confirm(question: &str) -> std::io::Result<bool> {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    write!(err, "{question}")?;
    err.flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

pub(crate) fn err_line(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.write_all(b"\n");
}

/// `text` for a one-line field, with every character that would act on a
/// terminal instead of showing on it rendered visibly.
///
/// ESC becomes `\e`, other C0 controls and DEL caret notation (`^G`, `^M`, `^?`),
/// and C1 controls, invisible format characters (bidi embeddings, overrides and
/// isolates, LRM/RLM, zero-width spaces and joiners, tag characters) and the line
/// and paragraph separators `<U+XXXX>`. Newline and tab are rendered too, because
/// a field is one line. Borrows `text` when nothing needs rendering.
pub(crate) fn visible(text: &str) -> Cow<'_, str> {
    render(text, Layout::Line)
}

/// Like [`visible`], for a multi-line block such as an output preview: newline,
/// tab and a carriage return right before a newline are kept as they are.
///
/// A carriage return anywhere else is rendered (`^M`), since it would let the
/// rest of its line overwrite what came before it.
pub(crate) fn visible_lines(text: &str) -> Cow<'_, str> {
    render(text, Layout::Lines)
}

/// Which whitespace controls a rendering keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Line,
    Lines,
}

fn render(text: &str, layout: Layout) -> Cow<'_, str> {
    let mut rendered: Option<String> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((idx, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        if is_shown_as_is(c, next, layout) {
            if let Some(out) = &mut rendered {
                out.push(c);
            }
            continue;
        }
        let out = rendered.get_or_insert_with(|| {
            let mut out = String::with_capacity(text.len() + 16);
            out.push_str(&text[..idx]);
            out
        });
        push_visible(out, c);
    }
    rendered.map_or(Cow::Borrowed(text), Cow::Owned)
}

/// Whether `c` (followed by `next`) is safe to write to a terminal unchanged.
fn is_shown_as_is(c: char, next: Option<char>, layout: Layout) -> bool {
    match c {
        '\n' | '\t' => layout == Layout::Lines,
        '\r' => layout == Layout::Lines && next == Some('\n'),
        // Cc: C0, DEL and C1.
        c if c.is_control() => false,
        c => !is_invisible_format(c),
    }
}

/// Appends the visible form of a character that `is_shown_as_is` refused.
fn push_visible(out: &mut String, c: char) {
    match c {
        '\u{1b}' => out.push_str("\\e"),
        '\0'..='\u{1f}' => {
            out.push('^');
            out.push(char::from(c as u8 + 0x40));
        }
        '\u{7f}' => out.push_str("^?"),
        c => {
            // Writing to a String cannot fail.
            let _ = write!(out, "<U+{:04X}>", u32::from(c));
        }
    }
}

/// Unicode's format characters (general category Cf, Unicode 15.1) plus the line
/// and paragraph separators: they draw nothing themselves and change how the text
/// around them is shown (direction, joining, line breaks), so a job could use them
/// to make text read differently from what it is.
fn is_invisible_format(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x2028..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

#[cfg(test)]
mod tests;
