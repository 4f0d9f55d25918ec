//! The script reader the self-kill guard uses to look inside scripts a command runs
//! (B33). Interim until herd-guards ships its `FsScriptReader`.

use std::io::Read;
use std::path::{Path, PathBuf};

use herd_guards::{Script, ScriptReader};

/// Scripts larger than this are refused (judged fail-closed by the guard).
const MAX_SCRIPT_BYTES: u64 = 1 << 20;

/// Reads scripts relative to the spawn's working directory.
#[derive(Debug)]
pub(crate) struct CwdScriptReader {
    cwd: PathBuf,
}

impl CwdScriptReader {
    pub(crate) fn new(cwd: &Path) -> CwdScriptReader {
        CwdScriptReader {
            cwd: cwd.to_path_buf(),
        }
    }
}

impl ScriptReader for CwdScriptReader {
    fn read(&self, path: &str) -> Script {
        let path = crate::registry::resolve(&self.cwd, path);
        let Ok(meta) = std::fs::metadata(&path) else {
            return Script::Nothing;
        };
        if !meta.is_file() {
            return Script::Refused(format!("{} is not a regular file", path.display()));
        }
        if meta.len() > MAX_SCRIPT_BYTES {
            return Script::Refused(format!("{} is too large to judge", path.display()));
        }
        let mut bytes = Vec::new();
        match std::fs::File::open(&path)
            .and_then(|f| f.take(MAX_SCRIPT_BYTES).read_to_end(&mut bytes))
        {
            Ok(_) => match String::from_utf8(bytes) {
                Ok(text) => Script::Text(text),
                Err(_) => Script::Nothing,
            },
            Err(error) => Script::Refused(format!("{} unreadable: {error}", path.display())),
        }
    }
}
