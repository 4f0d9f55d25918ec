//! Real plugin libraries for tests: the built cdylibs found next to the test
//! executable, and a plugins directory (mode 0755, as the loader requires) to
//! install them in with their `plugin.toml`.
//!
//! A missing library fails the test with the `cargo build` line that makes it
//! (each test crate names its own plugins).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// `target/<profile>/lib<name>.so`, found from the running test executable in
/// `target/<profile>/deps/`.
///
/// # Panics
/// When the library is not built, saying to run `build`.
pub fn cdylib(name: &str, build: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executables live in target/<profile>/deps");
    let path = profile_dir.join(format!("lib{name}.so"));
    assert!(
        path.exists(),
        "{} is missing; build the plugins first:\n    {build}",
        path.display()
    );
    path
}

/// A plugins directory whose plugins a test installs.
#[derive(Debug, Clone)]
pub struct PluginDir {
    dir: PathBuf,
    /// The command that builds the libraries this test crate installs.
    build: &'static str,
}

impl PluginDir {
    /// Creates `dir` (mode 0755); `build` is the command that builds the
    /// libraries installed into it, for the message when one is missing.
    ///
    /// # Panics
    /// When the directory cannot be made.
    pub fn create(dir: PathBuf, build: &'static str) -> PluginDir {
        fs::create_dir_all(&dir).expect("create the plugins dir");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod plugins dir");
        PluginDir { dir, build }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Installs plugin `name`: `name/plugin.toml` holding `manifest` and, when
    /// given as `(crate_lib, file)`, a copy of the built library `crate_lib` as
    /// `file`. The plugin's directory.
    ///
    /// # Panics
    /// When a file cannot be written or the library is not built.
    pub fn install(&self, name: &str, manifest: &str, library: Option<(&str, &str)>) -> PathBuf {
        let path = self.dir.join(name);
        fs::create_dir(&path).expect("create plugin dir");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod plugin dir");
        fs::write(path.join("plugin.toml"), manifest).expect("write manifest");
        if let Some((crate_lib, file)) = library {
            let dest = path.join(file);
            fs::copy(cdylib(crate_lib, self.build), &dest).expect("copy library");
            fs::set_permissions(&dest, fs::Permissions::from_mode(0o755)).expect("chmod library");
        }
        path
    }

    /// Installs the built library `crate_lib` as plugin `name`, with a manifest
    /// naming it; the plugin's directory.
    ///
    /// # Panics
    /// As [`PluginDir::install`].
    pub fn install_lib(&self, name: &str, crate_lib: &str) -> PathBuf {
        let file = format!("lib{crate_lib}.so");
        let manifest = format!(
            "name = \"{name}\"\nversion = \"0.0.1\"\nlibrary = \"{file}\"\ndescription = \"test\"\n"
        );
        self.install(name, &manifest, Some((crate_lib, &file)))
    }

    /// Writes `file` in plugin `name`'s directory with raw `bytes` (mode 0755).
    ///
    /// # Panics
    /// When it cannot be written.
    pub fn write_file(&self, name: &str, file: &str, bytes: &[u8]) {
        let dest = self.dir.join(name).join(file);
        fs::write(&dest, bytes).expect("write plugin file");
        fs::set_permissions(&dest, fs::Permissions::from_mode(0o755)).expect("chmod file");
    }
}
