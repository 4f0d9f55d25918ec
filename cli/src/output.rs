//! Writing to stdout and stderr from the binary.
//!
//! Everything the user sees goes through these helpers so that a closed pipe
//! surfaces as an `io::Error` of kind `BrokenPipe` (mapped to a quiet exit by
//! `main`) instead of a panic, and so the `print_stdout` lint stays meaningful.

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

/// Writes `text` to stdout as is.
///
/// # Errors
/// The write error.
pub(crate) fn raw(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Writes `value` as one line of compact JSON.
///
/// # Errors
/// The write error.
pub(crate) fn json_line(value: &serde_json::Value) -> std::io::Result<()> {
    line(&value.to_string())
}

/// Writes `value` as pretty JSON.
///
/// # Errors
/// The write error.
pub(crate) fn json_pretty(value: &serde_json::Value) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    line(&text)
}

/// Writes `text` and a newline to stderr; errors are ignored (nowhere left to report them).
pub(crate) fn err_line(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.write_all(b"\n");
}
