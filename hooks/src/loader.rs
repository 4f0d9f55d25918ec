//! Plugin discovery and loading, with a reason for every plugin that does not load.
//!
//! Layout: `<plugins_dir>/<name>/plugin.toml` (name, version, library,
//! description, optional order) next to the library it names. Plugins are opt-in:
//! only names in the caller's `enabled` list are loaded; the rest are reported as
//! `disabled`. The caller (herd-cli) owns the config that holds that list.
//!
//! Each library is loaded by its own path: `lib_header_from_path` then
//! `init_root_module` on that header. abi_stable's `RootModule::load_from*`
//! functions (directory *and* file variants) cache one module per interface type
//! in a static, so with them the second plugin would silently be the first one
//! again (abi_stable_crates#92).
//!
//! Invariant: a plugin that fails to load never stops the host and never stops
//! the other plugins; it becomes a `failed` row whose reason is the loader's own
//! error (missing library, `dlopen` message, missing root module, ABI version,
//! type layout, init error or panic, bad manifest with its line).
//!
//! Invariant: a library in a group- or world-writable file or directory is never
//! opened: anyone who can write there could make herd run their code.
//!
//! Libraries are never unloaded (abi_stable's rule); reloading needs a restart.

use std::cmp::Ordering;
use std::fmt;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use abi_stable::library::{LibHeader, RootModule, lib_header_from_path};
use abi_stable::sabi_types::{VersionNumber, VersionStrings};
use abi_stable::std_types::{ROption, RResult, RStr};
use herd_plugin_abi::{ABI_VERSION, HookInput, HookResult, PluginModuleRef};
use serde::{Deserialize, Serialize};

use crate::OutputContext;
use crate::pipeline::{Hook, HookChain, HookError};

mod error;
mod start;

pub use self::error::PluginLoadError;
use self::error::from_library_error;
pub use self::start::INIT_DEADLINE;

/// The manifest file name inside a plugin directory.
pub const MANIFEST_FILE: &str = "plugin.toml";

/// `plugin.toml`: what a plugin directory declares about itself.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct PluginManifest {
    /// The plugin's name (what `herd plugins enable` takes).
    pub name: String,
    /// The plugin's version.
    pub version: String,
    /// The library file, relative to the plugin directory.
    pub library: String,
    /// One line saying what the plugin does.
    #[serde(default)]
    pub description: String,
    /// Position in the chain: lower runs first; ties by name. Default 100.
    #[serde(default)]
    pub order: Option<i64>,
}

/// A plugin's state in the load report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum PluginStatus {
    /// Loaded and in the hook chain.
    Loaded,
    /// Enabled and in the hook chain, its init still running on its own thread.
    Starting,
    /// Enabled, and its library checks out (owner, mode, ABI version, layout); its
    /// init has not run here: the daemon runs it when it starts.
    Valid,
    /// Enabled but could not be loaded; `reason` says why.
    Failed,
    /// Installed but not enabled in config.
    Disabled,
}

impl PluginStatus {
    /// `loaded`, `starting`, `valid`, `failed` or `disabled`.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginStatus::Loaded => "loaded",
            PluginStatus::Starting => "starting",
            PluginStatus::Valid => "valid",
            PluginStatus::Failed => "failed",
            PluginStatus::Disabled => "disabled",
        }
    }
}

/// One row of `herd plugins list`: every plugin found (or enabled) gets one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginReport {
    /// The plugin's name (the manifest's, else the directory's).
    pub name: String,
    /// The manifest's version; empty when the manifest could not be read.
    pub version: String,
    /// One line from the manifest; empty when unknown.
    pub description: String,
    /// The library path (the plugin directory when the manifest names none).
    pub path: PathBuf,
    /// `loaded`, `failed` or `disabled`.
    pub status: PluginStatus,
    /// Why it failed or is disabled; `None` when loaded.
    pub reason: Option<String>,
}

/// A loaded plugin: the root module of one library, usable as a [`Hook`].
#[derive(Clone)]
pub struct PluginHook {
    name: String,
    version: String,
    path: PathBuf,
    module: PluginModuleRef,
}

impl fmt::Debug for PluginHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginHook")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl PluginHook {
    /// The name the library reports.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The version the library reports.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The library's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// One raw call into the plugin with an otherwise empty context (route
    /// `poll`); for benchmarks and diagnostics.
    pub fn call_raw(&self, output: &str) -> HookResult {
        (self.module.transform())(HookInput {
            route: RStr::from_str("poll"),
            command: RStr::from_str(""),
            output: RStr::from_str(output),
            return_code: ROption::RNone,
            owner_task_id: RStr::from_str(""),
            session_id: RStr::from_str(""),
            backend: RStr::from_str(""),
            partial: false,
        })
    }
}

impl Hook for PluginHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn transform(
        &self,
        ctx: &OutputContext<'_>,
        output: &str,
    ) -> Result<Option<String>, HookError> {
        // The guide's contract: a plugin is never called with empty text (a window
        // of a session that has printed nothing yet, or whose bytes are still on
        // their way from its log to its tail).
        if output.is_empty() {
            return Ok(None);
        }
        let input = HookInput {
            route: RStr::from_str(ctx.route.as_str()),
            command: RStr::from_str(ctx.command),
            output: RStr::from_str(output),
            return_code: ctx.return_code.into(),
            owner_task_id: RStr::from_str(ctx.owner_task_id),
            session_id: RStr::from_str(ctx.session_id),
            backend: RStr::from_str(ctx.backend),
            partial: ctx.partial,
        };
        match (self.module.transform())(input) {
            RResult::ROk(ROption::RNone) => Ok(None),
            RResult::ROk(ROption::RSome(text)) => Ok(Some(text.into_string())),
            // `catch_panic` reports a caught panic as `panicked: <message>`.
            RResult::RErr(message) => Err(match message.as_str().strip_prefix("panicked: ") {
                Some(panic) => HookError::panicked(panic),
                None => HookError::new(message.into_string()),
            }),
        }
    }
}

/// Loads one plugin library by its own path.
///
/// Checks that the file exists and that neither it nor its directory is group- or
/// world-writable, then opens it and checks abi_stable's header, the ABI version
/// and the root module's type layout, and runs the plugin's init.
///
/// # Errors
///
/// One `PluginLoadError` naming the cause (see its variants).
pub fn plugin_hook(path: &Path) -> Result<PluginHook, PluginLoadError> {
    let header = open_header(path)?;
    let module = header
        .init_root_module::<PluginModuleRef>()
        .map_err(|err| from_library_error(path, err))?;
    Ok(PluginHook {
        name: module.name().as_str().to_owned(),
        version: module.version().as_str().to_owned(),
        path: path.to_owned(),
        module,
    })
}

/// Checks one plugin library as [`plugin_hook`] does (the file's owner and mode,
/// abi_stable's header, the ABI version, the root module's type layout) without
/// running the plugin's init, so a plugin whose init hangs cannot hang the check.
///
/// The library is opened (`dlopen`), so its static constructors run; it stays
/// loaded until the process exits.
///
/// # Errors
///
/// One `PluginLoadError` naming the cause (see its variants).
pub fn check_plugin(path: &Path) -> Result<(), PluginLoadError> {
    let header = open_header(path)?;
    header
        .ensure_layout::<PluginModuleRef>()
        .map_err(|err| from_library_error(path, err))
}

/// Trust checks, `dlopen`, abi_stable's header and herd's ABI version rule.
fn open_header(path: &Path) -> Result<&'static LibHeader, PluginLoadError> {
    let meta = fs::metadata(path).map_err(|_| PluginLoadError::LibraryMissing {
        path: path.to_owned(),
    })?;
    check_trusted(path, path, "the library", &meta)?;
    let real = fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    if let Some(dir) = real.parent()
        && let Ok(dir_meta) = fs::metadata(dir)
    {
        check_trusted(path, dir, "its directory", &dir_meta)?;
    }
    let header = lib_header_from_path(&real).map_err(|err| from_library_error(path, err))?;
    check_abi_version(path, header.version_strings())?;
    Ok(header)
}

/// herd's own version rule, stricter than abi_stable's (which accepts a newer
/// minor before 1.0): before 1.0 major and minor must be equal; from 1.0 the major
/// must be equal and the plugin's minor at least herd's.
fn check_abi_version(path: &Path, found: VersionStrings) -> Result<(), PluginLoadError> {
    let mismatch = |found: String| PluginLoadError::AbiVersion {
        path: path.to_owned(),
        expected: ABI_VERSION.to_owned(),
        found,
    };
    let ours = VersionNumber::new(<PluginModuleRef as RootModule>::VERSION_STRINGS)
        .expect("ABI_VERSION is a valid version number, checked by the abi crate's tests");
    let theirs =
        VersionNumber::new(found).map_err(|_| mismatch(found.version.as_str().to_owned()))?;
    let compatible = if ours.major == 0 {
        theirs.major == 0 && theirs.minor == ours.minor
    } else {
        theirs.major == ours.major && theirs.minor >= ours.minor
    };
    if compatible {
        Ok(())
    } else {
        Err(mismatch(theirs.to_string()))
    }
}

/// `checked` (the library or a directory it loads from) is owned by this user or
/// root, and writable by no one else: otherwise another user could swap the code
/// herd runs.
fn check_trusted(
    library: &Path,
    checked: &Path,
    what: &'static str,
    meta: &fs::Metadata,
) -> Result<(), PluginLoadError> {
    let owner = meta.uid();
    let me = nix::unistd::geteuid().as_raw();
    if owner != 0 && owner != me {
        return Err(PluginLoadError::ForeignOwner {
            path: library.to_owned(),
            what,
            owned: checked.to_owned(),
            owner,
        });
    }
    check_not_writable(library, checked, what, meta.mode())
}

fn check_not_writable(
    library: &Path,
    checked: &Path,
    what: &'static str,
    mode: u32,
) -> Result<(), PluginLoadError> {
    if mode & 0o022 != 0 {
        return Err(PluginLoadError::Writable {
            path: library.to_owned(),
            what,
            writable: checked.to_owned(),
            mode: mode & 0o777,
        });
    }
    Ok(())
}

/// Reads and parses `dir/plugin.toml`.
///
/// # Errors
///
/// `ManifestMissing` when there is none, `BadManifest` with the line of the first
/// TOML error.
pub fn read_manifest(dir: &Path) -> Result<PluginManifest, PluginLoadError> {
    let path = dir.join(MANIFEST_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(PluginLoadError::ManifestMissing { path });
        }
        Err(err) => {
            return Err(PluginLoadError::BadManifest {
                path,
                line: 1,
                message: err.to_string(),
            });
        }
    };
    toml::from_str::<PluginManifest>(&text).map_err(|err| {
        let line = err.span().map_or(1, |span| {
            text[..span.start.min(text.len())].matches('\n').count() + 1
        });
        PluginLoadError::BadManifest {
            path,
            line,
            message: err.message().to_owned(),
        }
    })
}

/// The library path a manifest names, refusing anything outside the plugin dir.
fn library_path(dir: &Path, manifest: &PluginManifest) -> Result<PathBuf, PluginLoadError> {
    let rel = Path::new(&manifest.library);
    let inside =
        !manifest.library.is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if !inside {
        return Err(PluginLoadError::LibraryOutsideDir {
            manifest: dir.join(MANIFEST_FILE),
            library: manifest.library.clone(),
        });
    }
    Ok(dir.join(rel))
}

/// Finds the plugins under `plugins_dir`, loads the `enabled` ones, and reports
/// on every plugin found (and every enabled name that is not installed).
///
/// A plugin is enabled when its directory name or its manifest name is in
/// `enabled`. The chain holds the loaded plugins ordered by the manifest's
/// `order` (default 100), then name. Never fails: problems are rows in the report
/// (`failed` with a reason), logged at `warn`.
///
/// Call it with an empty `enabled` list to list what is installed without
/// opening any library (every row is then `disabled`).
///
/// # Caveats
///
/// Each plugin's init runs on the calling thread, without a deadline: a host that
/// must not wait on a plugin uses [`start_plugins`]. A library, once opened, stays
/// loaded until the process exits (abi_stable never unloads), so replacing a
/// plugin needs a daemon restart. A plugin that aborts the process or corrupts
/// memory cannot be contained; the ABI's panic helper covers unwinding panics only.
pub fn load_plugins(plugins_dir: &Path, enabled: &[String]) -> (HookChain, Vec<PluginReport>) {
    scan(plugins_dir, enabled, &mut |_, path| {
        let hook = plugin_hook(path)?;
        Ok(Some(Arc::new(hook) as Arc<dyn Hook>))
    })
}

/// Like [`load_plugins`], but never waits on a plugin's code: each enabled
/// plugin is opened and its init run on a thread of its own, and this returns at
/// once with a chain whose plugins are `starting` (report status
/// [`PluginStatus::Starting`]).
///
/// A call into a plugin still starting waits for its init at most until
/// `init_deadline` after this call; a plugin whose init has not returned by then
/// is failed with [`PluginLoadError::InitTimedOut`] for the rest of the process
/// (its thread is left to finish or hang on its own; a late success is ignored),
/// and the chain skips it. The chain's [`HookChain::stats`] say where each
/// plugin's start stands ([`HookStart`](crate::HookStart)).
pub fn start_plugins(
    plugins_dir: &Path,
    enabled: &[String],
    init_deadline: Duration,
) -> (HookChain, Vec<PluginReport>) {
    let (chain, mut reports) = scan(plugins_dir, enabled, &mut |name, path| {
        let hook = start::StartingPlugin::start(name, path, init_deadline);
        Ok(Some(Arc::new(hook) as Arc<dyn Hook>))
    });
    for report in &mut reports {
        if report.status == PluginStatus::Loaded {
            report.status = PluginStatus::Starting;
        }
    }
    (chain, reports)
}

/// Reports on the plugins under `plugins_dir` as [`load_plugins`] would, checking
/// each enabled library with [`check_plugin`] (no init runs): an enabled plugin
/// that checks out is [`PluginStatus::Valid`].
pub fn check_plugins(plugins_dir: &Path, enabled: &[String]) -> Vec<PluginReport> {
    let (_, mut reports) = scan(plugins_dir, enabled, &mut |_, path| {
        check_plugin(path).map(|()| None)
    });
    for report in &mut reports {
        if report.status == PluginStatus::Loaded {
            report.status = PluginStatus::Valid;
        }
    }
    reports
}

/// What happens to an enabled plugin whose manifest and directories check out:
/// given its name and library path, the hook to chain (`None`: checked only), or
/// why it failed.
type Open<'a> = dyn FnMut(&str, &Path) -> Result<Option<Arc<dyn Hook>>, PluginLoadError> + 'a;

/// A plugin for the chain: its order, its name, its hook.
type Chained = (i64, String, Arc<dyn Hook>);

/// The plugins directory's report, and a chain of what `open` made of the enabled
/// plugins.
fn scan(
    plugins_dir: &Path,
    enabled: &[String],
    open: &mut Open<'_>,
) -> (HookChain, Vec<PluginReport>) {
    let mut reports = Vec::new();
    let mut loaded: Vec<Chained> = Vec::new();
    let mut seen: Vec<String> = Vec::new();

    let mut dirs: Vec<PathBuf> = match fs::read_dir(plugins_dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect(),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(err) => {
            let error = PluginLoadError::PluginsDir {
                path: plugins_dir.to_owned(),
                message: err.to_string(),
            };
            tracing::warn!(path = %plugins_dir.display(), reason = %error, "cannot list plugins");
            for name in enabled {
                reports.push(failed_row(name, "", "", plugins_dir.to_owned(), &error));
            }
            return (HookChain::default(), reports);
        }
    };
    dirs.sort();

    for dir in dirs {
        let (report, hook) = load_dir(&dir, plugins_dir, enabled, &mut seen, open);
        reports.push(report);
        loaded.extend(hook);
    }

    for name in enabled {
        if !seen.contains(name) {
            let error = PluginLoadError::NotInstalled {
                path: plugins_dir.join(name),
            };
            tracing::warn!(plugin = %name, reason = %error, "plugin failed to load");
            reports.push(failed_row(name, "", "", plugins_dir.join(name), &error));
        }
    }

    loaded.sort_by(|a, b| match a.0.cmp(&b.0) {
        Ordering::Equal => a.1.cmp(&b.1),
        other => other,
    });
    let hooks: Vec<Arc<dyn Hook>> = loaded.into_iter().map(|(_, _, hook)| hook).collect();
    (HookChain::new(hooks), reports)
}

/// One plugin directory's report row, and its hook when it is enabled and `open`
/// makes one. Adds the directory's name and the manifest's name to `seen`.
fn load_dir(
    dir: &Path,
    plugins_dir: &Path,
    enabled: &[String],
    seen: &mut Vec<String>,
    open: &mut Open<'_>,
) -> (PluginReport, Option<Chained>) {
    let dir_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let manifest = read_manifest(dir);
    let name = manifest
        .as_ref()
        .map_or(dir_name.clone(), |m| m.name.clone());
    let is_enabled = enabled.iter().any(|e| *e == dir_name || *e == name);
    seen.push(dir_name.clone());
    seen.push(name.clone());
    let (version, description) = manifest
        .as_ref()
        .map_or((String::new(), String::new()), |m| {
            (m.version.clone(), m.description.clone())
        });
    let lib_path = manifest
        .as_ref()
        .ok()
        .and_then(|m| library_path(dir, m).ok())
        .unwrap_or_else(|| dir.to_owned());
    if !is_enabled {
        let report = PluginReport {
            name: name.clone(),
            version,
            description,
            path: lib_path,
            status: PluginStatus::Disabled,
            reason: Some(format!(
                "not enabled; plugins are opt-in (herd plugins enable {name})"
            )),
        };
        return (report, None);
    }
    let result = manifest.and_then(|m| {
        let path = library_path(dir, &m)?;
        check_dir(&path, dir, plugins_dir)?;
        let hook = open(&name, &path)?;
        Ok((m, path, hook))
    });
    match result {
        Ok((m, path, hook)) => {
            tracing::info!(plugin = %name, path = %path.display(), "plugin checked");
            let report = PluginReport {
                name: name.clone(),
                version,
                description,
                path,
                status: PluginStatus::Loaded,
                reason: None,
            };
            (
                report,
                hook.map(|hook| (m.order.unwrap_or(100), name, hook)),
            )
        }
        Err(error) => {
            tracing::warn!(plugin = %name, reason = %error, "plugin failed to load");
            let report = failed_row(&name, &version, &description, lib_path, &error);
            (report, None)
        }
    }
}

/// Resolves what a user typed (`herd plugins enable NAME`) to the installed
/// plugin's directory name, matching the directory name or the manifest's name.
/// Opens no library; herd-cli owns the config edit.
///
/// # Errors
///
/// `NotInstalled` when no plugin directory or manifest has that name.
pub fn resolve_plugin(plugins_dir: &Path, name: &str) -> Result<String, PluginLoadError> {
    let not_installed = || PluginLoadError::NotInstalled {
        path: plugins_dir.join(name),
    };
    if !name.contains(['/', '\\']) && name != ".." && plugins_dir.join(name).is_dir() {
        return Ok(name.to_owned());
    }
    let entries = fs::read_dir(plugins_dir).map_err(|_| not_installed())?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .find(|dir| read_manifest(dir).is_ok_and(|m| m.name == name))
        .and_then(|dir| dir.file_name().map(|n| n.to_string_lossy().into_owned()))
        .ok_or_else(not_installed)
}

/// The plugin directory and the plugins root must not be writable by others either.
fn check_dir(library: &Path, dir: &Path, plugins_dir: &Path) -> Result<(), PluginLoadError> {
    for (checked, what) in [
        (dir, "its directory"),
        (plugins_dir, "the plugins directory"),
    ] {
        if let Ok(meta) = fs::metadata(checked) {
            check_trusted(library, checked, what, &meta)?;
        }
    }
    Ok(())
}

fn failed_row(
    name: &str,
    version: &str,
    description: &str,
    path: PathBuf,
    error: &PluginLoadError,
) -> PluginReport {
    PluginReport {
        name: name.to_owned(),
        version: version.to_owned(),
        description: description.to_owned(),
        path,
        status: PluginStatus::Failed,
        reason: Some(error.to_string()),
    }
}

/// The ABI version this herd loads (re-exported for `herd plugins list`).
pub fn abi_version() -> &'static str {
    ABI_VERSION
}
