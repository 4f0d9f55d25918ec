//! herd-guards: refuses shell commands that would kill the supervising host.
//!
//! Owns: the pure judgement `command line + host identity -> verdict`, and a bounded
//! file-system [`ScriptReader`] for the scripts a command refers to.
//! Never: runs a command, signals a process, or reads a file other than through the
//! [`ScriptReader`] its caller passes in ([`Host::current`] reads this process's own
//! identity from `/proc/self` when asked, and nothing else).
//! Depended on by: `herd-core` (before every spawn) and `herd-cli` (`herd guard check`).
//! Whether the guard is active at all (`HERD_SUPERVISED_CHILD=1`, or a host that knows it
//! is supervised) is the caller's decision.
//!
//! Agents kill their own hosts: a model that wants to stop "the python server" runs
//! `pkill -9 python3` from inside a supervisor that is itself a `python` process. [`judge`]
//! parses the command line with tree-sitter-bash, finds every simple command however it is
//! nested or disguised (`;`, `&&`, pipes, `$(…)`, backticks, `sh -c '…'`, `sudo`/`env`/
//! `timeout`/`xargs` wrappers, quote splices such as `kick"start"`, heredocs fed to a shell,
//! referenced scripts) and asks per-tool rules whether it would kill the host: name-based
//! killers aimed at a host image, `pkill -f` patterns that match the host's command line,
//! `kill` fed with the host's PIDs, kills of every process the user owns, the host's own
//! lifecycle commands and service units, and machine shutdown.
//!
//! It is deliberately biased: a false alarm costs a rephrased command, a miss costs the
//! host. Data and prose (`grep 'pkill python' notes.txt`, `echo "killall python"`) are not
//! commands and pass; numeric-PID kills pass (an explicit PID is the remedy the guard
//! offers). Input the parser cannot read is blocked only if it names a kill or lifecycle
//! verb.
//!
//! Why tree-sitter, and no lighter mode behind a feature: tree-sitter and its bash
//! grammar are 4 of this crate's 11 normal dependencies (with a C compiler at build
//! time), so a host that wants only the guard pays for them. A word lexer (shell-words:
//! quotes, escapes, blanks) was evaluated against the guard's table of command lines
//! and does not pass it. Of the 254 lines the guard must refuse, 50 hold a construct a
//! lexer has no structure for (26 command substitutions, 10 loops or conditionals, 7
//! here-documents or here-strings, 4 subshells or groups, and others); of the 145 it
//! must allow, 18 do (`kill $(cat server.pid)`, `cat <<EOF` with prose,
//! `diff <(sort a) <(sort b)`). A light mode that refuses what it cannot read wrongly
//! refuses those 18 (12% of the allow table); one that lets them through misses up
//! to 50 refusals (20%), and a miss costs the host. Telling `kill $(pgrep python)`
//! from `kill $(cat app.pid)` needs the parse, so the guard keeps tree-sitter.
//!
//! Main types: [`Host`] (what must not die), [`Verdict`] / [`Block`] / [`Rule`] (the answer),
//! [`ScriptReader`] / [`FsScriptReader`] (how referenced scripts are read).
//!
//! Invariant: [`judge`] and [`judge_with`] never panic and always finish: every walk is
//! iterative or depth-bounded, and one judgement has a fixed budget of nested texts, script
//! reads, script bytes and wall-clock time, past which it fails safe.
//!
//! ```
//! use herd_guards::{Host, Verdict, judge};
//!
//! let host = Host::new(vec!["python".into()], "python -m agent.main");
//! assert!(matches!(judge("pkill -9 python3", &host), Verdict::Block(_)));
//! assert_eq!(judge("pkill -f 'python my_script.py'", &host), Verdict::Allow);
//! ```

mod host;
mod judge;
mod options;
mod rules;
mod script;
mod shell;
mod sys;
mod verdict;

pub use host::{
    HERD_IMAGE, HOST_IMAGES_ENV, HOST_UNITS_ENV, Host, Lifecycle, SUPERVISED_CHILD_ENV,
    is_supervised_child,
};
pub use script::{FsScriptReader, MAX_SCRIPT_BYTES, NoScripts, Script, ScriptReader};
pub use verdict::{Block, Rule, Verdict};

/// Judges `command` against `host`, without reading referenced scripts (they count as
/// nothing to scan).
///
/// Pure: it executes nothing and reads no files.
pub fn judge(command: &str, host: &Host) -> Verdict {
    judge::run(command, host, &NoScripts)
}

/// Judges `command` against `host`, reading the scripts it refers to (`bash x.sh`,
/// `source x.sh`, `./x.sh`) through `scripts` and judging them recursively (depth 8,
/// 1 MiB of script text in all). A script the reader refuses fails closed.
pub fn judge_with(command: &str, host: &Host, scripts: &dyn ScriptReader) -> Verdict {
    judge::run(command, host, scripts)
}
