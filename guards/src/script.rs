//! Reading the scripts a command refers to: the [`ScriptReader`] seam and [`FsScriptReader`].
//!
//! `judge_with` stays pure by reading scripts only through a reader its caller passes in.
//! [`FsScriptReader`] is the one every herd caller uses: it resolves a path against the
//! session's working directory and enforces the bounds that make a scan safe to run on
//! anything an agent names. A path that is missing or a directory, and a binary (ELF,
//! Mach-O, PE, `ar`, gzip, zip, SQLite), is nothing to scan. A FIFO, a device, a socket,
//! a file over [`MAX_SCRIPT_BYTES`] or a cloud-synced path is refused, and the guard fails
//! closed on a refusal: opening a FIFO would hang, reading a device could never end, and a
//! cloud placeholder would trigger a download.

use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest script the reader returns; larger ones are refused.
pub const MAX_SCRIPT_BYTES: u64 = 1024 * 1024;

/// What a [`ScriptReader`] found at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Script {
    /// The file's text.
    Text(String),
    /// Nothing to judge (missing file, directory or a binary).
    Nothing,
    /// Unreadable in a way that must fail closed (FIFO, device, too large); the text says why.
    Refused(String),
}

/// Reads scripts a command refers to, so `judge_with` itself stays pure.
pub trait ScriptReader {
    /// Reads the script at `path` exactly as it appears on the command line (relative paths,
    /// `~` and `$HOME` are the reader's to resolve).
    fn read(&self, path: &str) -> Script;
}

/// A reader that finds nothing: what [`crate::judge`] uses.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoScripts;

impl ScriptReader for NoScripts {
    fn read(&self, _path: &str) -> Script {
        Script::Nothing
    }
}

/// Reads scripts from the local file system, relative to a working directory, within the
/// guard's bounds (1 MiB a file; FIFOs, devices and sockets refused; binaries are nothing).
#[derive(Debug, Clone)]
pub struct FsScriptReader {
    cwd: PathBuf,
    home: Option<PathBuf>,
}

impl FsScriptReader {
    /// A reader resolving relative paths against `cwd` and `~` against `$HOME`.
    pub fn new(cwd: PathBuf) -> FsScriptReader {
        FsScriptReader {
            cwd,
            home: std::env::var_os("HOME").map(PathBuf::from),
        }
    }

    /// Resolves `~` and `$HOME` against `home` instead of the environment (`None`: leave
    /// them unresolved, so such paths read as nothing).
    #[must_use]
    pub fn with_home(mut self, home: Option<PathBuf>) -> FsScriptReader {
        self.home = home;
        self
    }

    /// The absolute path `path` names, or `None` when it depends on something unknown.
    fn resolve(&self, path: &str) -> Option<PathBuf> {
        let home_relative = ["~/", "$HOME/", "${HOME}/"]
            .iter()
            .find_map(|prefix| path.strip_prefix(prefix));
        let resolved = match home_relative {
            Some(rest) => self.home.as_ref()?.join(rest),
            None if path == "~" => self.home.clone()?,
            None => {
                if path.contains(['$', '`', '~']) || path.is_empty() {
                    return None;
                }
                self.cwd.join(path)
            }
        };
        Some(resolved)
    }
}

impl ScriptReader for FsScriptReader {
    fn read(&self, path: &str) -> Script {
        if path.contains('\0') {
            return Script::Nothing;
        }
        let Some(resolved) = self.resolve(path) else {
            return Script::Nothing;
        };
        let shown = resolved.display().to_string();
        if shown.contains("Library/Mobile Documents") || shown.contains("Library/CloudStorage") {
            return Script::Refused(format!("{shown} is a cloud-synced path"));
        }
        read_bounded(&resolved)
    }
}

fn read_bounded(path: &Path) -> Script {
    let Ok(meta) = std::fs::metadata(path) else {
        return Script::Nothing;
    };
    if let Some(refusal) = refusal(path, &meta) {
        return refusal;
    }
    if meta.is_dir() {
        return Script::Nothing;
    }
    let Ok(file) = open_nonblocking(path) else {
        return Script::Nothing;
    };
    // The path may have been swapped between stat and open: check what was opened.
    match file.metadata() {
        Ok(meta) => {
            if let Some(refusal) = refusal(path, &meta) {
                return refusal;
            }
        }
        Err(_) => return Script::Nothing,
    }
    let mut bytes = Vec::new();
    if file
        .take(MAX_SCRIPT_BYTES + 1)
        .read_to_end(&mut bytes)
        .is_err()
    {
        return Script::Nothing;
    }
    if bytes.len() as u64 > MAX_SCRIPT_BYTES {
        return Script::Refused(format!("{} is larger than 1 MiB", path.display()));
    }
    if is_binary(&bytes) {
        return Script::Nothing;
    }
    bytes.retain(|b| *b != 0);
    Script::Text(String::from_utf8_lossy(&bytes).into_owned())
}

fn refusal(path: &Path, meta: &std::fs::Metadata) -> Option<Script> {
    let kind = special_kind(meta)?;
    Some(Script::Refused(format!("{} is a {kind}", path.display())))
}

#[cfg(unix)]
fn special_kind(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let file_type = meta.file_type();
    if file_type.is_fifo() {
        Some("fifo")
    } else if file_type.is_char_device() || file_type.is_block_device() {
        Some("device")
    } else if file_type.is_socket() {
        Some("socket")
    } else if meta.len() > MAX_SCRIPT_BYTES {
        Some("file larger than 1 MiB")
    } else {
        None
    }
}

#[cfg(not(unix))]
fn special_kind(meta: &std::fs::Metadata) -> Option<&'static str> {
    if meta.is_file() || meta.is_dir() {
        (meta.len() > MAX_SCRIPT_BYTES).then_some("file larger than 1 MiB")
    } else {
        Some("special file")
    }
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// Whether `bytes` start with the magic of an executable or archive format.
pub(crate) fn is_binary(bytes: &[u8]) -> bool {
    const MAGICS: [&[u8]; 11] = [
        b"\x7fELF",
        b"\xfe\xed\xfa\xce",
        b"\xfe\xed\xfa\xcf",
        b"\xce\xfa\xed\xfe",
        b"\xcf\xfa\xed\xfe",
        b"\xca\xfe\xba\xbe",
        b"MZ",
        b"!<arch>",
        b"\x1f\x8b",
        b"PK\x03\x04",
        b"SQLite format 3\0",
    ];
    MAGICS.iter().any(|magic| bytes.starts_with(magic))
}

#[cfg(test)]
mod tests;
