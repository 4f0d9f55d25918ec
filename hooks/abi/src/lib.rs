//! herd-plugin-abi: the stable interface herd transform plugins compile against.
//!
//! Owns: the abi_stable root module ([`PluginModule`]), the transform entry point
//! and its FFI-safe input ([`HookInput`]), the ABI version ([`ABI_VERSION`]), the
//! panic-catching helper ([`catch_panic`]) and the [`export_plugin!`] macro that
//! ties them together.
//! Never: depends on any other herd crate; a plugin links this (and abi_stable) and
//! nothing else, so a plugin builds without herd's source tree.
//! Depended on by: `herd-hooks` (the loader) and every plugin.
//!
//! # Writing a plugin in five minutes
//!
//! A plugin is a `cdylib` crate that rewrites the output herd is about to show
//! (poll answers, logs, completion notices, ...). herd runs every enabled
//! plugin in order, then masks secrets in whatever the plugins returned, so a
//! plugin can never leak a secret by accident.
//!
//! **1. Create the crate.**
//!
//! ```toml
//! # Cargo.toml
//! [package]
//! name = "herd-plugin-shout"
//! version = "0.1.0"
//! edition = "2024"
//!
//! [lib]
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! herd-plugin-abi = "0.1"   # or { git = "...", path = "..." }
//! abi_stable = "0.11.3"
//! ```
//!
//! **2. Write the transform** and export it with [`export_plugin!`]. The
//! transform returns `Ok(None)` to leave the output unchanged, `Ok(Some(text))`
//! to replace it, or `Err(message)` to be skipped for this output (herd logs the
//! message once and passes the output on unchanged). A panic is caught for you.
//!
//! ```
//! use herd_plugin_abi::HookInput;
//!
//! fn transform(input: &HookInput<'_>) -> Result<Option<String>, String> {
//!     if input.route.as_str() == "completion" {
//!         return Ok(Some(input.output.as_str().to_uppercase()));
//!     }
//!     Ok(None)
//! }
//!
//! herd_plugin_abi::export_plugin! {
//!     name: "shout",
//!     version: env!("CARGO_PKG_VERSION"),
//!     init: || Ok(()),
//!     transform: transform,
//! }
//! # fn main() {}
//! ```
//!
//! `init` runs once when herd loads the library, on a thread of its own with a
//! 5 s deadline (the daemon serves meanwhile; output your plugin would transform
//! waits for it). Return `Err(message)` to refuse to load (for example when a
//! required environment variable is missing), and herd lists the plugin as
//! `failed` with `init failed: <message>`; an init that misses the deadline is
//! `failed` until the daemon restarts.
//!
//! **3. Build it:** `cargo build --release` gives `target/release/libherd_plugin_shout.so`.
//!
//! **4. Install it** under the herd home, next to a manifest:
//!
//! ```text
//! <home>/plugins/shout/plugin.toml
//! <home>/plugins/shout/libherd_plugin_shout.so
//! ```
//!
//! ```toml
//! # plugin.toml
//! name = "shout"
//! version = "0.1.0"
//! library = "libherd_plugin_shout.so"
//! description = "Upper-cases completion notices"
//! order = 50        # optional; lower runs first, then by name
//! ```
//!
//! The directory and the library must not be group- or world-writable
//! (`chmod go-w`); herd refuses to load them otherwise.
//!
//! **5. Enable it:** `herd plugins enable shout`, then `herd plugins list` shows
//! it as `loaded` (or `failed` with the loader's reason: wrong ABI version,
//! missing symbol, init error, ...).
//!
//! # Compatibility
//!
//! herd checks, when loading, abi_stable's own header, then [`ABI_VERSION`]
//! (before 1.0 the minor must match; after, the major must match and the
//! plugin's minor must be at least herd's), then the full type layout of
//! [`PluginModule`]. A mismatch is reported, never undefined behaviour.
//! Libraries stay loaded until the process exits (abi_stable never unloads).

use std::panic::{AssertUnwindSafe, catch_unwind};

use abi_stable::StableAbi;
use abi_stable::library::RootModule;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{ROption, RResult, RStr, RString};

pub use abi_stable;

/// The version of this interface. herd refuses plugins built for an incompatible one.
///
/// It is deliberately separate from the crate's package version: it changes only
/// when [`PluginModule`] or [`HookInput`] change.
pub const ABI_VERSION: &str = "0.2.0";

/// This crate's package version: what a plugin's `Cargo.toml` asks for
/// (`herd-plugin-abi = "<major>.<minor>"`), as `herd plugins new` writes it.
pub const CRATE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What a transform returns across the ABI: `ROk(RNone)` unchanged,
/// `ROk(RSome(text))` a replacement, `RErr(message)` a failure.
pub type HookResult = RResult<ROption<RString>, RString>;

/// The output a transform sees and what herd knows about it.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct HookInput<'a> {
    /// The route the output leaves by: `foreground`, `poll`, `log`, `wait`,
    /// `kill`, `list_preview`, `completion`, `heartbeat` or `watch`. A string, so
    /// herd can add routes without breaking the ABI.
    pub route: RStr<'a>,
    /// The session's command line.
    pub command: RStr<'a>,
    /// The text to transform (already transformed by earlier plugins), never
    /// empty: the window a route shows (a tail, a page, a preview), or on a
    /// streamed route (follow, `run --wait`, attach) one batch of whole lines, or
    /// the unfinished last line when `partial` is set.
    pub output: RStr<'a>,
    /// The exit code; `RNone` while the process runs.
    pub return_code: ROption<i32>,
    /// The task (turn or agent) that owns the session.
    pub owner_task_id: RStr<'a>,
    /// The session id (`proc_` + 12 hex).
    pub session_id: RStr<'a>,
    /// The backend kind (`local`, ...); empty when unknown.
    pub backend: RStr<'a>,
    /// `output` is the unfinished last line of a streamed route, flushed because
    /// the stream went idle or ended (a prompt, a progress bar); the rest of the
    /// line, if any, comes in a later call. Otherwise `output` ends at a line end
    /// or is the whole window.
    pub partial: bool,
}

/// The root module every plugin library exports (through [`export_plugin!`]).
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef, prefix_fields = PluginModulePrefix)))]
#[sabi(missing_field(panic))]
pub struct PluginModule {
    /// The plugin's name.
    pub name: RStr<'static>,
    /// The plugin's own version.
    pub version: RStr<'static>,
    /// The transform entry point. Must not unwind: use [`catch_panic`].
    #[sabi(last_prefix_field)]
    pub transform: extern "C" fn(input: HookInput<'_>) -> HookResult,
}

impl std::fmt::Debug for PluginModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginModule")
            .field("name", &self.name)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl RootModule for PluginModuleRef {
    abi_stable::declare_root_module_statics! {PluginModuleRef}
    const BASE_NAME: &'static str = "herd_plugin";
    const NAME: &'static str = "herd_plugin";
    const VERSION_STRINGS: VersionStrings = VersionStrings::new(ABI_VERSION);
}

/// Runs a plugin body, turning a panic into `RErr("panicked: <message> at <file:line>")`.
///
/// A panic must never unwind out of an `extern "C"` function: Rust aborts the
/// whole process (herd's daemon included) when it does. [`export_plugin!`] wraps
/// your transform with this; call it yourself only if you write the entry point
/// by hand.
///
/// A panic caught here is not printed: the plugin's own copy of the standard
/// library would otherwise write it (and a backtrace, under `RUST_BACKTRACE`) to
/// the daemon's log on every call. herd counts it as a panic and logs it once a
/// minute. Panics elsewhere in the plugin are printed as before.
pub fn catch_panic<F>(body: F) -> HookResult
where
    F: FnOnce() -> Result<Option<String>, String>,
{
    quiet_panics::install();
    let result = quiet_panics::QUIET.with(|quiet| {
        quiet.set(true);
        let result = catch_unwind(AssertUnwindSafe(body));
        quiet.set(false);
        result
    });
    match result {
        Ok(Ok(Some(text))) => RResult::ROk(ROption::RSome(RString::from(text))),
        Ok(Ok(None)) => RResult::ROk(ROption::RNone),
        Ok(Err(message)) => RResult::RErr(RString::from(message)),
        Err(payload) => {
            let message = if let Some(s) = payload.downcast_ref::<&str>() {
                (*s).to_owned()
            } else if let Some(s) = payload.downcast_ref::<String>() {
                s.clone()
            } else {
                "non-string panic payload".to_owned()
            };
            let at = quiet_panics::LOCATION
                .with(std::cell::RefCell::take)
                .map(|at| format!(" at {at}"))
                .unwrap_or_default();
            RResult::RErr(RString::from(format!("panicked: {message}{at}")))
        }
    }
}

/// A panic hook that stays silent for panics [`catch_panic`] catches, keeping
/// their location, and hands every other panic to the hook it replaced.
mod quiet_panics {
    use std::cell::{Cell, RefCell};
    use std::sync::Once;

    thread_local! {
        /// Inside `catch_panic` on this thread.
        pub(crate) static QUIET: Cell<bool> = const { Cell::new(false) };
        /// Where the last quiet panic on this thread happened.
        pub(crate) static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
    }

    /// Installs the hook once per library (each plugin has its own std).
    pub(crate) fn install() {
        static INSTALLED: Once = Once::new();
        INSTALLED.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if QUIET.with(Cell::get) {
                    let at = info
                        .location()
                        .map(|l| format!("{}:{}", l.file(), l.line()));
                    LOCATION.with(|slot| *slot.borrow_mut() = at);
                } else {
                    previous(info);
                }
            }));
        });
    }
}

/// An init error carried across the ABI as the root module loader's error.
#[derive(Debug)]
pub struct InitError(pub String);

impl std::fmt::Display for InitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InitError {}

/// Exports a plugin: its name, version, an `init` run once at load, and the
/// transform.
///
/// - `name`, `version`: `&'static str`.
/// - `init`: `fn() -> Result<(), String>` (a closure without captures is fine);
///   an `Err` makes herd list the plugin as failed with `init failed: <message>`;
///   a panic is caught by abi_stable and listed as `init panicked`.
/// - `transform`: `fn(&HookInput<'_>) -> Result<Option<String>, String>`; it runs
///   inside [`catch_panic`].
///
/// The crate using this macro must depend on `abi_stable` directly (the
/// `#[export_root_module]` attribute names it).
#[macro_export]
macro_rules! export_plugin {
    (
        name: $name:expr,
        version: $version:expr,
        init: $init:expr,
        transform: $transform:path $(,)?
    ) => {
        extern "C" fn __herd_plugin_transform(input: $crate::HookInput<'_>) -> $crate::HookResult {
            $crate::catch_panic(|| $transform(&input))
        }

        #[$crate::abi_stable::export_root_module]
        fn __herd_plugin_root()
        -> ::core::result::Result<$crate::PluginModuleRef, $crate::abi_stable::std_types::RBoxError>
        {
            let init: fn() -> ::core::result::Result<(), ::std::string::String> = $init;
            init().map_err(|message| {
                $crate::abi_stable::std_types::RBoxError::new($crate::InitError(message))
            })?;
            ::core::result::Result::Ok(
                $crate::abi_stable::prefix_type::PrefixTypeTrait::leak_into_prefix(
                    $crate::PluginModule {
                        name: $crate::abi_stable::std_types::RStr::from_str($name),
                        version: $crate::abi_stable::std_types::RStr::from_str($version),
                        transform: __herd_plugin_transform,
                    },
                ),
            )
        }
    };
}

#[cfg(test)]
mod tests;
