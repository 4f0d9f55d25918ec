//! The self-kill guard's verdict on a command about to start.
//!
//! Judging is a parse, plus a read of every script the command names. Most commands
//! name none, so the parse runs right here on the async worker, with a reader that
//! only notes that it was asked; only a command that does name a script (or one too
//! long to parse in a moment) is judged again on the blocking pool with the file
//! system reader. A spawn then costs no thread hand-off in the common case, which is
//! most of the guard's share of a short job's round trip on a busy machine.

use std::cell::Cell;
use std::path::Path;

use herd_guards::{FsScriptReader, Host, Script, ScriptReader, Verdict};
use tokio::task::JoinError;

/// Commands up to this many bytes are parsed on the async worker first.
const INLINE_BYTES: usize = 4096;

/// A reader that reads nothing and remembers whether the judge wanted a script.
#[derive(Default)]
struct Probe {
    asked: Cell<bool>,
}

impl ScriptReader for Probe {
    fn read(&self, _path: &str) -> Script {
        self.asked.set(true);
        Script::Nothing
    }
}

/// The guard's verdict on `command` started in `cwd`, the same as judging it with a
/// [`FsScriptReader`] for `cwd`.
///
/// # Errors
/// The blocking worker's failure, when the command had to be judged there.
pub(crate) async fn judge(host: &Host, command: &str, cwd: &Path) -> Result<Verdict, JoinError> {
    if command.len() <= INLINE_BYTES {
        let probe = Probe::default();
        let verdict = herd_guards::judge_with(command, host, &probe);
        if !probe.asked.get() {
            return Ok(verdict);
        }
    }
    let (host, command, dir) = (host.clone(), command.to_owned(), cwd.to_path_buf());
    tokio::task::spawn_blocking(move || {
        herd_guards::judge_with(&command, &host, &FsScriptReader::new(dir))
    })
    .await
}
