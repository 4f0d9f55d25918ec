//! Running a plain command without a shell in front of it.
//!
//! `bash -c 'cargo test'` already execs `cargo` in place of itself (bash's one-shot
//! optimisation), so the session's process is the same either way; what the shell
//! adds is its own start-up, about a millisecond of CPU (loading bash, its locale,
//! its rc checks) before the command runs. For a command line that is one simple
//! command of plain words, herd does what the shell would have done, exec the program
//! found on the child's `PATH` with those words, and skips that start-up.
//!
//! "Plain" is deliberately narrow, so the shell could not have done anything else:
//! - the configured shell is `[<sh>, "-c"]` with `<sh>` one of bash, sh, dash, zsh,
//!   ksh (a login shell, `-l`, reads profiles: not bypassed);
//! - every byte is an ASCII letter, digit, blank, or one of `_ - . / : , + @ % =`: no
//!   quoting, expansion, globbing, tilde, redirection, comment, separator or newline;
//! - the first word is not an assignment, a shell keyword or a builtin (`cd`, `exit`,
//!   `kill`, `pwd`, `export`, `time`, …), except `true`, `false` and `echo`, whose
//!   programs behave like the builtins for such words;
//! - the program resolves to an executable regular file that starts with an ELF or a
//!   `#!` header naming an interpreter that exists (a header-less script is the
//!   shell's to interpret, and a missing interpreter the shell's to report).
//!
//! Anything else, including a program that is not found, goes through the shell, which
//! then reports its usual error (`command not found`, exit 127). The child gets `PWD`
//! set to its working directory, as the shell would have set it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Shells whose `-c` of a plain simple command execs exactly that command.
const SHELLS: &[&str] = &["bash", "sh", "dash", "zsh", "ksh"];

/// Bash keywords and builtins (a superset of the POSIX special builtins); a command
/// starting with one of these always goes through the shell. `true`, `false` and
/// `echo` are left out on purpose: their programs behave like the builtins for plain
/// words.
const SHELL_WORDS: &[&str] = &[
    ".",
    ":",
    "[",
    "[[",
    "]]",
    "!",
    "{",
    "}",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "case",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "coproc",
    "declare",
    "dirs",
    "disown",
    "do",
    "done",
    "elif",
    "else",
    "enable",
    "esac",
    "eval",
    "exec",
    "exit",
    "export",
    "fc",
    "fg",
    "fi",
    "for",
    "function",
    "getopts",
    "hash",
    "help",
    "history",
    "if",
    "in",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "select",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "then",
    "time",
    "times",
    "trap",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "until",
    "wait",
    "while",
];

/// The argv that runs `command` without the shell, or `None` when the shell is needed
/// (see the module docs for the exact rule). `env` is the child's environment (its
/// `PATH` is searched) and `cwd` its working directory.
pub(crate) fn direct_argv(
    shell: &[String],
    command: &str,
    env: &BTreeMap<OsString, OsString>,
    cwd: &Path,
) -> Option<Vec<String>> {
    if !is_plain_shell(shell) || !command.bytes().all(is_plain_byte) {
        return None;
    }
    let words: Vec<&str> = command
        .split([' ', '\t'])
        .filter(|w| !w.is_empty())
        .collect();
    let (first, _) = words.split_first()?;
    // An assignment prefix (`A=1 cmd`) is the shell's; so is zsh's `=cmd` expansion.
    if first.contains('=') || words.iter().any(|w| w.starts_with('=')) {
        return None;
    }
    if SHELL_WORDS.contains(first) {
        return None;
    }
    let program = if first.contains('/') {
        cwd.join(first)
    } else {
        find_on_path(first, env)?
    };
    if !is_exec_image(&program) {
        return None;
    }
    let mut argv = Vec::with_capacity(words.len());
    argv.push(program.to_str()?.to_owned());
    argv.extend(words[1..].iter().map(|w| (*w).to_owned()));
    Some(argv)
}

fn is_plain_shell(shell: &[String]) -> bool {
    let [program, flag] = shell else {
        return false;
    };
    let name = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    flag == "-c" && SHELLS.contains(&name)
}

fn is_plain_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b' ' | b'\t' | b'_' | b'-' | b'.' | b'/' | b':' | b',' | b'+' | b'@' | b'%' | b'='
        )
}

/// The file the shell's `PATH` search would pick: the first executable regular file
/// named `name`. `None` when a `PATH` entry is relative (a shell resolves those
/// against its working directory; left to it) or nothing is found.
pub(super) fn find_on_path(name: &str, env: &BTreeMap<OsString, OsString>) -> Option<PathBuf> {
    let path = env.get(&OsString::from("PATH"))?;
    for dir in std::env::split_paths(path) {
        if !dir.is_absolute() {
            return None;
        }
        let candidate = dir.join(name);
        if is_executable_file(&candidate) {
            return Some(candidate);
        }
    }
    None
}

fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// True for an executable regular file starting with an ELF or `#!` header.
/// A `#!` script counts only when its interpreter is an executable file: otherwise
/// the exec would fail with a bare "not found" for a file that is there, where the
/// shell says "bad interpreter" and exits 126 or 127 as users expect.
fn is_exec_image(path: &Path) -> bool {
    if !is_executable_file(path) {
        return false;
    }
    let mut head = [0u8; 256];
    let Ok(n) = std::fs::File::open(path).and_then(|mut f| f.read(&mut head)) else {
        return false;
    };
    let head = &head[..n];
    if head.starts_with(b"\x7fELF") {
        return true;
    }
    let Some(line) = head.strip_prefix(b"#!") else {
        return false;
    };
    let line = line.split(|b| *b == b'\n').next().unwrap_or_default();
    let interpreter = line
        .split(|b| *b == b' ' || *b == b'\t')
        .find(|w| !w.is_empty())
        .and_then(|w| std::str::from_utf8(w).ok());
    interpreter.is_some_and(|i| Path::new(i).is_absolute() && is_executable_file(Path::new(i)))
}

#[cfg(test)]
mod tests;
