//! The hooks room: the output pipeline (plugin and transform hooks first, the
//! redactor last) behind a private field, with a narrow API named by what the
//! registry's routes need: show a window of output for a session's owner, show or
//! redact a command line, check stored text again, stream a log, read one out in
//! blocks.
//!
//! Only this room reads the pipeline. The config a registry is built with carries
//! it, so the room keeps that config as given (and answers
//! [`Registry::config`] from it); every other room reads its settings from
//! [`Settings`](super::settings::Settings), which has every field but the pipeline.
//! The room holds no lock and owns no thread: its calls run on the caller's thread.
//! Hooks may be slow (a plugin, up to its time limit), so callers call it before a
//! lock, never under one, and off the runtime's workers where a hook may run (the
//! finish choke point runs on the blocking pool when [`Hooks::runs_hooks`]).
//!
//! The handle is cheap to clone: a long-lived reader of a log (a read-out, a
//! follower's stream) keeps one.

use std::borrow::Cow;
use std::sync::Arc;

use herd_hooks::{
    OutputContext, Pipeline, RedactMode, Shown, ShownBlocks, ShownStream, Stored, Window,
};

use super::Registry;
use crate::config::RegistryConfig;

/// The hooks room: the output pipeline and the config it came in.
#[derive(Debug, Clone)]
pub(crate) struct Hooks {
    /// Invariant: read by this room alone (its `pipeline` field is the seam every
    /// route goes through).
    config: Arc<RegistryConfig>,
}

impl Hooks {
    /// The room for the config a registry is built with.
    pub(super) fn new(config: RegistryConfig) -> Hooks {
        Hooks {
            config: Arc::new(config),
        }
    }

    /// A room with no hooks and the built-in redactor (tests of other rooms).
    #[cfg(test)]
    pub(super) fn redaction_only() -> Hooks {
        Hooks::new(RegistryConfig::default())
    }

    fn pipeline(&self) -> &Arc<Pipeline> {
        &self.config.pipeline
    }

    /// `window` of a session's output as it leaves herd by `ctx`'s route for
    /// `ctx`'s owner: through the hooks, then redacted. Hooks may be slow: never
    /// under a lock.
    pub(super) fn show(&self, ctx: &OutputContext<'_>, window: Window<'_>) -> Shown {
        self.pipeline().show(ctx, window)
    }

    /// Whether any hook runs on output (one may be slow: a plugin, up to its time
    /// limit); without, showing output is the redactor's CPU work alone.
    pub(super) fn runs_hooks(&self) -> bool {
        !self.pipeline().chain().is_empty()
    }

    /// A command line as it may leave herd (no hooks run on commands).
    pub(super) fn show_command(&self, command: &str) -> Shown {
        self.pipeline().show_command(command)
    }

    /// The first `n_chars` characters of a command line as it may leave herd.
    pub(super) fn show_command_head(&self, command: &str, n_chars: usize) -> Shown {
        self.pipeline().show_command_head(command, n_chars)
    }

    /// A command line redacted, for a record or an error message.
    pub(super) fn redact_command<'c>(&self, command: &'c str) -> Cow<'c, str> {
        self.pipeline().redact_command(command)
    }

    /// One line of `command`'s output redacted, no hooks run: what a ready
    /// pattern is matched against.
    pub(super) fn redact_line<'t>(&self, command: &str, line: &'t str) -> Cow<'t, str> {
        self.pipeline().redactor().redact_output(command, line)
    }

    /// `output` of `command` redacted as it follows `before` (the log's text before
    /// it, a private-key block open at its start when `key_open`); no hooks run:
    /// what a receipt stores.
    pub(super) fn redact_output_after(
        &self,
        command: &str,
        before: &str,
        key_open: bool,
        output: &str,
    ) -> String {
        let mode = RedactMode::for_command(command);
        self.pipeline()
            .redactor()
            .redact_after_state(before, key_open, output, mode)
    }

    /// A stored command line, redacted again (see [`Pipeline::recheck_command`]).
    pub(super) fn recheck_command(&self, stored: Stored) -> Shown {
        self.pipeline().recheck_command(stored)
    }

    /// Stored output of `command`, redacted again (see [`Pipeline::recheck_output`]).
    pub(super) fn recheck_output(&self, command: &Shown, stored: Stored) -> Shown {
        self.pipeline().recheck_output(command, stored)
    }

    /// A stream of output as it leaves by `ctx`'s route: hooks per batch of lines,
    /// then a redactor that carries its state from chunk to chunk.
    pub(super) fn show_stream(&self, ctx: &OutputContext<'_>) -> ShownStream {
        Pipeline::show_stream(self.pipeline(), ctx)
    }

    /// Whether `command`'s log can be read out in blocks (no hooks, the built-in
    /// redactor alone; see [`Pipeline::shows_log_blocks`]).
    pub(super) fn shows_log_blocks(&self, command: &str) -> bool {
        self.pipeline().shows_log_blocks(command)
    }

    /// The whole blocks of `text`, redacted on up to `threads` threads (see
    /// [`Pipeline::show_log_blocks`]); `None` when the log is not read out in blocks.
    pub(super) fn show_log_blocks<T: herd_hooks::LogText>(
        &self,
        command: &str,
        text: T,
        key_open: bool,
        at_end: bool,
        threads: usize,
    ) -> Option<ShownBlocks<T>> {
        self.pipeline()
            .show_log_blocks(command, text, key_open, at_end, threads)
    }

    /// One changed block of a log shown again from its key state (see
    /// [`Pipeline::show_log_block`]); `None` when it is not text.
    pub(super) fn show_log_block<'t>(
        &self,
        command: &str,
        block: &'t [u8],
        key_open: bool,
    ) -> Option<Cow<'t, str>> {
        self.pipeline().show_log_block(command, block, key_open)
    }
}

impl Registry {
    /// The configuration this registry was built with (its output pipeline
    /// included: `pipeline.chain()` names the hooks and counts their runs).
    pub fn config(&self) -> &RegistryConfig {
        &self.inner.hooks.config
    }
}
