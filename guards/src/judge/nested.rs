//! Text that comes from elsewhere: referenced scripts (read through the
//! `ScriptReader`, or written by this very command line with `cat > x.sh <<EOF`),
//! interpreter code (`python -c`, `node -e`: its string literals are judged as shell
//! text) and PowerShell's `-Command`, `-EncodedCommand` and `-File`.

use std::collections::HashMap;
use std::ops::ControlFlow;

use tree_sitter::Node;

use super::raw::verb_in;
use super::wrappers::{Runner, is_code_interpreter};
use super::{Flow, Judge, MAX_CODE_LITERALS, MAX_DEPTH, MAX_LITERALS, Scope, stop};
use crate::rules::command_name;
use crate::script::Script;
use crate::shell::{self, Vars, Word, text};
use crate::verdict::Rule;

impl Judge<'_> {
    /// `python -c CODE`, `node -e CODE`, `python script.py`, `perl -e CODE`.
    pub(super) fn interpreter(&mut self, args: &[Word], scope: &Scope<'_>, depth: usize) -> Flow {
        let mut idx = 0;
        while let Some(word) = args.get(idx) {
            let arg = word.value();
            idx += 1;
            match arg {
                "-c" | "-e" | "-E" | "--eval" | "-p" | "--print" | "-r" => {
                    if let Some(code) = args.get(idx) {
                        return self.code(code.value(), depth + 1);
                    }
                    return ControlFlow::Continue(());
                }
                "-m" => return ControlFlow::Continue(()),
                "-W" | "-X" | "-I" | "--require" => idx += 1,
                _ if arg.starts_with('-') => {}
                path => return self.script_as(path, scope, depth + 1, Some(Runner::Code)),
            }
        }
        ControlFlow::Continue(())
    }

    /// PowerShell: `-Command …`, `-EncodedCommand …`, `-File x.ps1`.
    pub(super) fn powershell(&mut self, args: &[Word], depth: usize) -> Flow {
        let mut idx = 0;
        while let Some(word) = args.get(idx) {
            idx += 1;
            let lower = word.value().to_lowercase();
            let Some(param) = lower.strip_prefix('-') else {
                let rest: Vec<&str> = args
                    .get(idx - 1..)
                    .unwrap_or_default()
                    .iter()
                    .map(Word::value)
                    .collect();
                return self.text(&rest.join(" "), depth + 1);
            };
            if param.is_empty() {
                continue;
            }
            if "command".starts_with(param) {
                let rest: Vec<&str> = args
                    .get(idx..)
                    .unwrap_or_default()
                    .iter()
                    .map(Word::value)
                    .collect();
                return self.text(&rest.join(" "), depth + 1);
            }
            if param.len() >= 2 && "encodedcommand".starts_with(param) || param == "ec" {
                return match args.get(idx).and_then(|w| decode_utf16_base64(w.value())) {
                    Some(decoded) => self.text(&decoded, depth + 1),
                    None => ControlFlow::Continue(()),
                };
            }
            if param.len() >= 2 && "executionpolicy".starts_with(param)
                || [
                    "windowstyle",
                    "workingdirectory",
                    "configurationname",
                    "inputformat",
                    "outputformat",
                    "version",
                    "psconsolefile",
                    "settingsfile",
                ]
                .iter()
                .any(|p| p.starts_with(param) && param.len() >= 2)
            {
                idx += 1;
                continue;
            }
            if "file".starts_with(param)
                && let Some(path) = args.get(idx)
            {
                return self.script_text_only(path.value(), depth + 1);
            }
        }
        ControlFlow::Continue(())
    }

    fn script_text_only(&mut self, path: &str, depth: usize) -> Flow {
        let scope = Scope {
            src: "",
            vars: Vars::new(),
            pid_vars: HashMap::new(),
            written: HashMap::new(),
        };
        self.script(path, &scope, depth)
    }

    /// Reads and judges a referenced script; its shebang or extension decides whether it
    /// is shell or interpreter code.
    pub(super) fn script(&mut self, path: &str, scope: &Scope<'_>, depth: usize) -> Flow {
        self.script_as(path, scope, depth, None)
    }

    /// Reads and judges a referenced script, as `runner` when the caller knows it.
    fn script_as(
        &mut self,
        path: &str,
        scope: &Scope<'_>,
        depth: usize,
        runner: Option<Runner>,
    ) -> Flow {
        if let Some(written) = scope.written.get(path_key(path)) {
            let written = written.clone();
            self.text(&written, depth)?;
        }
        if !self.seen_scripts.insert(path.to_owned()) {
            return ControlFlow::Continue(());
        }
        if depth > MAX_DEPTH {
            return stop(
                Rule::Unscannable,
                format!("script {path}"),
                "referenced scripts nest deeper than 8 levels, so the guard cannot scan them all",
            );
        }
        if self.n_paths_left == 0 {
            return stop(
                Rule::Unscannable,
                format!("script {path}"),
                "the command refers to more scripts than the guard scans",
            );
        }
        self.n_paths_left -= 1;
        match self.scripts.read(path) {
            Script::Nothing => ControlFlow::Continue(()),
            Script::Refused(why) => stop(
                Rule::Unscannable,
                format!("script {path}"),
                format!("a referenced script could not be scanned: {why}"),
            ),
            Script::Text(body) => {
                if body.len() > self.script_bytes_left {
                    return stop(
                        Rule::Unscannable,
                        format!("script {path}"),
                        "the referenced scripts exceed the guard's 1 MiB scan budget",
                    );
                }
                self.script_bytes_left -= body.len();
                let first_line = body.lines().next().unwrap_or_default();
                let code = first_line.starts_with("#!") && {
                    let interpreter = first_line.split_whitespace().find_map(|part| {
                        let name = command_name(part.trim_start_matches("#!"));
                        (name != "env" && !name.starts_with('-')).then_some(name)
                    });
                    interpreter.is_some_and(|i| is_code_interpreter(&i))
                };
                let by_extension = [
                    ".py", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".php", ".lua",
                ]
                .iter()
                .any(|ext| path.ends_with(ext));
                let shown = match runner {
                    Some(runner) => runner,
                    None if code || by_extension => Runner::Code,
                    None => Runner::Shell,
                };
                let was_in_file = std::mem::replace(&mut self.in_file, true);
                let flow = self.feed(shown, &body, depth.saturating_sub(1));
                self.in_file = was_in_file;
                match flow {
                    ControlFlow::Break(mut block) => {
                        block.reason = format!("{} (in referenced script {path})", block.reason);
                        ControlFlow::Break(block)
                    }
                    ControlFlow::Continue(()) => ControlFlow::Continue(()),
                }
            }
        }
    }

    /// Interpreter code: every string literal, and every run of adjacent literals
    /// (an argv list such as `["pkill", "python"]`), that could matter is judged as shell
    /// text. Literals that name no kill or lifecycle verb and no script are skipped, so a
    /// large library script costs little and its unrelated strings cannot block.
    pub(super) fn code(&mut self, code: &str, depth: usize) -> Flow {
        if kills_parent(code) {
            return stop(
                Rule::KillParent,
                "the parent process, which is the host or the shell it started",
                "the code signals its parent process, which is the host",
            );
        }
        let lower = code.to_lowercase();
        let kills = lower.contains("kill") || lower.contains("terminate");
        let lists_processes = [
            "process_iter",
            "psutil",
            "get-process",
            "ps-list",
            "find-process",
        ]
        .iter()
        .any(|needle| lower.contains(needle));
        let mut n_judged = 0;
        for text in code_texts(code) {
            if kills
                && lists_processes
                && let Some(image) = self.host.image_named(text.trim())
            {
                return stop(
                    Rule::KillByName,
                    format!("the {image} processes the code lists, the host among them"),
                    "the code kills the processes whose name is the host's image",
                );
            }
            let first = text
                .split_whitespace()
                .next()
                .map(command_name)
                .unwrap_or_default();
            if kills && matches!(first.as_str(), "pgrep" | "pidof" | "ps" | "lsof" | "cat") {
                // `os.kill(int(pid), 9) for pid in os.popen("pgrep python")`.
                self.text(&format!("kill $({text})"), depth)?;
            }
            let relevant = verb_in(&text, self.host).is_some()
                || text.contains(".sh")
                || text.contains("bash")
                || text.contains("sh -c")
                || text.contains("source ");
            if !relevant {
                continue;
            }
            n_judged += 1;
            if n_judged > MAX_LITERALS {
                return self.verb_scan(&text, Rule::Unparseable);
            }
            self.text(&text, depth)?;
        }
        ControlFlow::Continue(())
    }
}

/// Records what `cat > x.sh <<EOF`, `tee x.sh <<<…` and `echo … > x.sh` write.
pub(super) fn record_written(node: Node<'_>, src: &str, scope: &mut Scope<'_>) {
    let Some(body) = node
        .child_by_field_name("body")
        .filter(|b| b.kind() == "command")
    else {
        return;
    };
    let words = shell::command_words(body, src, &scope.vars);
    let name = words
        .first()
        .map(|w| command_name(w.value()))
        .unwrap_or_default();
    let mut content = None;
    let mut paths = Vec::new();
    if name == "tee" {
        paths.extend(
            words
                .iter()
                .skip(1)
                .filter(|w| !w.value().starts_with('-'))
                .map(|w| w.value().to_owned()),
        );
    }
    if matches!(name.as_str(), "echo" | "printf") {
        let args: Vec<&str> = words.iter().skip(1).map(Word::value).collect();
        content = Some(args.join(" "));
    }
    let mut cursor = node.walk();
    for redirect in node.children_by_field_name("redirect", &mut cursor) {
        match redirect.kind() {
            "file_redirect" if text(redirect, src).trim_start().starts_with('>') => {
                if let Some(dest) = redirect.child_by_field_name("destination") {
                    paths.push(shell::word(dest, src, &scope.vars).value().to_owned());
                }
            }
            "heredoc_redirect" => {
                let mut inner = redirect.walk();
                for child in redirect.children(&mut inner) {
                    if child.kind() == "heredoc_body" {
                        content = Some(text(child, src).to_owned());
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(content) = content {
        for path in paths {
            scope
                .written
                .insert(path_key(&path).to_owned(), content.clone());
        }
    }
}

/// A path as written on the line, without a leading `./`, to match writes with runs.
pub(super) fn path_key(path: &str) -> &str {
    let mut key = path;
    while let Some(rest) = key.strip_prefix("./") {
        key = rest;
    }
    key
}

/// Whether code signals its own parent: `os.kill(os.getppid(), …)`, `kill 9, getppid`,
/// `process.kill(process.ppid)`.
fn kills_parent(code: &str) -> bool {
    let lower = code.to_lowercase();
    ["getppid", "process.ppid"].iter().any(|needle| {
        lower.match_indices(needle).any(|(at, _)| {
            let start = at.saturating_sub(40);
            let mut start = start;
            while !lower.is_char_boundary(start) {
                start -= 1;
            }
            lower
                .get(start..at)
                .is_some_and(|before| before.contains("kill"))
        })
    })
}

/// String literals in interpreter code, plus runs of adjacent literals joined by spaces.
pub(super) fn code_texts(code: &str) -> Vec<String> {
    let mut texts = Vec::new();
    let mut run: Vec<String> = Vec::new();
    let mut chars = code.chars().peekable();
    let mut previous: Option<char> = None;
    let flush = |run: &mut Vec<String>, texts: &mut Vec<String>| {
        if run.len() > 1 {
            texts.push(run.join(" "));
        }
        run.clear();
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' | '`' => {
                let mut literal = String::new();
                while let Some(next) = chars.next() {
                    match next {
                        '\\' => {
                            if let Some(escaped) = chars.next() {
                                literal.push(match escaped {
                                    'n' => '\n',
                                    't' => '\t',
                                    other => other,
                                });
                            }
                        }
                        q if q == c => break,
                        other => literal.push(other),
                    }
                }
                if !literal.trim().is_empty() {
                    texts.push(literal.clone());
                    run.push(literal);
                }
            }
            ',' | '[' | ']' | '(' | ')' | '{' | '}' => {}
            c if c.is_whitespace() => {}
            '#' if previous.is_none_or(char::is_whitespace) => {
                // A comment in Python, shell, Perl or Ruby: skip to the end of the line, so
                // an apostrophe in it does not swallow the code after it.
                flush(&mut run, &mut texts);
                for next in chars.by_ref() {
                    if next == '\n' {
                        break;
                    }
                }
            }
            _ => flush(&mut run, &mut texts),
        }
        previous = Some(c);
        if texts.len() > MAX_CODE_LITERALS {
            break;
        }
    }
    flush(&mut run, &mut texts);
    texts
}

/// Decodes PowerShell's `-EncodedCommand` (base64 of UTF-16LE).
pub(super) fn decode_utf16_base64(encoded: &str) -> Option<String> {
    let mut bits: u32 = 0;
    let mut n_bits = 0;
    let mut bytes = Vec::with_capacity(encoded.len() * 3 / 4);
    for c in encoded.bytes() {
        let value = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' | b'\n' | b'\r' | b' ' => continue,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(value);
        n_bits += 6;
        if n_bits >= 8 {
            n_bits -= 8;
            bytes.push(u8::try_from((bits >> n_bits) & 0xff).unwrap_or(0));
        }
    }
    let units: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
        .collect();
    Some(String::from_utf16_lossy(&units))
}
