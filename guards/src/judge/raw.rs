//! Text before the parser, and instead of it: NUL and CRLF cleaning, the guard against
//! the grammar's brace-scan crash, the structural-byte budget, the regions a parse could
//! not read, and the fail-safe verb scan (does the text name a kill or lifecycle verb?).

use std::ops::ControlFlow;
use std::time::Instant;

use tree_sitter::Node;

use crate::host::Host;
use crate::shell::{self, text};

/// NUL bytes removed and CRLF line ends made plain.
pub(super) fn clean(text: &str) -> std::borrow::Cow<'_, str> {
    let text = if text.contains(['\0', '\r']) {
        std::borrow::Cow::Owned(text.replace('\0', "").replace("\r\n", "\n"))
    } else {
        std::borrow::Cow::Borrowed(text)
    };
    defuse_brace_scan(text)
}

/// Replaces a non-ASCII character right after `{` or `.` with as many `x` bytes.
///
/// tree-sitter-bash 0.25's external scanner reads a brace expansion (`{1..5}`) with C's
/// `isdigit` on the raw code point after `{` and after `..`; a code point above 255 is
/// undefined behaviour there and crashes the process (`echo {\u{10FFFF}` did, daemon
/// included). Same-length ASCII keeps every byte offset, so node text still lines up.
fn defuse_brace_scan(text: std::borrow::Cow<'_, str>) -> std::borrow::Cow<'_, str> {
    let risky = |prev: Option<char>, c: char| !c.is_ascii() && matches!(prev, Some('{' | '.'));
    let mut prev = None;
    let needs = text.chars().any(|c| {
        let hit = risky(prev, c);
        prev = Some(c);
        hit
    });
    if !needs {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    let mut prev = None;
    for c in text.chars() {
        if risky(prev, c) {
            out.extend(std::iter::repeat_n('x', c.len_utf8()));
        } else {
            out.push(c);
        }
        prev = Some(c);
    }
    std::borrow::Cow::Owned(out)
}

/// Counts the bytes that make parser nodes: operators, redirections, separators,
/// quotes, brackets.
pub(super) fn structural_bytes(text: &str) -> usize {
    text.bytes()
        .filter(|b| {
            matches!(
                b,
                b'|' | b';' | b'&' | b'"' | b'\'' | b'`' | b'(' | b')' | b'<' | b'>' | b'\n'
            )
        })
        .count()
}

/// The text of the regions the parser could not read (error nodes, and the parents of
/// nodes it had to invent), joined by newlines.
pub(super) fn error_regions(root: Node<'_>, src: &str, deadline: Instant) -> String {
    let mut regions = String::new();
    let _ = shell::for_each_node(root, deadline, |node| {
        let region = if node.is_error() {
            Some(node)
        } else if node.is_missing() {
            node.parent()
        } else {
            None
        };
        if let Some(region) = region {
            regions.push_str(text(region, src));
            regions.push('\n');
        }
        ControlFlow::<()>::Continue(())
    });
    regions
}

const KILL_VERBS: [&str; 9] = [
    "kill",
    "pkill",
    "killall",
    "killall5",
    "taskkill",
    "skill",
    "stop-process",
    "spps",
    "tskill",
];
const MACHINE_VERBS: [&str; 4] = ["shutdown", "reboot", "poweroff", "halt"];
const LIFECYCLE_VERBS: [&str; 10] = [
    "stop",
    "restart",
    "bootout",
    "kickstart",
    "unload",
    "remove",
    "disable",
    "try-restart",
    "force-reload",
    "kill",
];
const MANAGERS: [&str; 6] = [
    "systemctl",
    "launchctl",
    "service",
    "rc-service",
    "sv",
    "supervisorctl",
];

/// The kill or lifecycle verb `text` contains, if any (quotes and escapes ignored).
pub(super) fn verb_in(text: &str, host: &Host) -> Option<String> {
    let squashed: String = text
        .chars()
        .filter(|c| !matches!(c, '\'' | '"' | '\\' | '\0'))
        .collect();
    let lower = squashed.to_lowercase();
    let tokens: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')))
        .map(|t| t.rsplit('/').next().unwrap_or(t))
        .filter(|t| !t.is_empty())
        .collect();
    if let Some(verb) = tokens
        .iter()
        .find(|t| KILL_VERBS.contains(t) || MACHINE_VERBS.contains(t))
    {
        return Some((*verb).to_owned());
    }
    let lifecycle = tokens
        .iter()
        .find(|t| LIFECYCLE_VERBS.contains(t) || *t == &"shutdown")?;
    let manager = tokens.iter().any(|t| {
        MANAGERS.contains(t)
            || host.images().iter().any(|i| i == t)
            || host.units().iter().any(|u| u == t)
    });
    manager.then(|| (*lifecycle).to_owned())
}
