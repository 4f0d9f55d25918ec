//! Why a plugin did not load, in herd's words: [`PluginLoadError`] and the
//! translation of abi_stable's loader errors into it.

use std::path::{Path, PathBuf};

use abi_stable::library::{LibraryError, RootModuleError};

/// Why one plugin did not load. The Display is the report's `reason`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PluginLoadError {
    /// The plugin directory has no `plugin.toml`.
    #[error("manifest missing: {path}")]
    ManifestMissing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// `plugin.toml` could not be read or parsed.
    #[error("bad manifest {path}: line {line}: {message}")]
    BadManifest {
        /// The manifest.
        path: PathBuf,
        /// 1-based line of the error (1 when the error has no position).
        line: usize,
        /// The TOML parser's message.
        message: String,
    },
    /// The manifest's `library` leaves the plugin directory.
    #[error("library path `{library}` in {manifest} must be a file inside the plugin directory")]
    LibraryOutsideDir {
        /// The manifest.
        manifest: PathBuf,
        /// The offending value.
        library: String,
    },
    /// The library file does not exist.
    #[error("library missing: {path}")]
    LibraryMissing {
        /// The expected library path.
        path: PathBuf,
    },
    /// The library or its directory is writable by others.
    #[error(
        "refusing to load {path}: {what} is group- or world-writable (mode {mode:03o}); run `chmod go-w {writable}`"
    )]
    Writable {
        /// The library.
        path: PathBuf,
        /// What is writable: `the library` or `its directory`.
        what: &'static str,
        /// The writable path.
        writable: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The library or a directory it is loaded from is owned by another user.
    #[error(
        "refusing to load {path}: {what} {owned} is owned by uid {owner}, neither you nor root; \
         only your own or root's plugins are loaded"
    )]
    ForeignOwner {
        /// The library.
        path: PathBuf,
        /// What is foreign: `the library` or one of its directories.
        what: &'static str,
        /// The foreign path.
        owned: PathBuf,
        /// Its owner's uid.
        owner: u32,
    },
    /// The dynamic loader refused the file.
    #[error("cannot open {path}: {message}")]
    CannotOpen {
        /// The library.
        path: PathBuf,
        /// The dynamic loader's message (e.g. an undefined symbol, an invalid ELF header).
        message: String,
    },
    /// The library does not export herd's root module.
    #[error(
        "root module symbol missing in {path}: not a herd plugin (export it with herd_plugin_abi::export_plugin!)"
    )]
    RootModuleMissing {
        /// The library.
        path: PathBuf,
    },
    /// The library was built with an incompatible abi_stable.
    #[error("{path} was built with an incompatible abi_stable: {found}")]
    AbiHeader {
        /// The library.
        path: PathBuf,
        /// The header found.
        found: String,
    },
    /// The library was built against another herd plugin ABI version.
    #[error(
        "abi version mismatch in {path}: herd expects {expected}, the plugin was built for {found}; rebuild it against herd-plugin-abi {expected}"
    )]
    AbiVersion {
        /// The library.
        path: PathBuf,
        /// herd's `ABI_VERSION`.
        expected: String,
        /// The library's.
        found: String,
    },
    /// The root module's type layout differs from herd's.
    #[error("type-layout mismatch in {path}: {details}")]
    Layout {
        /// The library.
        path: PathBuf,
        /// What differs, from abi_stable's checker.
        details: String,
    },
    /// The plugin's init returned an error.
    #[error("init failed in {path}: {message}")]
    InitFailed {
        /// The library.
        path: PathBuf,
        /// The plugin's message.
        message: String,
    },
    /// The plugin's init did not return within its deadline (it may still be
    /// running on its own thread; its result is ignored until the daemon restarts).
    #[error(
        "init did not return within {deadline:?} in {path}; herd runs without this plugin until the daemon restarts (fix it, or `herd plugins disable` it)"
    )]
    InitTimedOut {
        /// The library.
        path: PathBuf,
        /// The deadline.
        deadline: std::time::Duration,
    },
    /// The plugin's thread for its init could not be started.
    #[error("cannot start a thread for the init of {path}: {message}")]
    InitThread {
        /// The library.
        path: PathBuf,
        /// The OS error.
        message: String,
    },
    /// The plugin's init panicked.
    #[error("init panicked in {path}")]
    InitPanicked {
        /// The library.
        path: PathBuf,
    },
    /// Any other loader error (C ABI change, unparsable version strings).
    #[error("cannot load {path}: {message}")]
    Other {
        /// The library.
        path: PathBuf,
        /// abi_stable's message.
        message: String,
    },
    /// The config enables a plugin that is not installed.
    #[error("enabled in config but not installed: no directory {path}")]
    NotInstalled {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The plugins directory could not be listed.
    #[error("cannot read the plugins directory {path}: {message}")]
    PluginsDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        message: String,
    },
}

/// Keeps abi_stable's distinctions, in herd's words.
pub(super) fn from_library_error(path: &Path, err: LibraryError) -> PluginLoadError {
    let path = path.to_owned();
    match err {
        LibraryError::OpenError { err, .. } => {
            // dlerror() repeats the path; the reason already names it.
            let message = err.to_string();
            let prefix = format!("{}: ", path.display());
            let message = message
                .strip_prefix(&prefix)
                .map_or(message.clone(), str::to_owned);
            PluginLoadError::CannotOpen { path, message }
        }
        LibraryError::GetSymbolError { .. } => PluginLoadError::RootModuleMissing { path },
        LibraryError::InvalidAbiHeader(found) => PluginLoadError::AbiHeader {
            path,
            found: format!("{found:?}"),
        },
        LibraryError::IncompatibleVersionNumber {
            expected_version,
            actual_version,
            ..
        } => PluginLoadError::AbiVersion {
            path,
            expected: expected_version.to_string(),
            found: actual_version.to_string(),
        },
        LibraryError::AbiInstability(details) => PluginLoadError::Layout {
            path,
            details: layout_summary(&details.to_string()),
        },
        LibraryError::RootModule {
            err: RootModuleError::Returned(message),
            ..
        } => PluginLoadError::InitFailed {
            path,
            message: message.to_string().trim().to_owned(),
        },
        LibraryError::RootModule {
            err: RootModuleError::Unwound,
            ..
        } => PluginLoadError::InitPanicked { path },
        other => PluginLoadError::Other {
            path,
            message: one_paragraph(&other.to_string()),
        },
    }
}

/// abi_stable's layout report prints both full type layouts before the part
/// that matters (`Error:<what>`, `Expected:`, `Found:`); keep only that part.
fn layout_summary(text: &str) -> String {
    let collapse = |s: &str| {
        let joined = s.split_whitespace().collect::<Vec<_>>().join(" ");
        if joined.chars().count() > 160 {
            format!("{}...", joined.chars().take(160).collect::<String>())
        } else {
            joined
        }
    };
    let parts: Vec<String> = text
        .split("\nError:")
        .skip(1)
        .map(|chunk| {
            let what = chunk.lines().next().unwrap_or("").trim();
            let expected = chunk
                .split_once("Expected:\n")
                .and_then(|(_, rest)| rest.split_once("\nFound:\n"))
                .map(|(e, _)| collapse(e));
            let found = chunk
                .split_once("\nFound:\n")
                .map(|(_, rest)| collapse(rest.split("\n\n").next().unwrap_or(rest)));
            match (expected, found) {
                (Some(e), Some(f)) => format!("{what}: expected `{e}`, found `{f}`"),
                _ => what.to_owned(),
            }
        })
        .collect();
    if parts.is_empty() {
        one_paragraph(text)
    } else {
        one_paragraph(&parts.join("; "))
    }
}

/// abi_stable's messages span many lines; a report reason is one line, capped.
pub(super) fn one_paragraph(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.len() <= 600 {
        return joined;
    }
    let mut cut = 600;
    while !joined.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}...", &joined[..cut])
}
