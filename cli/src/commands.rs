//! The client commands: turn arguments into daemon calls and answers into output.
//!
//! Every command prints JSON with `--json` (the daemon's answer, unchanged) and
//! tidy text otherwise. Exit codes follow `exit::Code`.
//!
//! Tidy text shows every string from an answer through `output::visible` (or
//! `output::visible_lines` for a preview block): a job's command line and output
//! are the job's to choose, and must not drive the user's terminal. `herd logs`
//! alone prints the job's bytes as they are.

use herd_protocol::answers::{CompletionReason, KillAnswer, ListRow, PollAnswer, WaitAnswer};

use crate::exit::{Code, Failure};
use crate::output;

mod events;
pub(crate) mod follow;
mod foreground;
mod group;
mod handoff;
mod kill;
mod logs;
pub(crate) mod logstream;
mod poll;
mod ps;
mod resume;
mod run;
mod shutdown;
mod stdin;
mod wait;

pub(crate) use events::events;
pub(crate) use group::group;
pub(crate) use handoff::handoff;
pub(crate) use kill::{clean, kill};
pub(crate) use logs::{last_lines, logs, print_last_lines};
pub(crate) use poll::poll;
pub(crate) use ps::ps;
pub(crate) use run::{Ran, run};
pub(crate) use shutdown::shutdown;
pub(crate) use stdin::{close, resize, stdin};
pub(crate) use wait::wait;

/// The command line a job runs: one argument as is, several shell-quoted.
pub(crate) fn command_line(words: &[String]) -> String {
    match words {
        [single] => single.clone(),
        many => shell_words::join(many),
    }
}

/// The error for `--host` against a daemon that has no host links.
fn old_daemon_for_hosts(daemon: &str) -> anyhow::Error {
    Failure::new(
        Code::Usage,
        format!(
            "--host needs a newer daemon: the running one (herd {daemon}) has no host links; run `herd shutdown --keep-jobs` to replace it with this version, then retry"
        ),
    )
    .into()
}

/// `text` on one line, rendered safe for a terminal and cut to `max` terminal
/// columns, with an ellipsis when cut.
///
/// Whitespace runs (newlines and tabs included) become one space first; what is
/// rendered is measured after rendering, in columns (a wide character takes two),
/// so the column keeps its width.
fn truncate(text: &str, max: usize) -> String {
    use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let shown = output::visible(&flat);
    if shown.width() <= max {
        return shown.into_owned();
    }
    let mut cut = String::new();
    let mut used = 0;
    for c in shown.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > max {
            break;
        }
        used += w;
        cut.push(c);
    }
    cut.push('…');
    cut
}

/// What [`ending`] reads of an answer, a `list` row or a completion event: each
/// converts into it from its herd-protocol type, so no field is read untyped.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ended<'a> {
    /// The session.
    pub(crate) session_id: &'a str,
    /// Its status as the wire names it (shown when nothing else says how it ended).
    pub(crate) status: &'a str,
    /// Why it finished.
    pub(crate) completion_reason: Option<CompletionReason>,
    /// The exit code, if it exited normally.
    pub(crate) exit_code: Option<i32>,
    /// The signal that ended it.
    pub(crate) signal: Option<i32>,
    /// Who killed it, if herd did.
    pub(crate) termination_source: Option<&'a str>,
    /// Its time limit in seconds.
    pub(crate) time_limit_seconds: Option<u64>,
    /// Processes of its tree that outlived it.
    pub(crate) n_leftovers: usize,
}

impl<'a> From<&'a WaitAnswer> for Ended<'a> {
    fn from(a: &'a WaitAnswer) -> Self {
        Ended {
            session_id: &a.session_id,
            status: a.status.as_str(),
            completion_reason: a.completion_reason,
            exit_code: a.exit_code,
            signal: a.signal,
            termination_source: a.termination_source.as_deref(),
            time_limit_seconds: a.time_limit_seconds,
            n_leftovers: 0,
        }
    }
}

impl<'a> From<&'a PollAnswer> for Ended<'a> {
    fn from(a: &'a PollAnswer) -> Self {
        Ended {
            session_id: &a.session_id,
            status: a.status.as_str(),
            completion_reason: a.completion_reason,
            exit_code: a.exit_code,
            signal: a.signal,
            termination_source: a.termination_source.as_deref(),
            time_limit_seconds: a.time_limit_seconds,
            n_leftovers: a.leftovers.len(),
        }
    }
}

impl<'a> From<&'a KillAnswer> for Ended<'a> {
    fn from(a: &'a KillAnswer) -> Self {
        Ended {
            session_id: &a.session_id,
            status: a.status.as_str(),
            completion_reason: a.completion_reason,
            exit_code: a.exit_code,
            signal: None,
            termination_source: Some(a.termination_source.as_str()).filter(|s| !s.is_empty()),
            time_limit_seconds: None,
            n_leftovers: 0,
        }
    }
}

impl<'a> From<&'a ListRow> for Ended<'a> {
    fn from(a: &'a ListRow) -> Self {
        Ended {
            session_id: &a.session_id,
            status: a.status.as_str(),
            completion_reason: a.completion_reason,
            exit_code: a.exit_code,
            signal: a.signal,
            termination_source: a.termination_source.as_deref(),
            time_limit_seconds: a.time_limit_seconds,
            n_leftovers: a.leftovers.len(),
        }
    }
}

/// How a job ended, for a person: `proc_… exited 0`, `proc_… killed (SIGTERM)`.
pub(crate) fn ending<'a>(ended: impl Into<Ended<'a>>) -> String {
    let answer = ended.into();
    let id = output::visible(answer.session_id).into_owned();
    let signal = answer
        .signal
        .and_then(|s| nix::sys::signal::Signal::try_from(s).ok())
        .map(|s| s.as_str().to_owned());
    let killed = Some(CompletionReason::Killed);
    let how = match (answer.completion_reason, answer.exit_code, signal) {
        (reason, _, sig) if reason == killed && answer.termination_source == Some("time_limit") => {
            // `killed (time limit 5m, SIGTERM)`.
            let limit = answer.time_limit_seconds.map_or_else(
                || "time limit".to_owned(),
                |s| format!("time limit {}", limit_text(s)),
            );
            match sig {
                Some(sig) => format!("killed ({limit}, {sig})"),
                None => format!("killed ({limit})"),
            }
        }
        (reason, _, Some(sig))
            if reason == killed && answer.termination_source == Some("restarted") =>
        {
            format!("killed (restarted, {sig})")
        }
        (Some(CompletionReason::Killed), _, Some(sig)) => format!("killed ({sig})"),
        (Some(CompletionReason::Killed), _, None) => "killed".to_owned(),
        (Some(CompletionReason::Lost), _, _) => "lost (its exit status is unknown)".to_owned(),
        (_, Some(code), _) => format!("exited {code}"),
        (_, None, Some(sig)) => format!("died of {sig}"),
        _ => output::visible(answer.status).into_owned(),
    };
    // Processes of its tree that outlived it, still held by the session.
    match answer.n_leftovers {
        n if n > 0 => format!("{id} {how}, {n} left"),
        _ => format!("{id} {how}"),
    }
}

/// A time limit as it was given: `90s`, `5m`, `2h`, `3d` when it is whole, else
/// seconds.
fn limit_text(seconds: u64) -> String {
    match seconds {
        s if s >= 86_400 && s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s >= 3_600 && s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests;

/// For a person: a line on stderr when an answer's output is incomplete because
/// the log did not keep every byte (a full disk, or `log_cap_bytes`).
pub(crate) fn warn_not_kept(n_not_kept: u64, log_path: &std::path::Path) {
    if n_not_kept == 0 {
        return;
    }
    let log = log_path.to_string_lossy();
    let log = if log.is_empty() {
        "its log".into()
    } else {
        log
    };
    crate::output::err_line(&format!(
        "herd: output incomplete: {n_not_kept} bytes of it were not kept in {} (the disk was full or the log reached log_cap_bytes)",
        crate::output::visible(&log)
    ));
}
