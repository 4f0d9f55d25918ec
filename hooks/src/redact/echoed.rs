//! Command lines echoed in output, read as command lines: a shell's trace (`set
//! -x`: `+ mysql -pPASS`, `++ curl -u user:pass …`) and a command shown after a
//! shell's prompt. An interactive shell in a PTY echoes each command it is sent
//! after its prompt (`root@web:~# mysql -pPASS`, `[deploy@web app]$ …`,
//! `bash-5.2# …`), and CI
//! logs print each script line after one (`$ docker login -u bob -p PASS …`).
//! The command's secrets are the ones the command-line reader (`command`) finds
//! in a session's own command: a client's password option (`-pPASS`, `-p PASS`,
//! `-u user:pass`), which no output family can tell from any other option.
//!
//! Found without a pass of its own: traced lines and bracketed prompts from rare
//! literals (`rare`: `\n+ ` and `\n++`; `]$ ` and `]# `, a prompt's end, its
//! start checked back to the line's start), and prompts that are a line's first
//! word (`user@host:/srv/app$ `, `(venv) user@host:~$ `, `bash-5.2# `, `$ `)
//! from the `.pgpass` family's walk over lines (`providers::file_line_matches`),
//! which stops at each line's first space. `# ` alone is a comment far more often
//! than a prompt (`# Using the --password option`) and is not read.
//!
//! Not found: a prompt of another shape (zsh's `%`, a theme's `❯`, a git branch
//! after the directory), one printed mid-line (after output with no newline at
//! its end, or redrawn after a `\r`), a command continued on the next line, or a
//! command a terminal echoed while the shell was busy (no prompt before it).

use super::Kind;
use super::rare::{Rare, RareHits};

/// How far before its end a bracketed prompt may start.
const MAX_PROMPT_BYTES: usize = 256;

/// The secrets of the command lines echoed in `text` ([`self`]): each span of a
/// command's value the command-line reader would mask, pushed to `found`.
/// `prompted` holds each line whose first word ends in `$` or `#`: its start and
/// the space after that word.
pub(super) fn echoed_matches(
    text: &str,
    rare: &RareHits,
    prompted: &[(usize, usize)],
    found: &mut Vec<(usize, usize, Kind)>,
) {
    let bytes = text.as_bytes();
    let traced = std::iter::once(0).chain(rare.of(Rare::Traced).map(|at| at + 1));
    let traced = traced.filter_map(|start| {
        let n_plus = bytes[start..].iter().take_while(|b| **b == b'+').count();
        (n_plus > 0 && bytes.get(start + n_plus) == Some(&b' ')).then_some(start + n_plus + 1)
    });
    let first_word = prompted
        .iter()
        .filter(|(start, space)| {
            bytes[*space] == b' ' && is_prompt(&bytes[*start..*space - 1], bytes[*space - 1])
        })
        .map(|(_, space)| space + 1);
    let bracketed = rare
        .of(Rare::PromptEnd)
        .filter(|end| bracketed_prompt(bytes, *end))
        .map(|end| end + 3);
    for from in traced.chain(first_word).chain(bracketed) {
        command_matches(text, from, found);
    }
}

/// A name in a prompt: a user's or a host's.
fn is_name(b: &u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

/// Whether `who` is `user@host`.
fn is_user_at_host(who: &[u8]) -> bool {
    match who.iter().position(|b| *b == b'@') {
        Some(at) => {
            at > 0
                && at + 1 < who.len()
                && who[..at].iter().all(is_name)
                && who[at + 1..].iter().all(is_name)
        }
        None => false,
    }
}

/// Whether a line's first word, without the `$` or `#` (`end`) that ends it, is
/// a prompt's: nothing (`$ `; `# ` alone is a comment), bash's own without a startup file
/// (`bash-5.2# `, `sh-5.2$ `) or `user@host:` and a directory (Debian's
/// `user@host:~/app$ `, `root@web:/srv# `).
fn is_prompt(word: &[u8], end: u8) -> bool {
    let version = |v: &[u8]| {
        v.first().is_some_and(u8::is_ascii_digit)
            && v.iter().all(|b| b.is_ascii_digit() || *b == b'.')
    };
    if word.is_empty() {
        // `$ …` (CI logs, docs); `# …` alone is a comment far more often.
        return end == b'$';
    }
    if word.strip_prefix(b"bash-").is_some_and(version)
        || word.strip_prefix(b"sh-").is_some_and(version)
    {
        return true;
    }
    match word.iter().position(|b| *b == b':') {
        Some(colon) => {
            is_user_at_host(&word[..colon]) && matches!(word.get(colon + 1), Some(b'~' | b'/'))
        }
        None => false,
    }
}

/// Whether the `]` at `end` closes a bracketed prompt that starts its line
/// (Fedora's `[user@host dir]`).
fn bracketed_prompt(bytes: &[u8], end: usize) -> bool {
    let floor = end.saturating_sub(MAX_PROMPT_BYTES);
    let Some(newline) = bytes[floor..end]
        .iter()
        .rposition(|b| matches!(b, b'\n' | b'\r'))
        .map(|idx| floor + idx + 1)
        .or((floor == 0).then_some(0))
    else {
        return false;
    };
    // The line's first `]` closes the prompt: one command a line is read.
    bytes[newline..end].strip_prefix(b"[").is_some_and(|inner| {
        let who_end = inner.iter().position(|b| *b == b' ').unwrap_or(inner.len());
        is_user_at_host(&inner[..who_end]) && !inner.contains(&b']')
    })
}

/// The secrets of the command that starts at byte `from` of `text` and runs to its
/// line's end.
fn command_matches(text: &str, from: usize, found: &mut Vec<(usize, usize, Kind)>) {
    let bytes = text.as_bytes();
    let Some(rest) = bytes.get(from..) else {
        return;
    };
    let end = memchr::memchr2(b'\n', b'\r', rest).map_or(bytes.len(), |idx| from + idx);
    let Some(line) = text.get(from..end) else {
        return;
    };
    for f in super::command::command_spans(line) {
        let shown = &line[f.start..f.end];
        // The reader's replacement is the part of the word it keeps (`-p`), then
        // the value's mask: the span pushed is the value alone, so the token mask
        // made of it is the reader's (the common prefix runs into the mask's head,
        // which repeats the value's first characters).
        let common = shown
            .bytes()
            .zip(f.with.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        let kept = (0..=common)
            .rev()
            .filter(|k| shown.is_char_boundary(*k) && f.with.is_char_boundary(*k))
            .find(|k| super::mask(&shown[*k..]) == f.with[*k..])
            .unwrap_or(common);
        let at = from + f.start + kept;
        if at < from + f.end {
            found.push((at, from + f.end, Kind::Token));
        }
    }
}

#[cfg(test)]
mod tests;
