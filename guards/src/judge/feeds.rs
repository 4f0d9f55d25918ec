//! Text one command feeds another: a pipeline stage writing into a shell
//! (`echo 'pkill x' | sh`, `cat x.sh | bash`), into `xargs` (`echo python | xargs pkill`),
//! and heredocs read by a shell or interpreter or live with expansions.

use std::ops::ControlFlow;
use std::time::Instant;

use tree_sitter::Node;

use super::wrappers::{Runner, peel, stdin_runner};
use super::{Flow, Judge, Scope};
use crate::rules::command_name;
use crate::shell::{self, Word, text};

impl Judge<'_> {
    /// Text a stage writes into a later stage that is a shell (`echo 'pkill x' | sh`,
    /// `grep … cmds.txt | bash`, `cat x.sh | sh`).
    pub(super) fn pipeline(&mut self, node: Node<'_>, scope: &Scope<'_>, depth: usize) -> Flow {
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
    pub(super) fn heredoc(&mut self, node: Node<'_>, scope: &Scope<'_>, depth: usize) -> Flow {
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
