//! `herd plugins new` (a plugin crate from the template) and `herd plugins install`
//! (build it, or take a built library, and put it into the home).
//!
//! The template lives in `template/` beside this file and is compiled into the
//! binary, so `herd plugins new` works without a checkout. Its crate depends on
//! `herd-plugin-abi` by the version this herd was built with, from the registry.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use herd_hooks::{MANIFEST_FILE, PluginManifest, check_plugins, read_manifest};
use herd_persistence::Home;
use serde_json::Value;

use crate::exit::{Code, Failure};
use crate::output;

const CARGO_TOML: &str = include_str!("template/Cargo.toml.in");
const LIB_RS: &str = include_str!("template/lib.rs.in");
const PLUGIN_TOML: &str = include_str!("template/plugin.toml.in");
const GITIGNORE: &str = include_str!("template/gitignore.in");

/// The longest plugin name `new` accepts.
const MAX_NAME_CHARS: usize = 40;

/// Checks a plugin name: `[a-z][a-z0-9-]*`, at most [`MAX_NAME_CHARS`].
fn check_name(name: &str) -> Result<(), Failure> {
    let ok = name.len() <= MAX_NAME_CHARS
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(Failure::new(
            Code::Usage,
            format!(
                "plugin name `{name}` is not valid: use lowercase letters, digits and `-`, starting with a letter, at most {MAX_NAME_CHARS} characters (e.g. `shout`, `tidy-cargo`)"
            ),
        ))
    }
}

/// The `major.minor` of the plugin ABI crate this herd was built with.
fn abi_requirement() -> String {
    let version = herd_plugin_abi::CRATE_VERSION;
    let mut parts = version.split('.');
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => format!("{major}.{minor}"),
        _ => version.to_owned(),
    }
}

/// Fills the template's placeholders.
fn fill(template: &str, name: &str) -> String {
    template
        .replace("{name}", name)
        .replace("{lib_name}", &name.replace('-', "_"))
        .replace("{abi_version}", &abi_requirement())
}

/// `herd plugins new NAME [--path DIR]`.
pub(crate) fn new(name: &str, path: Option<&Path>) -> anyhow::Result<()> {
    check_name(name)?;
    let dir = path.map_or_else(|| PathBuf::from(name), Path::to_path_buf);
    if dir.exists() {
        return Err(Failure::new(
            Code::Usage,
            format!(
                "{} already exists; choose another name or remove it first",
                dir.display()
            ),
        )
        .into());
    }
    let files = [
        ("Cargo.toml", fill(CARGO_TOML, name)),
        ("src/lib.rs", fill(LIB_RS, name)),
        (MANIFEST_FILE, fill(PLUGIN_TOML, name)),
        (".gitignore", GITIGNORE.to_owned()),
    ];
    // Written into a sibling temporary directory and renamed, so a failure leaves
    // no half-written crate behind.
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let staging = tempfile::Builder::new()
        .prefix(".herd-plugin-new-")
        .tempdir_in(&parent)
        .map_err(|e| anyhow::anyhow!("cannot create the crate in {}: {e}", parent.display()))?;
    for (rel, text) in &files {
        let file = staging.path().join(rel);
        if let Some(sub) = file.parent() {
            fs::create_dir_all(sub)?;
        }
        fs::write(&file, text)?;
    }
    let staged = staging.keep();
    fs::set_permissions(&staged, fs::Permissions::from_mode(0o755))?;
    if let Err(e) = fs::rename(&staged, &dir) {
        let _ = fs::remove_dir_all(&staged);
        return Err(anyhow::anyhow!("cannot create {}: {e}", dir.display()));
    }
    output::line(&format!(
        "created plugin crate {} (herd-plugin-{name}, herd-plugin-abi {})\nnext:\n  herd plugins install {}\n  herd plugins enable {name}",
        dir.display(),
        abi_requirement(),
        dir.display()
    ))?;
    Ok(())
}

/// `herd plugins install PATH`.
pub(crate) fn install(home: &Home, path: &Path) -> anyhow::Result<()> {
    let (library, source_dir) = if path.is_dir() {
        (build_crate(path)?, path.to_path_buf())
    } else if path.is_file() {
        let dir = path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        (path.to_path_buf(), dir)
    } else {
        return Err(Failure::new(
            Code::Usage,
            format!(
                "{} does not exist; give a plugin crate directory (see `herd plugins new`) or a built library",
                path.display()
            ),
        )
        .into());
    };
    let manifest = read_manifest(&source_dir).map_err(|e| {
        Failure::new(
            Code::Usage,
            format!(
                "{e}; a plugin needs a {MANIFEST_FILE} beside its library or in its crate (`herd plugins new` writes one)"
            ),
        )
    })?;
    check_name(&manifest.name)?;
    let dest = install_files(home, &manifest, &library)?;
    // The loader checks it here as the daemon will (short of running its init, which
    // only the daemon runs, with a deadline), so a broken build is reported now.
    let reports = check_plugins(&home.plugins_dir(), std::slice::from_ref(&manifest.name));
    let report = reports.iter().find(|r| r.name == manifest.name);
    match report.and_then(|r| r.reason.clone()) {
        Some(reason) => Err(Failure::new(
            Code::Failed,
            format!(
                "installed {} into {}, but it does not load: {reason}",
                manifest.name,
                dest.display()
            ),
        )
        .into()),
        None => {
            output::line(&format!(
                "installed plugin {} {} into {}\nenable it: herd plugins enable {}",
                manifest.name,
                manifest.version,
                dest.display(),
                manifest.name
            ))?;
            Ok(())
        }
    }
}

/// Builds the crate in `dir` in release mode; the path of its cdylib.
fn build_crate(dir: &Path) -> anyhow::Result<PathBuf> {
    if !dir.join("Cargo.toml").is_file() {
        return Err(Failure::new(
            Code::Usage,
            format!(
                "{} has no Cargo.toml; give a plugin crate directory or a built library",
                dir.display()
            ),
        )
        .into());
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = crate::auxiliary::command(&cargo)
        .args([
            "build",
            "--release",
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(dir)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run cargo to build {}: {e}", dir.display()))?;
    if !out.status.success() {
        return Err(Failure::new(
            Code::Failed,
            format!(
                "cargo build --release failed in {} (see above)",
                dir.display()
            ),
        )
        .into());
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-artifact")
        .filter(|msg| {
            msg["target"]["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k == "cdylib"))
        })
        .flat_map(|msg| {
            msg["filenames"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|f| f.as_str().map(PathBuf::from))
        })
        .find(|f| f.extension().is_some_and(|e| e == "so"))
        .ok_or_else(|| {
            Failure::new(
                Code::Usage,
                format!(
                    "the crate in {} built no shared library; its [lib] needs crate-type = [\"cdylib\"]",
                    dir.display()
                ),
            )
            .into()
        })
}

/// Copies the library and manifest into `<home>/plugins/<name>/`; the directory.
fn install_files(
    home: &Home,
    manifest: &PluginManifest,
    library: &Path,
) -> anyhow::Result<PathBuf> {
    let plugins = home.plugins_dir();
    let dest = plugins.join(&manifest.name);
    for dir in [&plugins, &dest] {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        // Group- or world-writable directories are refused by the loader.
        let mode = fs::metadata(dir)?.permissions().mode();
        if mode & 0o022 != 0 {
            fs::set_permissions(dir, fs::Permissions::from_mode(mode & !0o022))?;
        }
    }
    let library_name = Path::new(&manifest.library)
        .file_name()
        .filter(|n| Path::new(n) == Path::new(&manifest.library))
        .ok_or_else(|| {
            Failure::new(
                Code::Usage,
                format!(
                    "{MANIFEST_FILE}: library = \"{}\" must be a file name (the library is installed beside the manifest)",
                    manifest.library
                ),
            )
        })?;
    let bytes =
        fs::read(library).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", library.display()))?;
    write_atomically(&dest.join(library_name), &bytes, 0o755)?;
    let text = toml::to_string(manifest)?;
    write_atomically(&dest.join(MANIFEST_FILE), text.as_bytes(), 0o644)?;
    Ok(dest)
}

/// Writes `bytes` to `path` through a temporary file in the same directory.
fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".install-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(mode))?;
    tmp.persist(path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {}", path.display(), e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{LIB_RS, check_name, fill};

    #[test]
    fn plugin_names_are_checked() {
        for good in ["shout", "tidy-cargo", "a1"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "Shout", "1x", "a_b", "x-", "a/b", &"x".repeat(41)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_template_is_filled() {
        let lib = fill(LIB_RS, "tidy-cargo");
        assert!(lib.contains("name: \"tidy-cargo\""));
        assert!(!lib.contains("{name}"));
    }
}
