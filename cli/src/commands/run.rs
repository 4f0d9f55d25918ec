//! `herd run`: start a job, in the background or followed to its end.

use anyhow::Context;
use herd_persistence::Home;
use serde_json::{Value, json};

use std::io::IsTerminal;

use super::{command_line, follow, foreground, old_daemon_for_hosts};
use crate::args::RunArgs;
use crate::client::{CallError, Client};
use crate::exit::{Code, Failure};
use crate::output;
use crate::protocol;

/// Adds `kill_leftovers` and `limits` (issue 36) to the spawn's params; returns the
/// limits.
fn add_containment(
    params: &mut Value,
    kill_leftovers: bool,
    limits: herd_core::Limits,
) -> herd_core::Limits {
    if kill_leftovers {
        params["kill_leftovers"] = json!(true);
    }
    if !limits.is_empty() {
        params["limits"] = json!(limits);
    }
    limits
}

/// `env` plus each forwarded variable not set there: a forwarded variable carries the
/// value from this shell, not the daemon's.
fn with_forwarded(mut env: Vec<(String, String)>, forward: &[String]) -> Vec<(String, String)> {
    for name in forward {
        if let Ok(value) = std::env::var(name)
            && !env.iter().any(|(k, _)| k == name)
        {
            env.push((name.clone(), value));
        }
    }
    env
}

/// The refusal of `flags` by a daemon too old to honour them.
fn old_daemon_for(flags: &str, daemon: &str) -> anyhow::Error {
    Failure::new(
        Code::Usage,
        format!(
            "{flags} needs a newer daemon: the running one (herd {daemon}) would ignore it; run `herd shutdown --keep-jobs` to replace it with this version, then retry"
        ),
    )
    .into()
}

/// What `herd run` leaves to its caller.
#[derive(Debug)]
pub(crate) enum Ran {
    /// Nothing: the job started (and with --wait, was followed to its end).
    Done,
    /// A `--pty --wait` job on this terminal, to attach to (`attach::started`).
    Attach(String),
}

/// Follows the job `info` describes to its end (`--wait`) as a foreground
/// program; a PTY job on this terminal is left to attach to.
async fn stay(home: &Home, client: Client, info: &Value, json: bool) -> anyhow::Result<Ran> {
    let job = foreground::Job::of(info);
    let id = job.id.clone();
    if json {
        let until_end = follow::finished(home, Some(client), None, &id, true);
        foreground::hold(home, &job, until_end).await?;
        return Ok(Ran::Done);
    }
    print_notes(info);
    // A PTY job on this terminal is attached: keys, size and screen.
    if job.is_pty && std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        return Ok(Ran::Attach(id));
    }
    let until_end = async {
        let result = follow::one(home, client, &id, 0).await?;
        follow::finished(home, None, result, &id, false).await
    };
    foreground::hold(home, &job, until_end).await?;
    Ok(Ran::Done)
}

/// `herd run`.
pub(crate) async fn run(home: &Home, args: RunArgs) -> anyhow::Result<Ran> {
    let cwd = job_cwd(args.cwd.as_deref())?;
    let owner = args.owner.resolve("cli");
    let env = with_forwarded(args.env, &args.forward_env);
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
    if let Some(group) = &args.queue.group {
        params["group"] = json!(group);
    }
    if !args.queue.after.is_empty() {
        params["after"] = json!(args.queue.after);
    }
    if !args.queue.after_ready.is_empty() {
        params["after_ready"] = json!(args.queue.after_ready);
    }
    let limits = add_containment(
        &mut params,
        args.kill_leftovers,
        herd_core::Limits {
            memory_bytes: args.memory,
            cpu_millis: args.cpus,
            pids: args.pids,
        },
    );
    let mut client = Client::connect(home).await?;
    // An older daemon would refuse `host` as an unknown field: say what to do.
    if args.host.is_some() && !client.hello.serves("hosts") {
        return Err(old_daemon_for_hosts(&client.hello.daemon));
    }
    // An older daemon would ignore these and let the job run unbounded.
    for (asked, capability, flags) in [
        (
            args.time_limit.is_some(),
            "spawn.time_limit",
            "--time-limit",
        ),
        (
            !limits.is_empty(),
            "spawn.limits",
            "--memory, --cpus and --pids",
        ),
        (
            args.kill_leftovers,
            "spawn.kill_leftovers",
            "--kill-leftovers",
        ),
        (
            args.queue.any(),
            "queue",
            "--group, --after and --after-ready",
        ),
    ] {
        if asked && !client.hello.serves(capability) {
            return Err(old_daemon_for(flags, &client.hello.daemon));
        }
    }
    // The job runs in this shell's environment, not the daemon's (B36).
    if client.hello.serves("spawn.caller_env") {
        params["caller_env"] = json!(herd_core::utf8_environment());
    }
    match client.call("spawn", params).await {
        Ok(info) if args.wait => stay(home, client, &info, args.json).await,
        Ok(info) => {
            if args.json {
                output::json_line(&info)?;
            } else {
                output::line(info["session_id"].as_str().unwrap_or_default())?;
                print_notes(&info);
            }
            Ok(Ran::Done)
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

/// The directory the job starts in: `--cwd` made absolute, or this shell's.
fn job_cwd(dir: Option<&std::path::Path>) -> anyhow::Result<std::path::PathBuf> {
    let cwd = match dir {
        Some(dir) => std::path::absolute(dir)
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
    Ok(cwd)
}

/// The spawn answer's notes (a PTY fallback, a dropped option), on stderr.
fn print_notes(info: &Value) {
    for key in ["pty_note", "note"] {
        if let Some(note) = info[key].as_str() {
            output::err_line(&format!("note: {note}"));
        }
    }
}
