//! `kill` and the PID sources that feed it: `kill -1`, `kill $PPID`, `kill` of a
//! variable or `$(…)` holding host PIDs (`pgrep`, `pidof`, `Get-Process`, `ps | grep`,
//! a host pid file, `systemctl show`, `lsof`), and pipelines or loops that find host
//! PIDs and kill them as a whole (`pgrep python | xargs kill`, `Get-Process | Stop-Process`).

use std::ops::ControlFlow;

use tree_sitter::Node;

use super::wrappers::peel;
use super::{Flow, Judge, Scope, stop};
use crate::host::{Host, names_host_file};
use crate::rules::{self, Pattern, command_name};
use crate::shell::{self, Word, text};
use crate::verdict::Rule;

impl Judge<'_> {
    /// `kill`: everyone (`-1`), the parent (`$PPID`), PIDs of the host, or PowerShell's
    /// `kill -Name` alias.
    pub(super) fn kill(&mut self, args: &[Word], node: Node<'_>, scope: &Scope<'_>) -> Flow {
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
    pub(super) fn pid_source(&self, node: Node<'_>, scope: &Scope<'_>) -> Option<String> {
        let src = scope.src;
        if !node.has_error() && !mentions_pid_source(text(node, src)) {
            return None;
        }
        let mut ps = PsPipe::default();
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
            let hit = source_command(self.host, &name, args, &mut ps);
            match hit {
                Some(target) => {
                    found = Some(target);
                    ControlFlow::Break(())
                }
                None => ControlFlow::Continue(()),
            }
        });
        if found.is_some() || !ps.saw_ps {
            return found;
        }
        ps.patterns.iter().find_map(|(pattern, icase)| {
            let compiled = Pattern::new(pattern, false, *icase);
            let on_cmdline =
                !self.host.cmdline().is_empty() && compiled.matches(self.host.cmdline());
            let on_image = self.host.image_matching(&mut |name| compiled.matches(name));
            (on_cmdline || on_image.is_some())
                .then(|| format!("the processes `ps | grep {pattern}` finds, the host among them"))
        })
    }

    /// A pipeline, loop or redirected statement that both finds host PIDs and kills.
    pub(super) fn combined(&mut self, node: Node<'_>, scope: &Scope<'_>) -> Flow {
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
}

/// What a `ps | grep` pipeline has shown so far: whether `ps` ran, and the patterns
/// `grep` or `awk` select with (and whether case is ignored).
#[derive(Debug, Default)]
struct PsPipe {
    saw_ps: bool,
    patterns: Vec<(String, bool)>,
}

/// What the command `name args` (wrappers peeled) selects when it is a PID source that
/// includes the host; a `ps`, `grep` or `awk` adds to `ps` instead.
fn source_command(host: &Host, name: &str, args: &[Word], ps: &mut PsPipe) -> Option<String> {
    match name {
        "pgrep" => rules::pgrep_target(args, host).map(|(_, target)| target),
        "pidof" => rules::pidof_target(args, host),
        "get-process" | "gps" => rules::powershell_names(args, true).iter().find_map(|n| {
            rules::names_host_image(host, n)
                .map(|image| format!("the {n} processes, the host image {image} among them"))
        }),
        "cat" | "head" | "tail" | "less" | "more" | "type" | "get-content" => args
            .iter()
            .filter(|w| !w.value().starts_with('-'))
            .find_map(|w| {
                names_host_file(host, w.value())
                    .map(|name| format!("the process in pid file {} (the host {name})", w.value()))
            }),
        "systemctl" => systemctl_show(host, args),
        "lsof" => lsof_target(host, args),
        "ps" if args.iter().any(|w| {
            let v = w.value();
            v.contains("ppid") && !v.starts_with("--ppid")
        }) =>
        {
            // `ps -o ppid= -p $$`: the parent of this shell is the host.
            Some("the parent process, which is the host or the shell it started".to_owned())
        }
        "ps" => {
            ps.saw_ps = true;
            let names: Vec<&str> = args
                .iter()
                .map(Word::value)
                .filter(|v| !v.starts_with('-'))
                .collect();
            names
                .iter()
                .find_map(|n| host.image_named(n))
                .map(|image| format!("the {image} processes `ps` lists, the host among them"))
        }
        "grep" | "egrep" | "fgrep" | "rg" => {
            if !args.iter().any(|w| {
                w.value() == "-v" || w.value().starts_with("-v") && !w.value().starts_with("--")
            }) {
                let icase = args.iter().any(|w| w.value() == "-i");
                let positional = args.iter().map(Word::value).find(|v| !v.starts_with('-'));
                ps.patterns
                    .extend(positional.map(|p| (p.to_owned(), icase)));
            }
            None
        }
        "awk" | "gawk" | "mawk" | "nawk" => {
            for program in args.iter().map(Word::value).filter(|v| !v.starts_with('-')) {
                ps.patterns
                    .extend(awk_patterns(program).into_iter().map(|p| (p, false)));
            }
            None
        }
        _ => None,
    }
}

/// `systemctl show UNIT…` of one of the host's units.
fn systemctl_show(host: &Host, args: &[Word]) -> Option<String> {
    let positionals: Vec<&str> = args
        .iter()
        .map(Word::value)
        .filter(|v| !v.starts_with('-'))
        .collect();
    (positionals.first() == Some(&"show"))
        .then(|| positionals.iter().skip(1).find_map(|u| host.unit_named(u)))
        .flatten()
        .map(|unit| format!("the main process of the host's service {unit}"))
}

/// `lsof` of the host's binary, or of a name prefix the host's image has.
fn lsof_target(host: &Host, args: &[Word]) -> Option<String> {
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
        if let Some(image) = candidate.and_then(|c| host.image_named(&c)) {
            hit = Some(format!(
                "the processes `lsof` finds for {image}, the host among them"
            ));
            break;
        }
    }
    hit
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
pub(super) fn awk_patterns(program: &str) -> Vec<String> {
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
