//! The client commands: turn arguments into daemon calls and answers into output.
//!
//! Every command prints JSON with `--json` (the daemon's answer, unchanged) and
//! tidy text otherwise. Exit codes follow `exit::Code`.
//!
//! Tidy text shows every string from an answer through `output::visible` (or
//! `output::visible_lines` for a preview block): a job's command line and output
//! are the job's to choose, and must not drive the user's terminal. `herd logs`
//! alone prints the job's bytes as they are.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Context;
use herd_persistence::Home;
use serde_json::{Value, json};

use crate::args::{
    CleanArgs, EventsArgs, HandoffArgs, IdArgs, KillArgs, LogsArgs, PsArgs, RunArgs, StdinArgs,
    WaitArgs,
};
use crate::client::{CallError, Client};
use crate::exit::{Code, Failure};
use crate::output;
use crate::protocol;

/// The command line a job runs: one argument as is, several shell-quoted.
pub(crate) fn command_line(words: &[String]) -> String {
    match words {
        [single] => single.clone(),
        many => shell_words::join(many),
    }
}

/// `herd run`.
pub(crate) async fn run(home: &Home, args: RunArgs) -> anyhow::Result<()> {
    let cwd = match args.cwd {
        Some(dir) => std::path::absolute(&dir)
            .with_context(|| format!("cannot resolve the directory {}", dir.display()))?,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    if !cwd.is_dir() {
        return Err(Failure::new(
            Code::Usage,
            format!("--cwd {} is not a directory", cwd.display()),
        )
        .into());
    }
    let owner = args.owner.resolve("cli");
    // A forwarded variable carries the value from this shell, not the daemon's.
    let mut env = args.env;
    for name in &args.forward_env {
        if let Ok(value) = std::env::var(name)
            && !env.iter().any(|(k, _)| k == name)
        {
            env.push((name.clone(), value));
        }
    }
    let mut params = json!({
        "command": command_line(&args.command),
        "owner": owner,
        "task_id": args.task,
        "cwd": cwd,
        "env": env,
        "forward_env": args.forward_env,
        "pty": args.pty,
        "notify": args.notify,
        "watch": args.watch,
        "heartbeat_seconds": args.heartbeat,
        "persist_on_release": args.persist,
    });
    if let Some(name) = &args.name {
        params["name"] = json!(name);
    }
    if let Some(seconds) = args.time_limit {
        params["time_limit_seconds"] = json!(seconds);
    }
    if let Some(host) = &args.host {
        params["host"] = json!(host);
    }
    let mut client = Client::connect(home).await?;
    // An older daemon would refuse `host` as an unknown field: say what to do.
    if args.host.is_some() && !client.hello.serves("hosts") {
        return Err(old_daemon_for_hosts(&client.hello.daemon));
    }
    // An older daemon would ignore the limit and let the job run forever.
    if args.time_limit.is_some() && !client.hello.serves("spawn.time_limit") {
        return Err(Failure::new(
            Code::Usage,
            format!(
                "--time-limit needs a newer daemon: the running one (herd {}) would ignore it; run `herd shutdown --keep-jobs` to replace it with this version, then retry",
                client.hello.daemon
            ),
        )
        .into());
    }
    // The job runs in this shell's environment, not the daemon's (B36).
    if client.hello.serves("spawn.caller_env") {
        params["caller_env"] = json!(herd_core::utf8_environment());
    }
    match client.call("spawn", params).await {
        Ok(info) if args.wait => {
            let id = info["session_id"].as_str().unwrap_or_default().to_owned();
            if !args.json {
                for key in ["pty_note", "note"] {
                    if let Some(note) = info[key].as_str() {
                        output::err_line(&format!("note: {note}"));
                    }
                }
                let result = follow::one(client, &id, 0).await?;
                return follow::finished(home, None, result, &id, false).await;
            }
            follow::finished(home, Some(client), None, &id, true).await
        }
        Ok(info) => {
            if args.json {
                output::json_line(&info)?;
            } else {
                output::line(info["session_id"].as_str().unwrap_or_default())?;
                for key in ["pty_note", "note"] {
                    if let Some(note) = info[key].as_str() {
                        output::err_line(&format!("note: {note}"));
                    }
                }
            }
            Ok(())
        }
        Err(CallError::Rpc(err)) if err.code == protocol::GUARDED => {
            if args.json {
                output::json_line(&err.data.clone().unwrap_or(Value::Null))?;
            }
            Err(Failure::new(Code::Failed, err.message).into())
        }
        Err(err) => Err(err.into_anyhow()),
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

/// `herd ps`.
pub(crate) async fn ps(home: &Home, args: PsArgs) -> anyhow::Result<()> {
    let owner = if args.all {
        args.owner.owner.clone()
    } else {
        Some(args.owner.resolve("cli"))
    };
    let mut client = Client::connect(home).await?;
    let mut params = json!({"owner": owner, "all": args.all});
    let by_host = args.host.is_some() || args.all_hosts;
    if by_host {
        if !client.hello.serves("hosts") {
            return Err(old_daemon_for_hosts(&client.hello.daemon));
        }
        params["host"] = json!(args.host);
        params["all_hosts"] = json!(args.all_hosts);
    }
    let answer = client.request("list", params).await?;
    if args.json {
        return Ok(output::json_pretty(&answer)?);
    }
    // A host that did not answer: its rows are the last known ones.
    for host in answer["hosts"].as_array().into_iter().flatten() {
        if host["status"] == "unreachable" {
            output::err_line(&format!(
                "host {} is unreachable since {}: {} (its jobs show their last known state)",
                output::visible(host["name"].as_str().unwrap_or_default()),
                host["since"].as_str().unwrap_or("?"),
                output::visible(host["message"].as_str().unwrap_or_default()),
            ));
        }
    }
    let rows = answer["processes"].as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        output::line(if args.all {
            "no sessions"
        } else {
            "no running sessions (herd ps --all shows finished ones and every owner)"
        })?;
        return Ok(());
    }
    let mut table = comfy_table::Table::new();
    // Rows never wrap: the command and the last line are cut to what the terminal
    // has room for.
    table
        .load_preset(comfy_table::presets::NOTHING)
        .set_content_arrangement(comfy_table::ContentArrangement::Disabled);
    // Every owner's sessions: say whose each one is (an agent's is `mcp-<12 hex>`).
    let by_owner = owner.is_none();
    let mut header = vec!["ID", "STATE", "PID", "AGE", "COMMAND", "LAST LINE"];
    if by_owner {
        header.insert(1, "OWNER");
    }
    if by_host {
        header.insert(1, "HOST");
    }
    let mut cells: Vec<(Vec<String>, String, String)> = Vec::new();
    for row in rows {
        let state = match (row["status"].as_str(), row["completion_reason"].as_str()) {
            (Some("running"), _) | (_, None) => {
                output::visible(row["status"].as_str().unwrap_or("?")).into_owned()
            }
            // `exited 0`, `killed (SIGTERM)`, `died of SIGSEGV`, `lost …`.
            _ => ending(&row, "")
                .split_once(' ')
                .map(|(_, how)| how.to_owned())
                .unwrap_or_default(),
        };
        let id = output::visible(row["session_id"].as_str().unwrap_or_default()).into_owned();
        let mut fixed = vec![
            match row["name"].as_str() {
                Some(name) => format!("{id} {}", output::visible(name)),
                None => id,
            },
            state,
            row["pid"]
                .as_i64()
                .map(|p| p.to_string())
                .unwrap_or_default(),
            // A finished session's age stops: how long it ran.
            age(row["duration_seconds"]
                .as_f64()
                .or_else(|| row["uptime_seconds"].as_f64())
                .unwrap_or_default()),
        ];
        if by_owner {
            fixed.insert(
                1,
                output::visible(row["owner_task_id"].as_str().unwrap_or_default()).into_owned(),
            );
        }
        if by_host {
            let host = output::visible(row["host"].as_str().unwrap_or("local")).into_owned();
            fixed.insert(
                1,
                if row["stale"] == true {
                    format!("{host} (unreachable)")
                } else {
                    host
                },
            );
        }
        cells.push((
            fixed,
            row["command"].as_str().unwrap_or_default().to_owned(),
            last_line(row["output_preview"].as_str().unwrap_or_default()).to_owned(),
        ));
    }
    let (command_width, line_width) = flexible_widths(&header, &cells, table.width());
    table.set_header(header);
    for (fixed, command, line) in cells {
        let mut row = fixed;
        row.push(truncate(&command, command_width));
        row.push(truncate(&line, line_width));
        table.add_row(row);
    }
    output::line(&table.to_string())?;
    Ok(())
}

/// The widths the command and last-line columns get: what a terminal of
/// `width` columns leaves after the fixed ones (55% and 45% of it, at least 8
/// each); 40 and 50 off a terminal.
fn flexible_widths(
    header: &[&str],
    cells: &[(Vec<String>, String, String)],
    width: Option<u16>,
) -> (usize, usize) {
    let Some(width) = width else {
        return (40, 50);
    };
    let n_fixed = header.len() - 2;
    let fixed: usize = (0..n_fixed)
        .map(|col| {
            cells
                .iter()
                .map(|(f, _, _)| f[col].chars().count())
                .chain([header[col].len()])
                .max()
                .unwrap_or(0)
        })
        .sum();
    // One space of padding on each side of every column.
    let room = usize::from(width).saturating_sub(fixed + 2 * header.len());
    let command = (room * 55 / 100).max(8);
    (command, room.saturating_sub(command).max(8))
}

/// `45s`, `18m5s`, `2h3m`, `3d4h`.
fn age(seconds: f64) -> String {
    let s = seconds.max(0.0) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        3600..86400 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
    }
}

/// The last non-blank line of `text`.
fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim_end()
}

/// `text` on one line, rendered safe for a terminal and cut to `max` characters,
/// with an ellipsis when cut.
///
/// Whitespace runs (newlines and tabs included) become one space first; what is
/// rendered is measured after rendering, so the column keeps its width.
fn truncate(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let shown = output::visible(&flat);
    if shown.chars().count() <= max {
        shown.into_owned()
    } else {
        let mut cut: String = shown.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// `herd poll`.
pub(crate) async fn poll(home: &Home, args: IdArgs) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    let answer = client.request("poll", json!({"id": args.id})).await?;
    if args.json {
        return Ok(output::json_pretty(&answer)?);
    }
    print_fields(
        &answer,
        &[
            "session_id",
            "status",
            "pid",
            "uptime_seconds",
            "exit_code",
            "signal",
            "completion_reason",
            "termination_source",
            "command",
            "log_path",
        ],
    )?;
    if let Some(preview) = answer["output_preview"].as_str().filter(|p| !p.is_empty()) {
        output::line("output:")?;
        output::line(&output::visible_lines(preview.trim_end()))?;
    }
    Ok(())
}

/// Prints `key: value` for the keys that are present and not null, each value
/// rendered safe for a terminal.
fn print_fields(answer: &Value, keys: &[&str]) -> anyhow::Result<()> {
    for key in keys {
        match &answer[*key] {
            Value::Null => {}
            Value::String(s) => output::line(&format!("{key}: {}", output::visible(s)))?,
            other => output::line(&format!("{key}: {other}"))?,
        }
    }
    Ok(())
}

/// `herd logs`.
pub(crate) async fn logs(home: &Home, args: LogsArgs) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    if !args.follow && (args.offset.is_some() || args.limit.is_some()) {
        let [single] = args.ids.as_slice() else {
            return Err(Failure::new(
                Code::Usage,
                "--offset and --limit page one session's log: give one id (several need --follow)",
            )
            .into());
        };
        let answer = client
            .request(
                "log",
                json!({"id": single, "offset": args.offset, "limit": args.limit}),
            )
            .await?;
        if args.json {
            return Ok(output::json_pretty(&answer)?);
        }
        let text = answer["output"].as_str().unwrap_or_default();
        output::raw(text)?;
        if !text.is_empty() && !text.ends_with('\n') {
            output::raw("\n")?;
        }
        if let Some(note) = answer["note"].as_str() {
            output::err_line(&format!("note: {note}"));
        }
        return Ok(());
    }
    if args.follow {
        return follow::logs(home, client, &args).await;
    }
    let [single] = args.ids.as_slice() else {
        return Err(Failure::new(
            Code::Usage,
            "several ids (or --all) need --follow: `herd logs -f ID ID...` interleaves them",
        )
        .into());
    };
    let id = client.request("lookup", json!({"id": single})).await?["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut from_byte = 0u64;
    let mut whole = String::new();
    loop {
        let chunk = client
            .request("log_chunk", json!({"id": id, "from_byte": from_byte}))
            .await?;
        let text = chunk["output"].as_str().unwrap_or_default();
        let next = chunk["next_byte"].as_u64().unwrap_or(from_byte);
        if args.json {
            whole.push_str(text);
        } else {
            output::raw(text)?;
        }
        if next <= from_byte {
            break;
        }
        from_byte = next;
    }
    if args.json {
        output::json_pretty(&json!({"session_id": id, "output": whole, "next_byte": from_byte}))?;
    }
    Ok(())
}

/// How far back `-n N -f` looks for the last N lines.
const TAIL_WINDOW_BYTES: u64 = 1 << 20;

/// Prints the last `n` lines of the log as it is now; the byte offset after them,
/// where following starts (so nothing is printed twice or skipped).
pub(crate) async fn print_last_lines(client: &mut Client, id: &str, n: u64) -> anyhow::Result<u64> {
    let (text, from) = last_lines(client, id, n).await?;
    output::raw(&text)?;
    Ok(from)
}

/// The last `n` lines of the log as it is now, and the byte offset after them.
pub(crate) async fn last_lines(
    client: &mut Client,
    id: &str,
    n: u64,
) -> anyhow::Result<(String, u64)> {
    // The log's current end, then its last window.
    let end = client
        .request(
            "log_chunk",
            json!({"id": id, "from_byte": u64::MAX / 2, "max_bytes": 1}),
        )
        .await?["next_byte"]
        .as_u64()
        .unwrap_or(0);
    let mut from = end.saturating_sub(TAIL_WINDOW_BYTES);
    let mut text = String::new();
    while from < end {
        let chunk = client
            .request("log_chunk", json!({"id": id, "from_byte": from}))
            .await?;
        text.push_str(chunk["output"].as_str().unwrap_or_default());
        let next = chunk["next_byte"].as_u64().unwrap_or(end);
        if next <= from {
            break;
        }
        from = next;
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let keep = usize::try_from(n).unwrap_or(usize::MAX).min(lines.len());
    Ok((lines[lines.len() - keep..].concat(), from))
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
    format!("{id} {how}")
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

/// `herd wait`.
pub(crate) async fn wait(home: &Home, args: WaitArgs) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    if args.follow {
        let id = client.request("lookup", json!({"id": args.id})).await?["session_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if args.json {
            return follow::finished(home, Some(client), None, &id, true).await;
        }
        let result = follow::one(client, &id, 0).await?;
        return follow::finished(home, None, result, &id, false).await;
    }
    let call = client.request(
        "wait",
        json!({"id": args.id, "timeout_seconds": args.timeout}),
    );
    let answer = if std::io::stderr().is_terminal() && !args.json {
        with_spinner(call, &args.id).await?
    } else {
        call.await?
    };
    let succeeded = answer["status"] == "exited" && answer["exit_code"] == json!(0);
    if args.json {
        output::json_pretty(&answer)?;
    } else {
        let line = if answer["status"] == "exited" {
            // How it ended, in the words ps uses: `exited 0`, `killed (SIGTERM)`,
            // `killed (time limit 5m, SIGTERM)`.
            ending(&answer, &args.id)
        } else {
            format!(
                "{} {}",
                output::visible(answer["session_id"].as_str().unwrap_or(&args.id)),
                output::visible(answer["status"].as_str().unwrap_or("unknown"))
            )
        };
        output::line(&line)?;
        if let Some(note) = answer["note"].as_str() {
            output::line(&output::visible(note))?;
        }
        if let Some(text) = answer["output"].as_str().filter(|t| !t.is_empty()) {
            let text = output::visible_lines(text);
            output::raw(&text)?;
            if !text.ends_with('\n') {
                output::raw("\n")?;
            }
        }
    }
    if succeeded {
        Ok(())
    } else {
        Err(Failure::silent(Code::Failed).into())
    }
}

/// Awaits `call` while drawing a spinner on stderr.
async fn with_spinner<F: std::future::Future<Output = anyhow::Result<Value>>>(
    call: F,
    id: &str,
) -> anyhow::Result<Value> {
    use std::io::Write;
    const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
    let mut tick = tokio::time::interval(Duration::from_millis(120));
    let mut frame = 0usize;
    tokio::pin!(call);
    let result = loop {
        tokio::select! {
            result = &mut call => break result,
            _ = tick.tick() => {
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r{} waiting for {id}", FRAMES[frame % FRAMES.len()]);
                let _ = err.flush();
                frame += 1;
            }
        }
    };
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\x1b[2K");
    let _ = err.flush();
    result
}

/// `herd kill`: one or several sessions, or every running one of the owner, at
/// once (each tree kill waits its grace, so they run together).
pub(crate) async fn kill(home: &Home, args: KillArgs) -> anyhow::Result<()> {
    let ids = if args.all {
        let owner = args.owner.resolve("cli");
        let mut client = Client::connect(home).await?;
        let listed = client.request("list", json!({"owner": owner})).await?;
        listed["processes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|row| row["session_id"].as_str().map(str::to_owned))
            .collect()
    } else {
        args.ids.clone()
    };
    if ids.is_empty() {
        output::err_line("no running sessions to kill");
        return Ok(());
    }
    let answers = futures::future::join_all(ids.iter().map(|id| async move {
        let mut client = Client::connect(home).await?;
        client.request("kill", json!({"id": id})).await
    }))
    .await;
    let several = ids.len() > 1;
    let mut failed = false;
    for (id, answer) in ids.iter().zip(answers) {
        let answer = match answer {
            Ok(answer) => answer,
            Err(err) if several => {
                output::err_line(&format!("herd: {id}: {err:#}"));
                failed = true;
                continue;
            }
            Err(err) => return Err(err),
        };
        let status = answer["status"].as_str().unwrap_or("unknown").to_owned();
        if args.json && several {
            output::json_line(&answer)?;
        } else if args.json {
            output::json_pretty(&answer)?;
        } else {
            let shown = output::visible(answer["session_id"].as_str().unwrap_or(id)).into_owned();
            match status.as_str() {
                "killed" => output::line(&format!("{shown} killed"))?,
                "already_exited" => {
                    let how = ending(&answer, id)
                        .split_once(' ')
                        .map(|(_, how)| how.to_owned())
                        .unwrap_or_default();
                    output::line(&format!("{shown} had already ended: {how}"))?;
                }
                _ => output::line(&format!(
                    "{shown}: {}",
                    output::visible(answer["error"].as_str().unwrap_or("kill incomplete"))
                ))?,
            }
        }
        failed |= status == "kill_incomplete";
    }
    if failed {
        return Err(Failure::silent(Code::Failed).into());
    }
    Ok(())
}

/// `herd clean`.
pub(crate) async fn clean(home: &Home, args: CleanArgs) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    if !client.hello.serves("clean") {
        return Err(Failure::new(
            Code::Failed,
            "this daemon cannot forget sessions (it predates clean); restart it with `herd shutdown --keep-jobs`",
        )
        .into());
    }
    let owner = (!args.every_owner).then(|| args.owner.resolve("cli"));
    let answer = client
        .request(
            "clean",
            json!({"owner": owner, "older_than_seconds": args.older_than}),
        )
        .await?;
    if args.json {
        return Ok(output::json_pretty(&answer)?);
    }
    let n = answer["forgotten"].as_u64().unwrap_or(0);
    output::line(&if n == 1 {
        "forgot 1 finished session, its log and its receipt".to_owned()
    } else {
        format!("forgot {n} finished sessions, their logs and their receipts")
    })?;
    Ok(())
}

/// `herd send` / `herd submit`.
pub(crate) async fn stdin(home: &Home, args: StdinArgs, method: &str) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    let answer = client
        .request(method, json!({"id": args.id, "data": args.text}))
        .await?;
    stdin_answer(&answer, args.json)
}

/// `herd close`.
pub(crate) async fn close(home: &Home, args: IdArgs) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    let answer = client.request("close", json!({"id": args.id})).await?;
    stdin_answer(&answer, args.json)
}

/// `herd resize ID --rows R --cols C`.
pub(crate) async fn resize(home: &Home, args: crate::args::ResizeArgs) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    let answer = client
        .request(
            "resize",
            json!({"id": args.id, "rows": args.rows, "cols": args.cols}),
        )
        .await?;
    stdin_answer(&answer, args.json)
}

/// Prints a stdin answer; exits 1 unless it is `ok`.
fn stdin_answer(answer: &Value, json: bool) -> anyhow::Result<()> {
    if json {
        output::json_line(answer)?;
    }
    match answer["status"].as_str() {
        Some("ok") => {
            if !json {
                match answer["bytes_written"].as_u64() {
                    Some(n) => output::line(&format!("ok ({n} bytes written)"))?,
                    None => {
                        output::line(&output::visible(answer["message"].as_str().unwrap_or("ok")))?
                    }
                }
            }
            Ok(())
        }
        Some("already_exited") => {
            Err(Failure::new(Code::Failed, "the process has already exited").into())
        }
        _ => Err(Failure::new(
            Code::Failed,
            answer["message"]
                .as_str()
                .unwrap_or("writing to stdin failed")
                .to_owned(),
        )
        .into()),
    }
}

/// `herd events`.
pub(crate) async fn events(home: &Home, args: EventsArgs) -> anyhow::Result<()> {
    let owner = args.owner.resolve("cli");
    let style = EventStyle::new(&args);
    let mut client = Client::connect(home).await?;
    if !args.follow {
        // Taken as a lease, acknowledged only once printed (or given back for
        // --peek): a write to a closed pipe loses nothing.
        let leased = client.hello.serves("drain.lease");
        if args.peek && !leased {
            return Err(Failure::new(
                Code::Failed,
                "this daemon cannot show notifications without taking them (it predates drain leases); \
                 restart it with `herd shutdown --keep-jobs`",
            )
            .into());
        }
        let answer = client
            .request("drain", json!({"owner": owner, "lease": leased}))
            .await?;
        for event in answer["events"].as_array().into_iter().flatten() {
            print_event(event, &style)?;
        }
        if let Some(lease) = answer["lease"].as_u64() {
            let settle = if args.peek {
                "drain.release"
            } else {
                "drain.ack"
            };
            client.request(settle, json!({"lease": lease})).await?;
        }
        return Ok(());
    }
    let request = client
        .send("events.follow", json!({"owner": owner}))
        .await
        .map_err(|e| CallError::Io(e).into_anyhow())?;
    loop {
        let Some(message) = client
            .next_message()
            .await
            .map_err(|e| CallError::Io(e).into_anyhow())?
        else {
            return Ok(());
        };
        if message.method.as_deref() == Some("event") {
            print_event(message.params.as_ref().unwrap_or(&Value::Null), &style)?;
        } else if message.id == json!(request)
            && let Some(error) = message.error
        {
            return Err(crate::client::rpc_failure(error));
        }
    }
}

/// How `herd events` prints: JSON lines, or one line for a person, in colour or not.
#[derive(Debug, Clone, Copy)]
struct EventStyle {
    human: bool,
    color: bool,
}

impl EventStyle {
    fn new(args: &EventsArgs) -> EventStyle {
        let terminal = std::io::stdout().is_terminal();
        let color = match args.color {
            crate::args::ColorChoice::Always => true,
            crate::args::ColorChoice::Never => false,
            crate::args::ColorChoice::Auto => {
                terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        };
        EventStyle {
            human: terminal && !args.json,
            color,
        }
    }
}

/// One event: a JSON line, or for a person `HH:MM:SS proc_… what  command — first line`.
fn print_event(event: &Value, style: &EventStyle) -> std::io::Result<()> {
    if !style.human {
        return output::json_line(event);
    }
    let paint = |code: &str, text: &str| {
        if style.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    };
    let id = output::visible(event["session_id"].as_str().unwrap_or("herd")).into_owned();
    let (what, colour) = match event["type"].as_str().unwrap_or_default() {
        "completion" => {
            let how = ending(event, &id)
                .split_once(' ')
                .map(|(_, how)| how.to_owned())
                .unwrap_or_default();
            let ok = event["exit_code"] == json!(0) && event["completion_reason"] == "exited";
            (how, if ok { "32" } else { "31" })
        }
        "heartbeat" => (
            format!(
                "still running ({}s, beat {})",
                event["elapsed"].as_u64().unwrap_or(0),
                event["seq"].as_u64().unwrap_or(0)
            ),
            "36",
        ),
        "watch_match" => (
            format!(
                "matched {:?}",
                output::visible(event["pattern"].as_str().unwrap_or_default())
            ),
            "33",
        ),
        other => (output::visible(other).into_owned(), "35"),
    };
    let time = clock_now();
    let command = truncate(event["command"].as_str().unwrap_or_default(), 40);
    let first = event["output"]
        .as_str()
        .or_else(|| event["message"].as_str())
        .and_then(|o| o.lines().find(|l| !l.trim().is_empty()))
        .map(|l| truncate(l, 60))
        .unwrap_or_default();
    let mut line = format!("{time} {id} {}", paint(colour, &what));
    if !command.is_empty() {
        line.push_str(&format!("  {command}"));
    }
    if !first.is_empty() {
        line.push_str(&format!(" — {first}"));
    }
    output::line(&line)
}

/// The wall-clock time as `HH:MM:SS` (UTC, as the rest of herd's times).
fn clock_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let day = secs % 86_400;
    format!("{:02}:{:02}:{:02}", day / 3600, day % 3600 / 60, day % 60)
}

/// `herd handoff`.
pub(crate) async fn handoff(home: &Home, args: HandoffArgs) -> anyhow::Result<()> {
    let owner = args.owner.resolve("cli");
    let mut client = Client::connect(home).await?;
    let answer = client
        .request(
            "handoff",
            json!({"id": args.id, "from": owner, "to": args.to, "note": args.note}),
        )
        .await?;
    if args.json {
        output::json_pretty(&answer)?;
    } else {
        output::line(&format!("{} handed off to {}", args.id, args.to))?;
    }
    Ok(())
}

/// `herd shutdown`: stops the daemon and waits until it has gone.
pub(crate) async fn shutdown(
    home: &Home,
    json: bool,
    keep_jobs: bool,
    yes: bool,
) -> anyhow::Result<()> {
    let Some(mut client) = Client::try_connect(home).await? else {
        if json {
            output::json_line(&json!({"status": "not_running"}))?;
        } else {
            output::line(&format!(
                "no daemon is running for {}",
                home.root().display()
            ))?;
        }
        return Ok(());
    };
    let pid = client.hello.pid;
    let running = client.request("status", json!({})).await?["running"]
        .as_u64()
        .unwrap_or(0);
    // A person at a terminal is asked before running jobs are killed; a script
    // (no terminal) or --yes is not.
    if running > 0 && !keep_jobs && !yes && !json && std::io::stdin().is_terminal() {
        let question = format!(
            "{running} job{} running; shutting down kills {}. Continue? [y/N] ",
            if running == 1 { " is" } else { "s are" },
            if running == 1 { "it" } else { "them all" }
        );
        if !output::confirm(&question)? {
            return Err(Failure::new(
                Code::Usage,
                "nothing stopped; `herd shutdown --keep-jobs` stops the daemon and leaves the jobs running",
            )
            .into());
        }
    }
    let params = if keep_jobs {
        json!({"keep_jobs": true})
    } else {
        json!({})
    };
    client.request("shutdown", params).await?;
    // The daemon keeps this connection open until its process ends.
    while let Ok(Some(_)) = client.next_message().await {}
    let jobs = if keep_jobs { "kept" } else { "killed" };
    let plural = if running == 1 { "" } else { "s" };
    if json {
        output::json_line(
            &json!({"status": "stopped", "pid": pid, "jobs": jobs, "running_jobs": running}),
        )?;
    } else if keep_jobs {
        output::line(&format!(
            "daemon stopped (pid {pid}); its {running} running job{plural} keep running and the next daemon re-attaches them"
        ))?;
    } else {
        output::line(&format!(
            "daemon stopped (pid {pid}); {running} running job{plural} killed"
        ))?;
    }
    Ok(())
}

pub(crate) mod follow;
#[cfg(test)]
mod tests;
