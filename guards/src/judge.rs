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

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use tree_sitter::Node;

use crate::host::{Host, names_host_file};
use crate::rules::{self, Pattern, Spec, command_name, parse};
use crate::script::{Script, ScriptReader};
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

/// How a command consumes text it is fed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runner {
    Shell,
    Code,
}

/// What a wrapper does with the rest of its command line.
enum Step {
    /// The inner command starts at this index of the wrapper's arguments.
    Inner(usize),
    /// The wrapper runs this text through a shell.
    Text(String),
    /// Nothing runs (`command -v pkill`).
    Nothing,
    /// Not a wrapper.
    Final,
}

const SHELLS: [&str; 10] = [
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh", "fish",
];

fn is_shell(name: &str) -> bool {
    SHELLS.contains(&name)
}

fn is_code_interpreter(name: &str) -> bool {
    let family = crate::host::family(name);
    matches!(
        family.as_str(),
        "python"
            | "pypy"
            | "node"
            | "nodejs"
            | "deno"
            | "bun"
            | "perl"
            | "ruby"
            | "php"
            | "lua"
            | "osascript"
    )
}

const fn spec(short_values: &'static str, long_values: &'static [&'static str]) -> Spec {
    Spec {
        short_values,
        long_values,
        dash_signals: false,
        assignments: false,
    }
}

const SUDO: Spec = Spec {
    short_values: "ugCDhpRrtTU",
    long_values: &[
        "user",
        "group",
        "close-from",
        "chdir",
        "host",
        "prompt",
        "chroot",
        "role",
        "type",
        "command-timeout",
        "other-user",
    ],
    dash_signals: false,
    assignments: true,
};
const ENV: Spec = Spec {
    short_values: "uCSP",
    long_values: &["unset", "chdir", "split-string"],
    dash_signals: false,
    assignments: true,
};
const TIMEOUT: Spec = spec("sk", &["signal", "kill-after"]);
const NICE: Spec = spec("n", &["adjustment"]);
const IONICE: Spec = spec("cnp", &["class", "classdata", "pid"]);
const STDBUF: Spec = spec("ioe", &["input", "output", "error"]);
const TIME: Spec = spec("fo", &["format", "output"]);
const EXEC: Spec = spec("a", &[]);
const XARGS: Spec = spec(
    "adEIILnPs",
    &[
        "arg-file",
        "delimiter",
        "eof",
        "replace",
        "max-lines",
        "max-args",
        "max-procs",
        "max-chars",
        "process-slot-var",
    ],
);
const SYSTEMD_RUN: Spec = spec(
    "upEMHS",
    &[
        "unit",
        "property",
        "description",
        "slice",
        "setenv",
        "uid",
        "gid",
        "machine",
        "host",
        "working-directory",
        "on-calendar",
        "on-active",
        "on-boot",
        "on-startup",
        "on-unit-active",
        "on-unit-inactive",
        "nice",
        "service-type",
        "path-property",
        "socket-property",
        "timer-property",
    ],
);
const STRACE: Spec = spec(
    "oepsEuabIOPSX",
    &["output", "expr", "attach", "string-limit", "env", "user"],
);
const PKEXEC: Spec = spec("", &["user"]);
const WATCH: Spec = spec("nqd", &["interval", "differences", "equexit"]);
const SU: Spec = spec(
    "cgGsw",
    &[
        "command",
        "group",
        "supp-group",
        "shell",
        "whitelist-environment",
    ],
);
const FLOCK: Spec = spec("wEc", &["timeout", "conflict-exit-code", "command"]);
const SCRIPT: Spec = spec(
    "cEIOTBm",
    &[
        "command",
        "echo",
        "log-in",
        "log-out",
        "log-timing",
        "log-io",
    ],
);
const TASKSET: Spec = spec("", &[]);
const CHRT: Spec = spec("T", &["sched-runtime", "sched-deadline", "sched-period"]);
const CAFFEINATE: Spec = spec("tw", &[]);
const ENTR: Spec = spec("", &[]);
const FIND: Spec = spec("", &[]);

/// One step of peeling a wrapper named `name` with arguments `args`.
fn wrapper_step(name: &str, args: &[Word]) -> Step {
    let skip = |spec: &Spec, extra_positionals: usize| {
        let parsed = parse(args, spec, true);
        match parsed.first_positional_idx {
            Some(idx) => Step::Inner(idx + extra_positionals),
            None => Step::Nothing,
        }
    };
    match name {
        "sudo" | "doas" => {
            let parsed = parse(args, &SUDO, true);
            match parsed.first_positional_idx {
                Some(idx) => Step::Inner(idx),
                None => Step::Nothing,
            }
        }
        "env" => {
            let parsed = parse(args, &ENV, true);
            let split = parsed
                .values("S")
                .chain(parsed.values("split-string"))
                .next();
            if let Some(split) = split {
                let rest: Vec<&str> = parsed
                    .first_positional_idx
                    .and_then(|idx| args.get(idx..))
                    .unwrap_or_default()
                    .iter()
                    .map(Word::value)
                    .collect();
                return Step::Text(format!("{split} {}", rest.join(" ")));
            }
            match parsed.first_positional_idx {
                Some(idx) => Step::Inner(idx),
                None => Step::Nothing,
            }
        }
        "nohup" | "builtin" | "unbuffer" | "then" | "do" | "else" | "busybox" | "rlwrap" => {
            skip(&spec("", &[]), 0)
        }
        "command" => {
            if args.iter().any(|w| matches!(w.value(), "-v" | "-V")) {
                return Step::Nothing;
            }
            skip(&spec("", &[]), 0)
        }
        "exec" => skip(&EXEC, 0),
        "time" => skip(&TIME, 0),
        "setsid" | "setpgid" => skip(&spec("", &[]), 0),
        "nice" => {
            // `nice -10 cmd` is an adjustment, not an option cluster.
            let start = usize::from(args.first().is_some_and(|w| {
                w.value()
                    .strip_prefix('-')
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
            }));
            match parse(args.get(start..).unwrap_or_default(), &NICE, true).first_positional_idx {
                Some(idx) => Step::Inner(idx + start),
                None => Step::Nothing,
            }
        }
        "ionice" => skip(&IONICE, 0),
        "stdbuf" => skip(&STDBUF, 0),
        "timeout" | "gtimeout" => skip(&TIMEOUT, 1),
        "chrt" => skip(&CHRT, 1),
        "taskset" => {
            if args.iter().any(|w| matches!(w.value(), "-p" | "--pid")) {
                return Step::Nothing;
            }
            skip(&TASKSET, 1)
        }
        "caffeinate" => skip(&CAFFEINATE, 0),
        "xargs" => skip(&XARGS, 0),
        "systemd-run" => skip(&SYSTEMD_RUN, 0),
        "strace" | "ltrace" => skip(&STRACE, 0),
        "pkexec" => skip(&PKEXEC, 0),
        "gosu" | "su-exec" | "chroot" => skip(&spec("", &[]), 1),
        "entr" => skip(&ENTR, 0),
        "watch" => {
            let parsed = parse(args, &WATCH, true);
            let Some(idx) = parsed.first_positional_idx else {
                return Step::Nothing;
            };
            if parsed.has("x") || parsed.has("exec") {
                return Step::Inner(idx);
            }
            let rest: Vec<&str> = args
                .get(idx..)
                .unwrap_or_default()
                .iter()
                .map(Word::value)
                .collect();
            Step::Text(rest.join(" "))
        }
        "su" | "runuser" => {
            let parsed = parse(args, &SU, false);
            match parsed.values("c").chain(parsed.values("command")).next() {
                Some(command) => Step::Text(command.to_owned()),
                None => {
                    // `runuser -u user -- cmd`: what follows `--` runs.
                    match args.iter().position(|w| w.value() == "--") {
                        Some(idx) if name == "runuser" => Step::Inner(idx + 1),
                        _ => Step::Nothing,
                    }
                }
            }
        }
        "flock" => {
            let parsed = parse(args, &FLOCK, true);
            if let Some(command) = parsed.values("c").chain(parsed.values("command")).next() {
                return Step::Text(command.to_owned());
            }
            match parsed.first_positional_idx {
                Some(idx) => {
                    let rest = args.get(idx + 1..).unwrap_or_default();
                    let inner = parse(rest, &FLOCK, false);
                    match inner.values("c").chain(inner.values("command")).next() {
                        Some(command) => Step::Text(command.to_owned()),
                        None => Step::Inner(idx + 1),
                    }
                }
                None => Step::Nothing,
            }
        }
        "script" => {
            let parsed = parse(args, &SCRIPT, false);
            match parsed.values("c").chain(parsed.values("command")).next() {
                Some(command) => Step::Text(command.to_owned()),
                None => Step::Nothing,
            }
        }
        _ => Step::Final,
    }
}

/// Peels wrappers off `words` without judging anything.
fn peel(words: &[Word]) -> &[Word] {
    let mut words = words;
    while let Some(first) = words.first() {
        let args = words.get(1..).unwrap_or_default();
        match wrapper_step(&command_name(first.value()), args) {
            Step::Inner(idx) => words = args.get(idx..).unwrap_or_default(),
            _ => break,
        }
    }
    words
}

/// Whether `words` (peeled) read commands from stdin, and how.
fn stdin_runner(words: &[Word]) -> Option<Runner> {
    let first = words.first()?;
    let name = command_name(first.value());
    let args = words.get(1..).unwrap_or_default();
    if is_shell(&name) {
        let (command_string, script, _) = shell_args(args);
        return (command_string.is_none() && script.is_none()).then_some(Runner::Shell);
    }
    if is_code_interpreter(&name) {
        let reads_stdin = args
            .iter()
            .all(|w| w.value().starts_with('-') && w.value() != "-c" && w.value() != "-e")
            || args.iter().any(|w| w.value() == "-");
        return reads_stdin.then_some(Runner::Code);
    }
    if matches!(name.as_str(), "powershell" | "pwsh") {
        return Some(Runner::Shell);
    }
    None
}

/// A shell's arguments: the `-c` command string, the script path, and the index after them.
fn shell_args(args: &[Word]) -> (Option<&Word>, Option<&Word>, usize) {
    let mut idx = 0;
    let mut has_c = false;
    let mut reads_stdin = false;
    while let Some(word) = args.get(idx) {
        let arg = word.value();
        if arg == "--" || arg == "-" {
            idx += 1;
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            idx += if matches!(long, "rcfile" | "init-file") {
                2
            } else {
                1
            };
            continue;
        }
        if let Some(cluster) = arg.strip_prefix(['-', '+']) {
            if cluster.is_empty() {
                break;
            }
            has_c |= cluster.contains('c');
            reads_stdin |= cluster.contains('s');
            idx += 1;
            if cluster.ends_with(['o', 'O']) {
                idx += 1;
            }
            continue;
        }
        break;
    }
    let positional = args.get(idx);
    if has_c {
        (positional, None, idx + 1)
    } else if reads_stdin {
        (None, None, idx)
    } else {
        (None, positional, idx + 1)
    }
}

/// Counts the bytes that make parser nodes: operators, redirections, separators,
/// quotes, brackets.
fn structural_bytes(text: &str) -> usize {
    text.bytes()
        .filter(|b| {
            matches!(
                b,
                b'|' | b';' | b'&' | b'"' | b'\'' | b'`' | b'(' | b')' | b'<' | b'>' | b'\n'
            )
        })
        .count()
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
                        if let Some(value) =
                            redirect.named_child(redirect.named_child_count().saturating_sub(1))
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
        let _ = &FIND;
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

    /// `kill`: everyone (`-1`), the parent (`$PPID`), PIDs of the host, or PowerShell's
    /// `kill -Name` alias.
    fn kill(&mut self, args: &[Word], node: Node<'_>, scope: &Scope<'_>) -> Flow {
        for name in rules::powershell_names(args, false) {
            if let Some(image) = self.host.image_named(&name) {
                return stop(
                    Rule::KillByName,
                    format!("every process named {name}, the host image {image} among them"),
                    format!("`kill -Name {name}` stops every {name} process, and the host is one"),
                );
            }
        }
        let mut idx = 0;
        while let Some(word) = args.get(idx) {
            let arg = word.value();
            if arg == "--" {
                idx += 1;
                break;
            }
            if matches!(arg, "-l" | "-L" | "--list" | "--table") {
                return ControlFlow::Continue(());
            }
            if matches!(arg, "-s" | "-n" | "--signal") {
                idx += 2;
                continue;
            }
            if idx == 0 && arg.starts_with('-') && arg.len() > 1 {
                idx += 1;
                continue;
            }
            break;
        }
        for word in args.get(idx..).unwrap_or_default() {
            if word.values.iter().any(|v| v == "-1") {
                return stop(
                    Rule::KillEveryone,
                    "every process the user may signal, the host included",
                    "`kill -1` signals every process the user owns",
                );
            }
            if matches!(word.raw.trim_matches('"'), "$PPID" | "${PPID}") {
                return stop(
                    Rule::KillParent,
                    "the parent process, which is the host or the shell it started",
                    "`kill $PPID` from a supervised command signals the host that runs it",
                );
            }
            for (name, target) in &scope.pid_vars {
                if word.raw.contains(&format!("${name}"))
                    || word.raw.contains(&format!("${{{name}}}"))
                {
                    return stop(
                        Rule::KillHostPids,
                        target.clone(),
                        "`kill` is fed the PIDs of processes the host is one of",
                    );
                }
            }
        }
        let mut found = None;
        let deadline = self.deadline;
        let _ = shell::for_each_node(node, deadline, |n| {
            if n.kind() == "command_substitution"
                && let Some(target) = self.pid_source(n, scope)
            {
                found = Some(target);
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        });
        match found {
            Some(target) => stop(
                Rule::KillHostPids,
                target,
                "`kill` is fed the PIDs of processes the host is one of",
            ),
            None => ControlFlow::Continue(()),
        }
    }

    /// What a PID source inside `node` selects, when that includes the host: `pgrep`,
    /// `pidof`, `Get-Process`, `ps | grep`, a host pid file, `systemctl show` of a host unit.
    fn pid_source(&self, node: Node<'_>, scope: &Scope<'_>) -> Option<String> {
        let src = scope.src;
        if !node.has_error() && !mentions_pid_source(text(node, src)) {
            return None;
        }
        let mut saw_ps = false;
        let mut patterns: Vec<(String, bool)> = Vec::new();
        let mut found = None;
        let deadline = self.deadline;
        let _ = shell::for_each_node(node, deadline, |n| {
            if n.kind() == "file_redirect" && text(n, src).trim_start().starts_with('<') {
                // `$(< herd.pid)`: bash reads the file without a command.
                if let Some(dest) = n.child_by_field_name("destination") {
                    let path = shell::word(dest, src, &scope.vars);
                    if let Some(name) = names_host_file(self.host, path.value()) {
                        found = Some(format!(
                            "the process in pid file {} (the host {name})",
                            path.value()
                        ));
                        return ControlFlow::Break(());
                    }
                }
            }
            if n.kind() != "command" {
                return ControlFlow::Continue(());
            }
            let words = shell::command_words(n, src, &scope.vars);
            let words = peel(&words);
            let Some(first) = words.first() else {
                return ControlFlow::Continue(());
            };
            let name = command_name(first.value());
            let args = words.get(1..).unwrap_or_default();
            let hit = match name.as_str() {
                "pgrep" => rules::pgrep_target(args, self.host).map(|(_, target)| target),
                "pidof" => rules::pidof_target(args, self.host),
                "get-process" | "gps" => rules::powershell_names(args, true).iter().find_map(|n| {
                    rules::names_host_image(self.host, n).map(|image| {
                        format!("the {n} processes, the host image {image} among them")
                    })
                }),
                "cat" | "head" | "tail" | "less" | "more" | "type" | "get-content" => args
                    .iter()
                    .filter(|w| !w.value().starts_with('-'))
                    .find_map(|w| {
                        names_host_file(self.host, w.value()).map(|name| {
                            format!("the process in pid file {} (the host {name})", w.value())
                        })
                    }),
                "systemctl" => {
                    let positionals: Vec<&str> = args
                        .iter()
                        .map(Word::value)
                        .filter(|v| !v.starts_with('-'))
                        .collect();
                    (positionals.first() == Some(&"show"))
                        .then(|| {
                            positionals
                                .iter()
                                .skip(1)
                                .find_map(|u| self.host.unit_named(u))
                        })
                        .flatten()
                        .map(|unit| format!("the main process of the host's service {unit}"))
                }
                "lsof" => {
                    // `lsof -t /usr/bin/python3` lists every process running the host's
                    // binary; `lsof -c python` every process whose name starts so.
                    let mut hit = None;
                    let mut iter = args.iter().map(Word::value);
                    while let Some(arg) = iter.next() {
                        let candidate = match arg {
                            "-c" => iter.next().map(|prefix| format!("{prefix}*")),
                            _ if arg.starts_with('/') => Some(arg.to_owned()),
                            _ => None,
                        };
                        if let Some(image) = candidate.and_then(|c| self.host.image_named(&c)) {
                            hit = Some(format!(
                                "the processes `lsof` finds for {image}, the host among them"
                            ));
                            break;
                        }
                    }
                    hit
                }
                "ps" if args.iter().any(|w| {
                    let v = w.value();
                    v.contains("ppid") && !v.starts_with("--ppid")
                }) =>
                {
                    // `ps -o ppid= -p $$`: the parent of this shell is the host.
                    Some("the parent process, which is the host or the shell it started".to_owned())
                }
                "ps" => {
                    saw_ps = true;
                    let names: Vec<&str> = args
                        .iter()
                        .map(Word::value)
                        .filter(|v| !v.starts_with('-'))
                        .collect();
                    names
                        .iter()
                        .find_map(|n| self.host.image_named(n))
                        .map(|image| {
                            format!("the {image} processes `ps` lists, the host among them")
                        })
                }
                "grep" | "egrep" | "fgrep" | "rg" => {
                    if !args.iter().any(|w| {
                        w.value() == "-v"
                            || w.value().starts_with("-v") && !w.value().starts_with("--")
                    }) {
                        let icase = args.iter().any(|w| w.value() == "-i");
                        let positional = args.iter().map(Word::value).find(|v| !v.starts_with('-'));
                        patterns.extend(positional.map(|p| (p.to_owned(), icase)));
                    }
                    None
                }
                "awk" | "gawk" | "mawk" | "nawk" => {
                    for program in args.iter().map(Word::value).filter(|v| !v.starts_with('-')) {
                        patterns.extend(awk_patterns(program).into_iter().map(|p| (p, false)));
                    }
                    None
                }
                _ => None,
            };
            match hit {
                Some(target) => {
                    found = Some(target);
                    ControlFlow::Break(())
                }
                None => ControlFlow::Continue(()),
            }
        });
        if found.is_some() || !saw_ps {
            return found;
        }
        patterns.iter().find_map(|(pattern, icase)| {
            let compiled = Pattern::new(pattern, false, *icase);
            let on_cmdline =
                !self.host.cmdline().is_empty() && compiled.matches(self.host.cmdline());
            let on_image = self.host.image_matching(&mut |name| compiled.matches(name));
            (on_cmdline || on_image.is_some())
                .then(|| format!("the processes `ps | grep {pattern}` finds, the host among them"))
        })
    }

    /// A pipeline, loop or redirected statement that both finds host PIDs and kills.
    fn combined(&mut self, node: Node<'_>, scope: &Scope<'_>) -> Flow {
        let body = text(node, scope.src);
        if !contains_killer(body) {
            return ControlFlow::Continue(());
        }
        match self.pid_source(node, scope) {
            Some(target) => stop(
                Rule::KillHostPids,
                target,
                "this command finds the host's PIDs and feeds them to a kill",
            ),
            None => self.get_process_pipeline(node, scope),
        }
    }

    /// `Get-Process | Stop-Process` with no name or filter kills every process.
    fn get_process_pipeline(&mut self, node: Node<'_>, scope: &Scope<'_>) -> Flow {
        if node.kind() != "pipeline" {
            return ControlFlow::Continue(());
        }
        let mut stages = Vec::new();
        let mut named_get = false;
        let mut cursor = node.walk();
        for stage in node.named_children(&mut cursor) {
            let words = shell::command_words(stage, scope.src, &scope.vars);
            let name = words
                .first()
                .map(|w| command_name(w.value()))
                .unwrap_or_default();
            if matches!(name.as_str(), "get-process" | "gps") {
                let args = words.get(1..).unwrap_or_default();
                named_get |= !rules::powershell_names(args, true).is_empty();
            }
            stages.push(name);
        }
        let gets = stages
            .iter()
            .any(|s| matches!(s.as_str(), "get-process" | "gps"));
        let stops = stages
            .iter()
            .any(|s| matches!(s.as_str(), "stop-process" | "spps" | "kill"));
        let filters = stages
            .iter()
            .any(|s| matches!(s.as_str(), "where-object" | "where" | "?" | "select-object"));
        if !(gets && stops) {
            return ControlFlow::Continue(());
        }
        let body = text(node, scope.src);
        let named = body
            .split(|c: char| !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '*')))
            .find_map(|token| {
                let token = token.trim_matches('*');
                (token.len() >= 2)
                    .then(|| self.host.image_named(token))
                    .flatten()
            });
        if let Some(image) = named {
            return stop(
                Rule::KillByName,
                format!("the {image} processes, the host among them"),
                "`Get-Process … | Stop-Process` stops processes of the host's image",
            );
        }
        if filters || named_get {
            return ControlFlow::Continue(());
        }
        stop(
            Rule::KillEveryone,
            "every process, the host included",
            "`Get-Process | Stop-Process` without a name stops every process",
        )
    }

    /// Text a stage writes into a later stage that is a shell (`echo 'pkill x' | sh`,
    /// `grep … cmds.txt | bash`, `cat x.sh | sh`).
    fn pipeline(&mut self, node: Node<'_>, scope: &Scope<'_>, depth: usize) -> Flow {
        let mut stages: Vec<Node<'_>> = Vec::new();
        let mut cursor = node.walk();
        stages.extend(node.named_children(&mut cursor));
        for (idx, stage) in stages.iter().enumerate() {
            let command = match stage.kind() {
                "command" => Some(*stage),
                "redirected_statement" => stage.child_by_field_name("body"),
                _ => None,
            };
            let Some(command) = command.filter(|c| c.kind() == "command") else {
                continue;
            };
            let words = shell::command_words(command, scope.src, &scope.vars);
            if idx > 0
                && words
                    .first()
                    .is_some_and(|w| command_name(w.value()) == "xargs")
            {
                // `echo python | xargs pkill`: the upstream output becomes arguments.
                let mut combined = peel(&words).to_vec();
                for upstream in stages.iter().take(idx) {
                    combined.extend(echoed_words(*upstream, scope, self.deadline));
                }
                self.simple(&combined, command, scope, depth)?;
            }
            let Some(runner) = stdin_runner(peel(&words)) else {
                continue;
            };
            for upstream in stages.iter().take(idx) {
                self.upstream(*upstream, runner, scope, depth)?;
            }
        }
        ControlFlow::Continue(())
    }

    fn upstream(
        &mut self,
        stage: Node<'_>,
        runner: Runner,
        scope: &Scope<'_>,
        depth: usize,
    ) -> Flow {
        let mut fed: Vec<(bool, String)> = Vec::new();
        let deadline = self.deadline;
        let _ = shell::for_each_node(stage, deadline, |n| {
            if n.kind() == "command" {
                let words = shell::command_words(n, scope.src, &scope.vars);
                let words = peel(&words);
                let name = words
                    .first()
                    .map(|w| command_name(w.value()))
                    .unwrap_or_default();
                let args = words.get(1..).unwrap_or_default();
                if matches!(
                    name.as_str(),
                    "cat" | "head" | "tail" | "type" | "get-content"
                ) {
                    for arg in args.iter().filter(|w| !w.value().starts_with('-')) {
                        fed.push((true, arg.value().to_owned()));
                    }
                } else {
                    let escapes = matches!(name.as_str(), "printf" | "echo");
                    let values: Vec<String> = args
                        .iter()
                        .map(|w| {
                            let value = w.value();
                            if escapes {
                                value.replace("\\n", "\n").replace("\\t", "\t")
                            } else {
                                value.to_owned()
                            }
                        })
                        .collect();
                    fed.push((false, values.join(" ")));
                    if values.len() > 1 {
                        fed.push((false, values.join("\n")));
                    }
                }
            }
            ControlFlow::<()>::Continue(())
        });
        for (is_path, item) in fed {
            if is_path {
                self.script(&item, scope, depth + 1)?;
            } else {
                self.feed(runner, &item, depth)?;
            }
        }
        ControlFlow::Continue(())
    }

    /// A heredoc: judged as shell text when a shell or interpreter reads it, or when its
    /// delimiter is unquoted (the body is then live shell text with expansions).
    fn heredoc(&mut self, node: Node<'_>, scope: &Scope<'_>, depth: usize) -> Flow {
        let src = scope.src;
        let mut quoted = false;
        let mut body = None;
        let mut runner = None;
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            match child.kind() {
                "heredoc_start" => quoted = text(child, src).contains(['\'', '"', '\\']),
                "heredoc_body" => body = Some(text(child, src)),
                "pipeline" => runner = runner.or_else(|| pipeline_runner(child, scope)),
                _ => {}
            }
        }
        let Some(body) = body else {
            return ControlFlow::Continue(());
        };
        if let Some(parent) = node.parent().filter(|p| p.kind() == "redirected_statement") {
            if let Some(command) = parent
                .child_by_field_name("body")
                .filter(|c| c.kind() == "command")
            {
                let words = shell::command_words(command, src, &scope.vars);
                runner = runner.or_else(|| stdin_runner(peel(&words)));
            }
            // A later pipeline stage reading what this statement prints.
            if let Some(pipeline) = parent.parent().filter(|p| p.kind() == "pipeline") {
                runner = runner.or_else(|| pipeline_runner(pipeline, scope));
            }
        }
        match runner {
            Some(runner) => self.feed(runner, body, depth),
            None if !quoted => self.text(body, depth + 1),
            None => ControlFlow::Continue(()),
        }
    }

    /// `python -c CODE`, `node -e CODE`, `python script.py`, `perl -e CODE`.
    fn interpreter(&mut self, args: &[Word], scope: &Scope<'_>, depth: usize) -> Flow {
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
    fn powershell(&mut self, args: &[Word], depth: usize) -> Flow {
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
    fn script(&mut self, path: &str, scope: &Scope<'_>, depth: usize) -> Flow {
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
    fn code(&mut self, code: &str, depth: usize) -> Flow {
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

/// NUL bytes removed and CRLF line ends made plain.
fn clean(text: &str) -> std::borrow::Cow<'_, str> {
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

/// Records what `cat > x.sh <<EOF`, `tee x.sh <<<…` and `echo … > x.sh` write.
fn record_written(node: Node<'_>, src: &str, scope: &mut Scope<'_>) {
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
fn path_key(path: &str) -> &str {
    let mut key = path;
    while let Some(rest) = key.strip_prefix("./") {
        key = rest;
    }
    key
}

/// The words `echo`/`printf` commands in `stage` print, split on whitespace.
fn echoed_words(stage: Node<'_>, scope: &Scope<'_>, deadline: Instant) -> Vec<Word> {
    let mut out = Vec::new();
    let _ = shell::for_each_node(stage, deadline, |n| {
        if n.kind() == "command" {
            let words = shell::command_words(n, scope.src, &scope.vars);
            let name = words
                .first()
                .map(|w| command_name(w.value()))
                .unwrap_or_default();
            if matches!(name.as_str(), "echo" | "printf") {
                for word in words.iter().skip(1).filter(|w| !w.value().starts_with('-')) {
                    let value = word.value().replace("\\n", " ");
                    out.extend(value.split_whitespace().map(Word::literal));
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    out
}

/// The runner of the first stage of `pipeline` that reads stdin.
fn pipeline_runner(pipeline: Node<'_>, scope: &Scope<'_>) -> Option<Runner> {
    let mut cursor = pipeline.walk();
    let stages: Vec<Node<'_>> = pipeline.named_children(&mut cursor).collect();
    stages.into_iter().find_map(|stage| {
        let command = match stage.kind() {
            "command" => Some(stage),
            "redirected_statement" => stage.child_by_field_name("body"),
            _ => None,
        }?;
        let words = shell::command_words(command, scope.src, &scope.vars);
        stdin_runner(peel(&words))
    })
}

/// Cheap test before the PID-source walk.
fn mentions_pid_source(text: &str) -> bool {
    let lower = text.to_lowercase();
    [
        "pgrep",
        "pidof",
        "ps",
        "process",
        "gps",
        "pid",
        "cat",
        "head",
        "tail",
        "systemctl",
        "get-content",
        "type",
        "lsof",
        "<",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// Cheap test before the combined pipeline/loop check.
fn contains_killer(text: &str) -> bool {
    let lower = text.to_lowercase();
    lower.contains("kill") || lower.contains("stop-process") || lower.contains("spps")
}

/// The `/regex/` parts of an awk program.
fn awk_patterns(program: &str) -> Vec<String> {
    let mut patterns = Vec::new();
    let mut rest = program;
    while let Some(start) = rest.find('/') {
        let after = rest.get(start + 1..).unwrap_or_default();
        match after.find('/') {
            Some(end) => {
                let pattern = after.get(..end).unwrap_or_default();
                if !pattern.is_empty() {
                    patterns.push(pattern.to_owned());
                }
                rest = after.get(end + 1..).unwrap_or_default();
            }
            None => break,
        }
    }
    for quoted in program.split('"').skip(1).step_by(2) {
        if !quoted.is_empty() {
            patterns.push(regex::escape(quoted));
        }
    }
    patterns
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

/// The text of the regions the parser could not read (error nodes, and the parents of
/// nodes it had to invent), joined by newlines.
fn error_regions(root: Node<'_>, src: &str, deadline: Instant) -> String {
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

/// String literals in interpreter code, plus runs of adjacent literals joined by spaces.
pub(crate) fn code_texts(code: &str) -> Vec<String> {
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
fn verb_in(text: &str, host: &Host) -> Option<String> {
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

/// Decodes PowerShell's `-EncodedCommand` (base64 of UTF-16LE).
fn decode_utf16_base64(encoded: &str) -> Option<String> {
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

#[cfg(test)]
mod tests;
