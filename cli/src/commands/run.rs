//! `herd run`: start a job, in the background or followed to its end.

use anyhow::Context;
use herd_persistence::Home;
use herd_protocol::answers::{SessionStatus, SpawnAnswer};
use herd_protocol::methods::{Poll, Spawn};
use herd_protocol::params::{IdParams, Limits, RestartPolicy, SpawnParams};
use herd_protocol::{Method, capabilities};
use serde_json::Value;

use std::io::IsTerminal;

use super::{command_line, follow, foreground, old_daemon_for_hosts};
use crate::args::RunArgs;
use crate::client::{CallError, Client, Pipelined, answer_of, params_of};
use crate::exit::{Code, Failure};
use crate::output;
use crate::protocol;

/// Adds `kill_leftovers` and `limits` to the spawn's params.
fn add_containment(params: &mut SpawnParams, kill_leftovers: bool, limits: Limits) {
    if kill_leftovers {
        params.kill_leftovers = Some(true);
    }
    if !limits.is_empty() {
        params.limits = Some(limits);
    }
}

/// `--max-restarts` when `--restart` is given alone.
const DEFAULT_MAX_RESTARTS: u32 = 5;
/// `--restart-delay` when `--restart` is given alone, milliseconds.
const DEFAULT_RESTART_DELAY_MS: u64 = 1_000;

/// Adds `ready`, `ready_port` and `restart` to the spawn's params.
fn add_readiness(params: &mut SpawnParams, args: &RunArgs) {
    params.ready.clone_from(&args.ready);
    params.ready_port = args.ready_port;
    if let Some(when) = args.restart {
        params.restart = Some(RestartPolicy {
            policy: match when {
                crate::args::RestartWhen::OnFailure => "on-failure",
                crate::args::RestartWhen::Always => "always",
            }
            .to_owned(),
            max_restarts: args.max_restarts.unwrap_or(DEFAULT_MAX_RESTARTS),
            delay_ms: args.restart_delay.unwrap_or(DEFAULT_RESTART_DELAY_MS),
        });
    }
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
pub(super) fn old_daemon_for(flags: &str, daemon: &str) -> anyhow::Error {
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
    let info = answer_of::<Spawn>(info)?;
    let job = foreground::Job::of(&info);
    let id = job.id.clone();
    if json {
        let until_end = follow::finished(home, Some(client), None, &id, true);
        foreground::hold(home, &job, until_end).await?;
        return Ok(Ran::Done);
    }
    print_notes(&info);
    // A PTY job on this terminal is attached: keys, size and screen.
    if job.is_pty && std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        return Ok(Ran::Attach(id));
    }
    let until_end = async {
        // A queued job's log is followed once it has started (or ended unrun): a
        // daemon with `logs.follow.queued` waits through the queue itself, an older
        // one is polled until the job leaves it.
        let client = if info.queued && !client.hello.serves(capabilities::LOGS_FOLLOW_QUEUED) {
            out_of_the_queue(client, &id).await?
        } else {
            client
        };
        let result = follow::one(home, client, &id, 0).await?;
        follow::finished(home, None, result, &id, false).await
    };
    foreground::hold(home, &job, until_end).await?;
    Ok(Ran::Done)
}

/// Waits until a queued job has left the queue (it started, or it ended unrun),
/// asking `poll` with a pause that grows to 200 ms: for a daemon without
/// `logs.follow.queued`, whose follow of a queued job would not wait.
#[expect(
    clippy::disallowed_methods,
    reason = "the pause between two polls of a queued job; it synchronises nothing"
)]
async fn out_of_the_queue(mut client: Client, id: &str) -> anyhow::Result<Client> {
    let mut pause = std::time::Duration::from_millis(20);
    loop {
        let polled = client.ask::<Poll>(&IdParams::new(id)).await?;
        if polled.status != SessionStatus::Queued {
            return Ok(client);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_millis(200));
    }
}

/// `herd run`.
pub(crate) async fn run(home: &Home, mut args: RunArgs) -> anyhow::Result<Ran> {
    let follows = follows_here(&args);
    let pipelined = args.host.is_none() && (follows || !asks_newer_fields(&args));
    let (wait, json) = (args.wait, args.json);
    let cwd = job_cwd(args.cwd.as_deref())?;
    let owner = args.owner.resolve("cli");
    let env = with_forwarded(std::mem::take(&mut args.env), &args.forward_env);
    let mut params = SpawnParams {
        command: command_line(&args.command),
        owner,
        task_id: args.task.clone(),
        cwd: Some(cwd),
        env,
        forward_env: args.forward_env.clone(),
        pty: args.pty,
        notify: args.notify,
        watch: args.watch.clone(),
        heartbeat_seconds: args.heartbeat,
        persist_on_release: args.persist,
        name: args.name.clone(),
        time_limit_seconds: args.time_limit,
        host: args.host.clone(),
        ..SpawnParams::default()
    };
    add_readiness(&mut params, &args);
    add_queue(&mut params, &args);
    let limits = Limits {
        memory_bytes: args.memory,
        cpu_millis: args.cpus,
        pids: args.pids,
    };
    add_containment(&mut params, args.kill_leftovers, limits);
    // Hello and the spawn in one write (capability `spawn.follow`, sent as `follow:
    // false` when this client does not follow the job's output); a daemon without it
    // refuses the unknown `follow`, starting nothing, and is asked the ordinary way
    // below. A far host's job is asked the ordinary way (its link answers plainly).
    let mut client = if pipelined {
        match pipelined_spawn(home, &params, follows, (wait, json)).await? {
            Began::Ran(ran) => return ran,
            Began::Client(client) => client,
        }
    } else {
        Client::connect(home).await?
    };
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
            args.ready.is_some() || args.ready_port.is_some(),
            "spawn.ready",
            "--ready and --ready-port",
        ),
        (args.restart.is_some(), "spawn.restart", "--restart"),
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
        params.caller_env = Some(herd_core::utf8_environment().into_iter().collect());
    }
    let answer = client.call(Spawn::NAME, params_of(&params)?).await;
    answered(home, client, answer, (wait, json)).await
}

/// The spawn's `group`, `after` and `after_ready` (capability `queue`).
fn add_queue(params: &mut SpawnParams, args: &RunArgs) {
    params.group.clone_from(&args.queue.group);
    params.after.clone_from(&args.queue.after);
    params.after_ready.clone_from(&args.queue.after_ready);
}

/// What `herd run` does with the spawn's answer.
async fn answered(
    home: &Home,
    client: Client,
    answer: Result<Value, CallError>,
    (wait, json): (bool, bool),
) -> anyhow::Result<Ran> {
    match answer {
        Ok(info) if wait => stay(home, client, &info, json).await,
        Ok(info) => {
            if json {
                output::json_line(&info)?;
            } else {
                let info = answer_of::<Spawn>(&info)?;
                output::line(&info.session_id)?;
                print_notes(&info);
            }
            Ok(Ran::Done)
        }
        Err(CallError::Rpc(err)) if err.code == protocol::GUARDED => {
            if json {
                output::json_line(&err.data.clone().unwrap_or(Value::Null))?;
            }
            Err(Failure::new(Code::Failed, err.message).into())
        }
        Err(err) => Err(err.into_anyhow()),
    }
}

/// Whether `run` asks for what only a newer daemon than the first with
/// `spawn.caller_env` takes (a time limit, limits, leftovers, readiness, a restart
/// policy, a queue): a plain spawn that does is sent only once `hello` has shown the
/// daemon serves it, so an older one is told nothing but `hello`.
fn asks_newer_fields(args: &RunArgs) -> bool {
    args.time_limit.is_some()
        || args.memory.is_some()
        || args.cpus.is_some()
        || args.pids.is_some()
        || args.kill_leftovers
        || args.ready.is_some()
        || args.ready_port.is_some()
        || args.restart.is_some()
        || args.queue.any()
}

/// Whether `run`'s pipelined spawn follows its job here (`follow: true`): a
/// `--wait` whose output is followed here (not `--json`, which prints only the
/// ending; not a PTY job on this terminal, which is attached). A job that may queue
/// is then sent with `follow_queued` (capability `logs.follow.queued`).
fn follows_here(args: &RunArgs) -> bool {
    args.wait
        && !args.json
        && !(args.pty && std::io::stdin().is_terminal() && std::io::stdout().is_terminal())
}

/// What a pipelined spawn came to.
enum Began {
    /// `run` is over (the job was followed, or the spawn answered).
    Ran(anyhow::Result<Ran>),
    /// Nothing ran: a daemon without `spawn.follow`, to ask the ordinary way.
    Client(Client),
}

/// Hello and the spawn in one write (capability `spawn.follow`): one that follows
/// its job here when `follows`, else a plain one sent with `follow: false`, which a
/// daemon without the capability refuses as an unknown field, starting nothing, so
/// the spawn's other fields (the caller's environment among them) reach only a
/// daemon that knows them; such a daemon is asked the ordinary way.
async fn pipelined_spawn(
    home: &Home,
    params: &SpawnParams,
    follows: bool,
    (wait, json): (bool, bool),
) -> anyhow::Result<Began> {
    // A job that may queue is followed through the queue by a daemon with
    // `logs.follow.queued`; one without refuses the field and starts nothing.
    let may_queue =
        params.group.is_some() || !params.after.is_empty() || !params.after_ready.is_empty();
    let sent = SpawnParams {
        caller_env: Some(herd_core::utf8_environment().into_iter().collect()),
        follow: follows,
        raw: follows,
        frames: follows,
        follow_queued: follows && may_queue,
        ..params.clone()
    };
    let mut sent = params_of(&sent)?;
    if !follows && let Some(fields) = sent.as_object_mut() {
        // Not serialised when false: written out, so an older daemon refuses it.
        fields.insert("follow".to_owned(), Value::Bool(false));
    }
    Ok(
        match Client::connect_pipelined(home, Spawn::NAME, sent).await? {
            Pipelined::Sent {
                mut client,
                request,
            } => match spawned(&mut client, request).await {
                Spawned::Following(info) => {
                    Began::Ran(follow_started(home, client, request, &info).await)
                }
                // Refused by a daemon that does not know a field sent: nothing ran.
                Spawned::Answered(Err(CallError::Rpc(_)))
                    if !serves_pipelined(&client, follows, may_queue) =>
                {
                    Began::Client(client)
                }
                Spawned::Answered(answer) => {
                    Began::Ran(answered(home, client, answer, (wait, json)).await)
                }
            },
            Pipelined::Connected(client) => Began::Client(client),
        },
    )
}

/// Whether the daemon knows every field a pipelined spawn sent: `follow` (and
/// `frames` when it follows), and for a job that may queue the queue's fields (and
/// `follow_queued` when it follows). A refusal by one that does not is asked again
/// the ordinary way, which says what is missing.
fn serves_pipelined(client: &Client, follows: bool, may_queue: bool) -> bool {
    let hello = &client.hello;
    hello.serves(capabilities::SPAWN_FOLLOW)
        && (!follows || hello.serves(capabilities::SPAWN_FRAMES))
        && (!may_queue || hello.serves(capabilities::QUEUE))
        && (!(may_queue && follows) || hello.serves(capabilities::LOGS_FOLLOW_QUEUED))
}

/// How a pipelined `spawn` was answered.
enum Spawned {
    /// The job started: its spawn answer; its log stream follows on the connection.
    Following(Value),
    /// A plain answer: an error, or a daemon that answered without following.
    Answered(Result<Value, CallError>),
}

/// Reads the answer to the pipelined spawn `request`: its `spawned` note, or its
/// answer.
async fn spawned(client: &mut Client, request: u64) -> Spawned {
    loop {
        let message = match client.next_note("spawn").await {
            Ok(Some(message)) => message,
            Ok(None) => {
                return Spawned::Answered(Err(CallError::Io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the daemon closed the connection",
                ))));
            }
            Err(err) => return Spawned::Answered(Err(CallError::Io(err))),
        };
        if message.method.as_deref() == Some("spawned") {
            return Spawned::Following(message.params.unwrap_or(Value::Null));
        }
        if message.method.is_none() && message.id == request {
            return Spawned::Answered(match message.error {
                Some(error) => Err(CallError::Rpc(error)),
                None => Ok(message.result.unwrap_or(Value::Null)),
            });
        }
    }
}

/// Follows a job the pipelined spawn started, as [`stay`] does.
async fn follow_started(
    home: &Home,
    client: Client,
    request: u64,
    info: &Value,
) -> anyhow::Result<Ran> {
    let info = answer_of::<Spawn>(info)?;
    print_notes(&info);
    let job = foreground::Job::of(&info);
    let id = job.id.clone();
    let until_end = async {
        let result = super::resume::stream_started(home, client, &id, request, output::raw).await?;
        follow::finished(home, None, result, &id, false).await
    };
    foreground::hold(home, &job, until_end).await?;
    Ok(Ran::Done)
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
fn print_notes(info: &SpawnAnswer) {
    for note in [&info.pty_note, &info.note].into_iter().flatten() {
        output::err_line(&format!("note: {note}"));
    }
}
