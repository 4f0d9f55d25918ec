//! Shell plumbing: parsing with tree-sitter-bash and reading words the way the shell would.
//!
//! The parser is kept in a thread-local: a `tree_sitter::Parser` is not `Sync`, and setting
//! one up per call measured 1-2 µs extra on a 4-6 µs parse of a typical agent command.
//! Every parse carries a deadline, after which tree-sitter is told to give up and the
//! caller treats the text as unparseable. A tree is independent of the parser that
//! built it, so nested parses (`bash -c '…'`, scripts) never need the parser while a tree
//! is being walked.
//!
//! Words are read with quote removal and backslash escapes resolved, so `kick"start"`,
//! `kick'start'` and `kick\start` all read `kickstart`. A part whose value only the running
//! shell knows (`$x`, `$(…)`) keeps its source text and marks the word dynamic; variables
//! assigned literally earlier on the same line are substituted.
//!
//! Invariant: nothing here recurses on the depth of the syntax tree without a bound; deep
//! nesting (`$($($(…)))`) is walked with explicit stacks or cut off at [`MAX_WORD_DEPTH`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::time::Instant;

use tree_sitter::{Node, ParseOptions, ParseState, Parser, Tree};

use crate::host::glob_match;

/// Nesting depth past which a word part is treated as unknown instead of read.
pub(crate) const MAX_WORD_DEPTH: usize = 32;

/// Source text kept for a part whose value is unknown is cut at this many bytes, so deep
/// nesting does not copy the same text once per level.
const MAX_RAW_BYTES: usize = 4096;

/// At most this many alternative values are kept for one word.
const MAX_VALUES: usize = 8;

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

fn new_parser() -> Option<Parser> {
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .ok()?;
    Some(parser)
}

/// Parses `text` as bash, giving up at `deadline`. `None` means tree-sitter could not
/// produce a tree in time (or at all).
pub(crate) fn parse(text: &str, deadline: Instant) -> Option<Tree> {
    let bytes = text.as_bytes();
    let run = |parser: &mut Parser| {
        let mut cancel = |_: &ParseState| {
            if Instant::now() > deadline {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        };
        let options = ParseOptions::new().progress_callback(&mut cancel);
        parser.parse_with_options(
            &mut |offset, _| bytes.get(offset..).unwrap_or_default(),
            None,
            Some(options),
        )
    };
    PARSER
        .try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut slot) => {
                if slot.is_none() {
                    *slot = new_parser();
                }
                let tree = slot.as_mut().and_then(run);
                if tree.is_none() {
                    // A parse cancelled at the deadline leaves the parser mid-parse;
                    // it is dropped rather than reset and reused, so no later text
                    // ever resumes from its state.
                    *slot = None;
                }
                tree
            }
            Err(_) => new_parser().as_mut().and_then(run),
        })
        .ok()
        .flatten()
}

/// Visits `root` and every node below it in source order, without recursion, until
/// `visit` breaks or `deadline` passes (checked every 64 nodes; the caller checks the clock
/// again to tell a finished walk from an abandoned one).
pub(crate) fn for_each_node<'t, B>(
    root: Node<'t>,
    deadline: Instant,
    mut visit: impl FnMut(Node<'t>) -> ControlFlow<B>,
) -> ControlFlow<B> {
    let mut cursor = root.walk();
    let mut n_visited: u32 = 0;
    loop {
        n_visited = n_visited.wrapping_add(1);
        if n_visited.is_multiple_of(64) && Instant::now() > deadline {
            return ControlFlow::Continue(());
        }
        visit(cursor.node())?;
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return ControlFlow::Continue(());
            }
        }
    }
}

/// The source text of `node`.
pub(crate) fn text<'s>(node: Node<'_>, src: &'s str) -> &'s str {
    src.get(node.byte_range()).unwrap_or_default()
}

/// Variables assigned on the line being judged, with their possible literal values.
pub(crate) type Vars = HashMap<String, Vec<String>>;

/// A shell word after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    /// The possible values (at least one). Unknown parts keep their source text.
    pub(crate) values: Vec<String>,
    /// Whether some part is only known at run time.
    pub(crate) dynamic: bool,
    /// The source text of the word, quotes and all.
    pub(crate) raw: String,
}

impl Word {
    /// The first (usually only) value.
    pub(crate) fn value(&self) -> &str {
        self.values.first().map(String::as_str).unwrap_or_default()
    }

    /// A literal word, as if typed unquoted.
    pub(crate) fn literal(value: &str) -> Word {
        Word {
            values: vec![value.to_owned()],
            dynamic: false,
            raw: value.to_owned(),
        }
    }
}

/// Reads `node` as one shell word.
pub(crate) fn word(node: Node<'_>, src: &str, vars: &Vars) -> Word {
    let mut dynamic = false;
    let values = values(node, src, vars, &mut dynamic, 0);
    Word {
        values,
        dynamic,
        raw: capped(text(node, src)).to_owned(),
    }
}

fn values(node: Node<'_>, src: &str, vars: &Vars, dynamic: &mut bool, depth: usize) -> Vec<String> {
    let raw = text(node, src);
    if !matches!(
        node.kind(),
        "word"
            | "number"
            | "raw_string"
            | "ansi_c_string"
            | "string"
            | "translated_string"
            | "concatenation"
    ) {
        let raw = capped(raw);
        return match node.kind() {
            "simple_expansion" | "expansion" => expansion(node, src, raw, vars, dynamic),
            "command_substitution" if depth <= MAX_WORD_DEPTH => {
                match echoed(node, src, vars, depth) {
                    Some(output) => vec![output],
                    None => {
                        *dynamic = true;
                        vec![raw.to_owned()]
                    }
                }
            }
            _ => {
                *dynamic = true;
                vec![raw.to_owned()]
            }
        };
    }
    if depth > MAX_WORD_DEPTH {
        *dynamic = true;
        return vec![capped(raw).to_owned()];
    }
    match node.kind() {
        "word" | "number" => vec![unescape_unquoted(raw)],
        "raw_string" => vec![strip_quotes(raw, "'", "'").to_owned()],
        "ansi_c_string" => vec![unescape_ansi_c(strip_quotes(raw, "$'", "'"))],
        "string" | "translated_string" => {
            let mut out = vec![String::new()];
            let mut cursor = node.walk();
            for child in node.named_children(&mut cursor) {
                let parts = match child.kind() {
                    "string_content" => vec![unescape_double_quoted(text(child, src))],
                    _ => values(child, src, vars, dynamic, depth + 1),
                };
                out = cross(out, &parts);
            }
            out
        }
        "concatenation" => {
            let mut out = vec![String::new()];
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                let parts = values(child, src, vars, dynamic, depth + 1);
                out = cross(out, &parts);
            }
            out
        }
        _ => {
            *dynamic = true;
            vec![capped(raw).to_owned()]
        }
    }
}

/// The output of `$(echo …)` / `$(printf …)` with literal arguments: what an agent uses
/// to splice a command name or a command string together.
fn echoed(node: Node<'_>, src: &str, vars: &Vars, depth: usize) -> Option<String> {
    let mut cursor = node.walk();
    let mut commands = node.named_children(&mut cursor);
    let command = commands.next().filter(|c| c.kind() == "command")?;
    if commands.next().is_some() {
        return None;
    }
    let mut parts = Vec::new();
    let mut inner = command.walk();
    for (idx, child) in command.children(&mut inner).enumerate() {
        let field = u32::try_from(idx)
            .ok()
            .and_then(|i| command.field_name_for_child(i));
        match field {
            Some("name") => {
                if !matches!(text(child, src), "echo" | "printf") {
                    return None;
                }
            }
            Some("argument") => {
                let mut dynamic = false;
                let value = values(child, src, vars, &mut dynamic, depth + 1);
                if dynamic {
                    return None;
                }
                parts.push(value.into_iter().next().unwrap_or_default());
            }
            _ => return None,
        }
    }
    let output = parts.join(" ").replace("\\n", "\n");
    Some(output.trim_end_matches('\n').to_owned())
}

/// The values of `$name`, `${name}` or `${name%pattern}` when the variable is known.
fn expansion(node: Node<'_>, src: &str, raw: &str, vars: &Vars, dynamic: &mut bool) -> Vec<String> {
    let known = match variable(node, src) {
        Some(name) => vars.get(name).filter(|known| !known.is_empty()).cloned(),
        None => trimmed(raw, vars),
    };
    known.unwrap_or_else(|| {
        *dynamic = true;
        vec![raw.to_owned()]
    })
}

/// `raw` cut to at most [`MAX_RAW_BYTES`] at a character boundary.
pub(crate) fn capped(raw: &str) -> &str {
    if raw.len() <= MAX_RAW_BYTES {
        return raw;
    }
    let mut cut = MAX_RAW_BYTES;
    while !raw.is_char_boundary(cut) {
        cut -= 1;
    }
    raw.get(..cut).unwrap_or_default()
}

/// The variable a plain `$name` / `${name}` expansion reads, if that is all it does.
pub(crate) fn variable<'s>(node: Node<'_>, src: &'s str) -> Option<&'s str> {
    let raw = text(node, src);
    let name = raw
        .strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .or_else(|| raw.strip_prefix('$'))?;
    let plain = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    plain.then_some(name)
}

/// `${name%pattern}`, `${name%%pattern}`, `${name#pattern}`, `${name##pattern}` of a
/// known variable.
fn trimmed(raw: &str, vars: &Vars) -> Option<Vec<String>> {
    let inner = raw.strip_prefix("${")?.strip_suffix('}')?;
    let name_end = inner.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
    let (name, rest) = inner.split_at(name_end);
    let known = vars.get(name)?;
    let (op, pattern) = ["%%", "##", "%", "#"]
        .iter()
        .find_map(|op| rest.strip_prefix(op).map(|pattern| (*op, pattern)))?;
    let trim = |value: &str| -> String {
        let cuts: Vec<usize> = (0..=value.len())
            .filter(|i| value.is_char_boundary(*i))
            .collect();
        let suffix_cut = |i: &&usize| value.get(**i..).is_some_and(|s| glob_match(pattern, s));
        let prefix_cut = |i: &&usize| value.get(..**i).is_some_and(|s| glob_match(pattern, s));
        let found = match op {
            "%%" => cuts.iter().find(suffix_cut).and_then(|i| value.get(..*i)),
            "%" => cuts
                .iter()
                .rev()
                .find(suffix_cut)
                .and_then(|i| value.get(..*i)),
            "##" => cuts
                .iter()
                .rev()
                .find(prefix_cut)
                .and_then(|i| value.get(*i..)),
            _ => cuts.iter().find(prefix_cut).and_then(|i| value.get(*i..)),
        };
        found.unwrap_or(value).to_owned()
    };
    Some(known.iter().map(|v| trim(v)).collect())
}

fn cross(prefixes: Vec<String>, parts: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(prefixes.len().min(MAX_VALUES));
    for prefix in &prefixes {
        for part in parts {
            if out.len() >= MAX_VALUES {
                return out;
            }
            out.push(format!("{prefix}{part}"));
        }
    }
    if out.is_empty() { prefixes } else { out }
}

fn strip_quotes<'s>(raw: &'s str, open: &str, close: &str) -> &'s str {
    let inner = raw.strip_prefix(open).unwrap_or(raw);
    inner.strip_suffix(close).unwrap_or(inner)
}

/// Unquoted text: a backslash quotes the next character; backslash-newline vanishes.
pub(crate) fn unescape_unquoted(raw: &str) -> String {
    if !raw.contains('\\') {
        return raw.to_owned();
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') | None => {}
                Some(next) => out.push(next),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Double-quoted text: a backslash only quotes `$`, `` ` ``, `"`, `\` and newline.
fn unescape_double_quoted(raw: &str) -> String {
    if !raw.contains('\\') {
        return raw.to_owned();
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('\n') => {
                    chars.next();
                }
                Some(&next @ ('$' | '`' | '"' | '\\')) => {
                    out.push(next);
                    chars.next();
                }
                _ => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `$'…'` text: the common C escapes.
fn unescape_ansi_c(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('x') => {
                let mut code = 0u32;
                let mut n_digits = 0;
                while n_digits < 2 {
                    match chars.peek().and_then(|d| d.to_digit(16)) {
                        Some(d) => {
                            code = code * 16 + d;
                            chars.next();
                            n_digits += 1;
                        }
                        None => break,
                    }
                }
                if let Some(decoded) = char::from_u32(code) {
                    out.push(decoded);
                }
            }
            Some(d @ '0'..='7') => {
                let mut code = d.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            code = code * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                if let Some(decoded) = char::from_u32(code) {
                    out.push(decoded);
                }
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// Reads a command's name and arguments, with redirects left out.
pub(crate) fn command_words(node: Node<'_>, src: &str, vars: &Vars) -> Vec<Word> {
    let mut words = Vec::new();
    let mut cursor = node.walk();
    for (idx, child) in node.children(&mut cursor).enumerate() {
        let field = u32::try_from(idx)
            .ok()
            .and_then(|i| node.field_name_for_child(i));
        match field {
            Some("name") => {
                let inner = child.named_child(0).unwrap_or(child);
                words.push(word(inner, src, vars));
            }
            Some("argument") => words.push(word(child, src, vars)),
            _ => {}
        }
    }
    words
}

#[cfg(test)]
mod tests;
