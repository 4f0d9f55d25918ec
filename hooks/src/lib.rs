//! herd-hooks: the output seam every route passes through — plugin hooks first,
//! the secret redactor last.
//!
//! Owns: the hook chain (`HookChain`), the secret redactor (`Redactor`,
//! `StreamRedactor`), the pipeline that runs one then the other (`Pipeline`), and
//! plugin discovery and loading with a per-plugin load report (`load_plugins`,
//! `PluginReport`).
//! Never: spawns or signals processes, or lets output leave without redaction.
//! Only this crate calls `dlopen` (through abi_stable), in the loader module.
//!
//! Features: `plugins` (default) adds plugin discovery and loading (abi_stable,
//! `dlopen`); without it the pipeline runs the hooks a host hands it, then the
//! redactor.
//! Depended on by: `herd-core` (every output route calls `Pipeline::apply`) and
//! `herd-cli` (`herd plugins list`).
//!
//! ```
//! use herd_hooks::{OutputContext, Pipeline, Route, Window};
//!
//! let pipeline = Pipeline::redaction_only();
//! let ctx = OutputContext {
//!     route: Route::Poll,
//!     command: "deploy.sh",
//!     return_code: None,
//!     owner_task_id: "task-1",
//!     session_id: "proc_0123456789ab",
//!     backend: "local",
//!     partial: false,
//! };
//! let output = "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 used";
//! let out = pipeline.show(&ctx, Window::all(output));
//! assert_eq!(out, "token ghp_ab...6789 used");
//! // The last 20 characters start inside the token: it is masked all the same
//! // (redacted first, then cut).
//! let tail = pipeline.show(&ctx, Window::last_chars(output, 20));
//! assert_eq!(tail, "n ghp_ab...6789 used");
//! ```

mod error;
#[cfg(feature = "plugins")]
mod loader;
mod pipeline;
mod readout;
mod redact;
mod window;

pub use error::Error;
#[cfg(feature = "plugins")]
pub use loader::{
    INIT_DEADLINE, MANIFEST_FILE, PluginHook, PluginLoadError, PluginManifest, PluginReport,
    PluginStatus, abi_version, check_plugin, check_plugins, load_plugins, plugin_hook,
    read_manifest, resolve_plugin, start_plugins,
};
pub use pipeline::{
    DEFAULT_BUDGET, Hook, HookChain, HookError, HookStart, HookStats, Pipeline, RouteCounts,
    SUPPRESS_AFTER_TIMEOUT,
};
pub use readout::{BLOCK_BYTES, Extent, LogText, Piece, ShownBlocks, blocks_end};
pub use redact::{
    KEY_LOOKBACK_BYTES, KeyIndex, KeyLines, RedactMode, Redactor, RedactorConfig, StreamRedactor,
    key_open_at_end, key_open_in_log, key_state_matters, mask, recognised_table,
};
pub use window::{LINE_CONTEXT_BYTES, Shown, ShownStream, Stored, Window};

/// The route by which output leaves herd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
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

impl Route {
    /// The route's stable name, as plugins see it (`"poll"`, `"list_preview"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Foreground => "foreground",
            Route::Poll => "poll",
            Route::Log => "log",
            Route::Wait => "wait",
            Route::Kill => "kill",
            Route::ListPreview => "list_preview",
            Route::Completion => "completion",
            Route::Heartbeat => "heartbeat",
            Route::Watch => "watch",
        }
    }
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
    /// The owner (task or agent) the output belongs to, never whoever asks.
    pub owner_task_id: &'a str,
    /// The session id.
    pub session_id: &'a str,
    /// The backend kind, empty when unknown.
    pub backend: &'a str,
    /// The text is the unfinished last line of a stream, flushed because the
    /// stream went idle or ended (a prompt, a progress bar); its rest, if any,
    /// comes in a later call.
    pub partial: bool,
}
