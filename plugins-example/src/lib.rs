//! herd-plugin-example: a transform plugin that makes terminal output agent-friendly.
//!
//! Owns: nothing of herd; it is built against `herd-plugin-abi` alone and is the
//! template plugin authors copy (see README.md).
//!
//! It rewrites output in three steps, each cheap and line-local:
//! 1. strips colour and other terminal escape sequences (CSI, OSC, two-byte ESC);
//! 2. collapses carriage-return progress bars to their final state (a line
//!    redrawn with `\r` keeps only what was drawn last);
//! 3. folds runs of identical lines into one line with a count (`line [x5]`).
//!
//! It returns "unchanged" when none of that applies, so herd skips the copy.

use herd_plugin_abi::HookInput;

/// Output lines equal to their predecessor are folded from this many on.
const FOLD_FROM: usize = 2;

/// The transform herd calls; see the crate docs for what it does.
///
/// # Errors
///
/// Never fails; the signature is the one `export_plugin!` expects.
pub fn transform(input: &HookInput<'_>) -> Result<Option<String>, String> {
    Ok(tidy(input.output.as_str()))
}

/// Applies the three steps; `None` when the text would not change.
pub fn tidy(text: &str) -> Option<String> {
    if !text.contains(['\x1b', '\r']) && !has_repeated_line(text) {
        return None;
    }
    let plain = strip_escapes(text);
    let mut out = String::with_capacity(plain.len());
    let mut run: Option<(&str, usize)> = None;
    let mut lines = plain.split('\n').peekable();
    while let Some(raw) = lines.next() {
        let is_last = lines.peek().is_none();
        if is_last && raw.is_empty() {
            break;
        }
        let line = final_state(raw);
        match &mut run {
            Some((prev, n)) if *prev == line => *n += 1,
            _ => {
                if let Some((prev, n)) = run.take() {
                    push_run(&mut out, prev, n);
                }
                run = Some((line, 1));
            }
        }
    }
    if let Some((prev, n)) = run {
        push_run(&mut out, prev, n);
    }
    if !plain.ends_with('\n') && out.ends_with('\n') {
        out.pop();
    }
    (out != text).then_some(out)
}

fn push_run(out: &mut String, line: &str, n: usize) {
    out.push_str(line);
    if n >= FOLD_FROM {
        out.push_str(&format!(" [x{n}]"));
    }
    out.push('\n');
}

fn has_repeated_line(text: &str) -> bool {
    let mut prev: Option<&str> = None;
    for line in text.lines() {
        if prev == Some(line) {
            return true;
        }
        prev = Some(line);
    }
    false
}

/// What a terminal shows for a line redrawn with `\r`: the last non-empty draw.
/// A trailing `\r` (from `\r\n` line ends) is not a redraw.
fn final_state(line: &str) -> &str {
    let line = line.strip_suffix('\r').unwrap_or(line);
    line.rsplit('\r')
        .find(|part| !part.is_empty())
        .unwrap_or("")
}

/// Removes CSI (`ESC [ ... final`), OSC (`ESC ] ... BEL` or `ESC ] ... ESC \`)
/// and two-byte `ESC x` sequences.
pub fn strip_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                // Parameters and intermediates, up to a final byte in @..~.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
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
            _ => {}
        }
    }
    out
}

herd_plugin_abi::export_plugin! {
    name: "tidy-terminal",
    version: env!("CARGO_PKG_VERSION"),
    init: || Ok(()),
    transform: transform,
}

#[cfg(test)]
mod tests;
