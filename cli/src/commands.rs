//! The client commands: turn arguments into daemon calls and answers into output.
//!
//! Every command prints JSON with `--json` (the daemon's answer, unchanged) and
//! tidy text otherwise. Exit codes follow `exit::Code`.
//!
//! Tidy text shows every string from an answer through `output::visible` (or
//! `output::visible_lines` for a preview block): a job's command line and output
//! are the job's to choose, and must not drive the user's terminal. `herd logs`
//! alone prints the job's bytes as they are.

use serde_json::Value;

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

/// How a job ended, for a person: `proc_… exited 0`, `proc_… killed (SIGTERM)`.
pub(crate) fn ending(answer: &Value, id: &str) -> String {
    let id = output::visible(answer["session_id"].as_str().unwrap_or(id)).into_owned();
    let signal = answer["signal"]
        .as_i64()
        .and_then(|s| i32::try_from(s).ok())
        .and_then(|s| nix::sys::signal::Signal::try_from(s).ok())
        .map(|s| s.as_str().to_owned());
    let how = match (
        answer["completion_reason"].as_str(),
        answer["exit_code"].as_i64(),
        signal,
    ) {
        (Some("killed"), _, sig) if answer["termination_source"] == "time_limit" => {
            // `killed (time limit 5m, SIGTERM)`.
            let limit = answer["time_limit_seconds"].as_u64().map_or_else(
                || "time limit".to_owned(),
                |s| format!("time limit {}", limit_text(s)),
            );
            match sig {
                Some(sig) => format!("killed ({limit}, {sig})"),
                None => format!("killed ({limit})"),
            }
        }
        (Some("killed"), _, Some(sig)) if answer["termination_source"] == "restarted" => {
            format!("killed (restarted, {sig})")
        }
        (Some("killed"), _, Some(sig)) => format!("killed ({sig})"),
        (Some("killed"), _, None) => "killed".to_owned(),
        (Some("lost"), _, _) => "lost (its exit status is unknown)".to_owned(),
        (_, Some(code), _) => format!("exited {code}"),
        (_, None, Some(sig)) => format!("died of {sig}"),
        _ => output::visible(answer["status"].as_str().unwrap_or("unknown")).into_owned(),
    };
    // Processes of its tree that outlived it, still held by the session.
    match answer["leftovers"].as_array().map(Vec::len) {
        Some(n) if n > 0 => format!("{id} {how}, {n} left"),
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
pub(crate) fn warn_not_kept(answer: &serde_json::Value) {
    let n = answer["bytes_not_kept"].as_u64().unwrap_or(0);
    if n == 0 {
        return;
    }
    let log = answer["log_path"].as_str().unwrap_or("its log");
    crate::output::err_line(&format!(
        "herd: output incomplete: {n} bytes of it were not kept in {} (the disk was full or the log reached log_cap_bytes)",
        crate::output::visible(log)
    ));
}
