//! The walker: parses a command line, finds every simple command in it (however deeply
//! nested in `;`, `&&`, pipelines, subshells, loops, `$(…)` and backticks), peels wrappers,
//! follows text into nested shells, heredocs and referenced scripts, and asks the rules.
//!
//! Everything that re-enters the walker on new text (`bash -c`, `eval`, heredocs fed to a
//! shell, scripts, string literals of `python -c` code) goes through [`Judge::text`], which
//! charges a budget: nesting depth [`MAX_DEPTH`], [`MAX_TEXTS`] nested texts, [`MAX_PATHS`]
//! script reads, [`MAX_SCRIPT_TOTAL_BYTES`] of script text, and one deadline for the whole
//! judgement. A script the reader refuses, or a script that would overrun the budget, fails
//! closed; nested command text past the budget is judged by the verb scan instead (blocked
//! only if it names a kill or lifecycle verb), the same as text the parser cannot read. The
//! deadline covers the tree walks too: a walk that passes it stops, and the text it was
//! walking is judged by the verb scan. Realistic commands take microseconds; only
//! adversarial input (tens of thousands of nesting levels) ever reaches the deadline.
//!
//! Pipelines, loops and redirected statements are also judged as a whole, because a PID
//! source and the `kill` it feeds are often different commands
//! (`pgrep python | xargs kill`, `for p in $(pidof python); do kill $p; done`).
//!
//! This module holds the budget, the walk over one parsed text and the dispatch of each
//! simple command; its rooms hold the rest: `wrappers` (peeling `sudo`/`env`/`timeout`…
//! and who reads stdin), `pids` (`kill` and the PID sources feeding it), `feeds` (pipes
//! and heredocs into shells), `nested` (scripts, interpreter code, PowerShell) and `raw`
//! (text before or instead of the parser: cleaning, budgets, the verb scan).

mod feeds;
mod nested;
mod pids;
mod raw;
mod wrappers;

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use tree_sitter::Node;

use self::nested::record_written;
use self::raw::{clean, error_regions, structural_bytes, verb_in};
use self::wrappers::{
    Runner, Step, is_code_interpreter, is_shell, peel, shell_args, stdin_runner, wrapper_step,
};
#[cfg(test)]
use self::{
    nested::{code_texts, decode_utf16_base64, path_key},
    pids::awk_patterns,
};
use crate::host::Host;
use crate::rules::{self, command_name};
use crate::script::ScriptReader;
use crate::shell::{self, Vars, Word, text};
use crate::verdict::{Block, Rule, Verdict};

/// How deep `bash -c`, heredocs and scripts may nest.
pub(crate) const MAX_DEPTH: usize = 8;
/// How many texts (the command line, nested command strings, scripts, code literals) one
/// judgement may parse.
const MAX_TEXTS: u32 = 512;
/// How many referenced scripts one judgement may read.
const MAX_PATHS: u32 = 1024;
/// How much script text one judgement may read in total.
const MAX_SCRIPT_TOTAL_BYTES: usize = 1024 * 1024;
/// String literals judged per piece of interpreter code (after the verb prefilter).
const MAX_LITERALS: usize = 256;
/// String literals extracted per piece of interpreter code at all.
const MAX_CODE_LITERALS: usize = 65_536;
/// The most shell operators and quotes one text may carry before the parser sees it.
///
/// tree-sitter's cost grows with the square of the children of one node (a pipeline of
/// thousands of stages, thousands of adjacent unbalanced quotes), and that work runs
/// between its progress checks, so the deadline cannot stop it: 46 KB of `"|"|"|…`
/// took 18 s. Real commands carry a few dozen of these bytes; text past the budget is
/// judged by the verb scan instead (blocked only if it names a kill or lifecycle verb).
const MAX_STRUCTURAL_BYTES: usize = 2_000;
/// The wall-clock budget of one judgement.
const DEADLINE: Duration = Duration::from_millis(400);

type Flow = ControlFlow<Block>;

fn stop(rule: Rule, target: impl Into<String>, reason: impl Into<String>) -> Flow {
    ControlFlow::Break(Block::new(rule, target, reason))
}

/// Judges `command` against `host`, reading scripts through `scripts`.
pub(crate) fn run(command: &str, host: &Host, scripts: &dyn ScriptReader) -> Verdict {
    let mut judge = Judge {
        host,
        scripts,
        deadline: Instant::now() + DEADLINE,
        n_texts_left: MAX_TEXTS,
        n_paths_left: MAX_PATHS,
        script_bytes_left: MAX_SCRIPT_TOTAL_BYTES,
        seen_scripts: HashSet::new(),
        in_file: false,
    };
    match judge.text(command, 0) {
        ControlFlow::Break(block) => Verdict::Block(block),
        ControlFlow::Continue(()) => Verdict::Allow,
    }
}

struct Judge<'a> {
    host: &'a Host,
    scripts: &'a dyn ScriptReader,
    deadline: Instant,
    n_texts_left: u32,
    n_paths_left: u32,
    script_bytes_left: usize,
    seen_scripts: HashSet<String>,
    /// Whether the text being judged came from a script file: there, a parse error is
    /// judged by the verb scan of the unreadable region only, because real scripts often
    /// use syntax the grammar misses and mention `kill` in parts that did parse.
    in_file: bool,
}

/// What the walker knows about one parsed text.
struct Scope<'s> {
    src: &'s str,
    vars: Vars,
    /// Variables assigned from a host PID source, with what that source selects.
    pid_vars: HashMap<String, String>,
    /// Files this very text writes (`cat > x.sh <<'EOF'`), with what it writes to them.
    written: HashMap<String, String>,
}

impl Judge<'_> {
    /// Judges a piece of shell text at nesting `depth`.
    fn text(&mut self, text: &str, depth: usize) -> Flow {
        if depth > MAX_DEPTH || self.n_texts_left == 0 || Instant::now() > self.deadline {
            return self.verb_scan(text, Rule::Unparseable);
        }
        self.n_texts_left -= 1;
        let cleaned = clean(text);
        if structural_bytes(&cleaned) > MAX_STRUCTURAL_BYTES {
            return self.verb_scan(&cleaned, Rule::Unparseable);
        }
        let Some(tree) = shell::parse(&cleaned, self.deadline) else {
            return self.verb_scan(&cleaned, Rule::Unparseable);
        };
        let root = tree.root_node();
        let scope = self.prepass(root, &cleaned);
        let deadline = self.deadline;
        shell::for_each_node(root, deadline, |node| self.visit(node, &scope, depth))?;
        if Instant::now() > self.deadline {
            return self.verb_scan(&cleaned, Rule::Unparseable);
        }
        if root.has_error() {
            if self.in_file {
                let regions = error_regions(root, &cleaned, self.deadline);
                return self.verb_scan(&regions, Rule::Unparseable);
            }
            return self.verb_scan(&cleaned, Rule::Unparseable);
        }
        ControlFlow::Continue(())
    }

    /// Collects variables, PID-source variables and written files, in source order.
    fn prepass<'s>(&mut self, root: Node<'_>, src: &'s str) -> Scope<'s> {
        let mut scope = Scope {
            src,
            vars: Vars::new(),
            pid_vars: HashMap::new(),
            written: HashMap::new(),
        };
        let interesting = src.contains('=') || src.contains("for") || src.contains('>');
        if !interesting {
            return scope;
        }
        let deadline = self.deadline;
        let _ = shell::for_each_node(root, deadline, |node| {
            match node.kind() {
                "variable_assignment" => {
                    let name = node.child_by_field_name("name").map(|n| text(n, src));
                    let value = node.child_by_field_name("value");
                    if let (Some(name), Some(value)) = (name, value) {
                        let word = shell::word(value, src, &scope.vars);
                        if let Some(target) = self.pid_source(value, &scope) {
                            scope.pid_vars.insert(name.to_owned(), target);
                        }
                        let known = scope.vars.entry(name.to_owned()).or_default();
                        if known.len() < 8 {
                            known.extend(word.values);
                        }
                    }
                }
                "for_statement" => {
                    let name = node.child_by_field_name("variable").map(|n| text(n, src));
                    if let Some(name) = name {
                        let mut values = Vec::new();
                        let mut cursor = node.walk();
                        for value in node.children_by_field_name("value", &mut cursor) {
                            values.extend(shell::word(value, src, &scope.vars).values);
                        }
                        values.truncate(8);
                        scope.vars.insert(name.to_owned(), values);
                    }
                }
                "redirected_statement" => record_written(node, src, &mut scope),
                _ => {}
            }
            ControlFlow::<()>::Continue(())
        });
        scope
    }

    fn visit(&mut self, node: Node<'_>, scope: &Scope<'_>, depth: usize) -> Flow {
        match node.kind() {
            "command" => self.command(node, scope, depth),
            "pipeline" => {
                self.pipeline(node, scope, depth)?;
                self.combined(node, scope)
            }
            "for_statement"
            | "while_statement"
            | "c_style_for_statement"
            | "redirected_statement" => self.combined(node, scope),
            "heredoc_redirect" => self.heredoc(node, scope, depth),
            _ => ControlFlow::Continue(()),
        }
    }

    fn command(&mut self, node: Node<'_>, scope: &Scope<'_>, depth: usize) -> Flow {
        let words = shell::command_words(node, scope.src, &scope.vars);
        if words.is_empty() {
            return ControlFlow::Continue(());
        }
        self.simple(&words, node, scope, depth)?;
        // Text fed to a shell by a herestring or a `<` redirect.
        let peeled = peel(&words);
        if let Some(runner) = stdin_runner(peeled) {
            let mut redirects: Vec<Node<'_>> = Vec::new();
            let mut cursor = node.walk();
            redirects.extend(node.children(&mut cursor));
            if let Some(parent) = node.parent().filter(|p| p.kind() == "redirected_statement") {
                let mut cursor = parent.walk();
                redirects.extend(parent.children_by_field_name("redirect", &mut cursor));
            }
            for redirect in redirects {
                match redirect.kind() {
                    "herestring_redirect" => {
                        let last = redirect.named_child_count().saturating_sub(1);
                        if let Some(value) = u32::try_from(last)
                            .ok()
                            .and_then(|i| redirect.named_child(i))
                        {
                            let fed = shell::word(value, scope.src, &scope.vars);
                            self.feed(runner, fed.value(), depth)?;
                        }
                    }
                    "file_redirect" if text(redirect, scope.src).trim_start().starts_with('<') => {
                        if let Some(dest) = redirect.child_by_field_name("destination") {
                            let path = shell::word(dest, scope.src, &scope.vars);
                            self.script(path.value(), scope, depth + 1)?;
                        }
                    }
                    _ => {}
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn feed(&mut self, runner: Runner, fed: &str, depth: usize) -> Flow {
        match runner {
            Runner::Shell => self.text(fed, depth + 1),
            Runner::Code => self.code(fed, depth + 1),
        }
    }

    /// Judges one simple command, peeling wrappers first.
    fn simple(&mut self, words: &[Word], node: Node<'_>, scope: &Scope<'_>, depth: usize) -> Flow {
        let mut words = words;
        while let Some(first) = words.first() {
            let args = words.get(1..).unwrap_or_default();
            match wrapper_step(&command_name(first.value()), args) {
                Step::Inner(idx) => words = args.get(idx..).unwrap_or_default(),
                Step::Text(text) => return self.text(&text, depth + 1),
                Step::Nothing => return ControlFlow::Continue(()),
                Step::Final => break,
            }
        }
        let Some(first) = words.first() else {
            return ControlFlow::Continue(());
        };
        let args = words.get(1..).unwrap_or_default();
        for value in &first.values {
            if first.dynamic && value.starts_with('$') {
                if matches!(value.as_str(), "$SHELL" | "${SHELL}" | "$BASH" | "${BASH}") {
                    self.final_command("sh", args, node, scope, depth)?;
                }
                continue;
            }
            self.final_command(value, args, node, scope, depth)?;
        }
        ControlFlow::Continue(())
    }

    fn final_command(
        &mut self,
        raw_name: &str,
        args: &[Word],
        node: Node<'_>,
        scope: &Scope<'_>,
        depth: usize,
    ) -> Flow {
        let name = command_name(raw_name);
        if is_shell(&name) {
            let (command_string, script, _) = shell_args(args);
            if let Some(command_string) = command_string {
                for value in &command_string.values {
                    self.text(value, depth + 1)?;
                }
            }
            if let Some(script) = script {
                self.script(script.value(), scope, depth + 1)?;
            }
            return ControlFlow::Continue(());
        }
        if is_code_interpreter(&name) {
            return self.interpreter(args, scope, depth);
        }
        match name.as_str() {
            "source" | "." => {
                if let Some(path) = args.first() {
                    self.script(path.value(), scope, depth + 1)?;
                }
                ControlFlow::Continue(())
            }
            "trap" => {
                // The action runs later in this same shell, on the signal or at exit.
                match args.iter().find(|w| !w.value().starts_with('-')) {
                    Some(action) => self.text(action.value(), depth + 1),
                    None => ControlFlow::Continue(()),
                }
            }
            "eval" => {
                let joined: Vec<&str> = args.iter().map(Word::value).collect();
                self.text(&joined.join(" "), depth + 1)
            }
            "powershell" | "pwsh" => self.powershell(args, depth),
            "cmd" => {
                let at = args
                    .iter()
                    .position(|w| matches!(w.value().to_lowercase().as_str(), "/c" | "/k" | "/r"));
                match at {
                    Some(at) => {
                        let rest: Vec<&str> = args
                            .get(at + 1..)
                            .unwrap_or_default()
                            .iter()
                            .map(Word::value)
                            .collect();
                        self.text(&rest.join(" "), depth + 1)
                    }
                    None => ControlFlow::Continue(()),
                }
            }
            "kill" => self.kill(args, node, scope),
            "find" => self.find(args, node, scope, depth),
            _ => {
                let judged = if raw_name.contains("/init.d/") || raw_name.contains("/rc.d/") {
                    let mut service_args = vec![Word::literal(&name)];
                    service_args.extend(args.iter().cloned());
                    rules::judge_simple("service", &service_args, self.host)
                } else {
                    rules::judge_simple(&name, args, self.host)
                };
                if let Some(block) = judged {
                    return ControlFlow::Break(block);
                }
                let looks_like_script = raw_name.contains('/')
                    || [".sh", ".bash", ".zsh", ".command"]
                        .iter()
                        .any(|s| raw_name.ends_with(s));
                if looks_like_script {
                    self.script(raw_name, scope, depth + 1)?;
                }
                ControlFlow::Continue(())
            }
        }
    }

    /// `find … -exec cmd … ;`: the command runs once per file.
    fn find(&mut self, args: &[Word], node: Node<'_>, scope: &Scope<'_>, depth: usize) -> Flow {
        let _ = &wrappers::FIND;
        let mut idx = 0;
        while let Some(word) = args.get(idx) {
            idx += 1;
            if !matches!(word.value(), "-exec" | "-execdir" | "-ok" | "-okdir") {
                continue;
            }
            let start = idx;
            while args
                .get(idx)
                .is_some_and(|w| !matches!(w.value(), ";" | "+"))
            {
                idx += 1;
            }
            let inner = args.get(start..idx).unwrap_or_default();
            if depth < MAX_DEPTH {
                self.simple(inner, node, scope, depth + 1)?;
            }
        }
        ControlFlow::Continue(())
    }

    /// The fail-safe for text that could not be parsed: block only if it names a kill or
    /// lifecycle verb.
    fn verb_scan(&self, text: &str, rule: Rule) -> Flow {
        match verb_in(text, self.host) {
            Some(verb) => stop(
                rule,
                "unknown: the command could not be read",
                format!("the command could not be parsed and it contains the verb `{verb}`"),
            ),
            None => ControlFlow::Continue(()),
        }
    }
}

#[cfg(test)]
mod tests;
