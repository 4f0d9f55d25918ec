//! The one file walker every source check of xtask uses (tidy, behaviour IDs, sizes,
//! module cycles), so they all see the same files.

use std::fs;
use std::path::{Path, PathBuf};

/// Directories never entered: build output, packaging output, dependencies. Hidden
/// directories (`.git`, `.cargo`) are skipped as well.
const SKIP_DIRS: &[&str] = &["target", "dist", "node_modules"];

/// Every file under `root` whose name ends in `.{ext}`, sorted, outside build output
/// and hidden directories. An unreadable directory is skipped, not an error: the
/// checks read what a build would see.
pub(crate) fn files_with_ext(root: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() {
                if !SKIP_DIRS.contains(&name.as_ref()) && !name.starts_with('.') {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == ext) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `path` relative to `root`, with `/` separators, for messages.
pub(crate) fn rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}
