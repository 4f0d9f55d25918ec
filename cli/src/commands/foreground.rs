//! `herd run --wait` as a foreground program: the signals a shell or a person
//! sends it reach the job, as they would a program run without herd.
//!
//! SIGINT (Ctrl-C), SIGTERM and SIGHUP are passed to the job's process group
//! (its pid: every job leads its own group), once its leader is seen to carry
//! the session's tag (`HERD_SESSION`), so a reused pid is never signalled. A PTY job gets Ctrl-C as the byte
//! its terminal turns into SIGINT for whatever runs in its foreground, as a
//! shell's job control expects. A job on another host (`host:proc_…`) has no
//! group here: the signal becomes a `kill` of its tree. If the job is still
//! running [`DETACH_AFTER`] after the first Ctrl-C, the next Ctrl-C detaches:
//! herd stops following, says the id and how to follow or end it, and exits 1
//! (the job is still running, as `wait --timeout` reports it), the job running on.

use std::future::Future;
use std::time::Duration;

use anyhow::Context;
use herd_persistence::Home;
use herd_protocol::params::{IdParams, StdinParams};
use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::Instant;

use crate::client::Client;
use crate::exit::{Code, Failure};
use crate::output;

/// How long after the first Ctrl-C a second one detaches instead of being
/// passed on (a job may take a moment to wind down, and a person who presses
/// twice at once means the job, not herd).
pub(crate) const DETACH_AFTER: Duration = Duration::from_secs(2);

/// The job being followed in the foreground.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    /// Its session id.
    pub(crate) id: String,
    /// Its pid, which is also its process group.
    pub(crate) pid: i32,
    /// Whether it runs under a PTY.
    pub(crate) is_pty: bool,
}

impl Job {
    /// The job a spawn answered.
    pub(crate) fn of(info: &herd_protocol::answers::SpawnAnswer) -> Job {
        Job {
            id: info.session_id.clone(),
            pid: info.pid,
            is_pty: info.mode == "pty",
        }
    }

    /// Whether it runs on another host (its pid is not one of this machine's).
    fn is_remote(&self) -> bool {
        self.id.contains(':')
    }
}

/// Runs `until_end` (the follow of `job` to its end) and passes the signals this
/// process gets to the job meanwhile; detaches on a Ctrl-C [`DETACH_AFTER`]
/// after the first.
///
/// # Errors
/// What `until_end` returns; a detach ends with exit code 1, said on stderr.
pub(crate) async fn hold(
    home: &Home,
    job: &Job,
    until_end: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let on = |kind, name| signal(kind).with_context(|| format!("cannot handle {name}"));
    let mut interrupt = on(SignalKind::interrupt(), "SIGINT")?;
    let mut term = on(SignalKind::terminate(), "SIGTERM")?;
    let mut hangup = on(SignalKind::hangup(), "SIGHUP")?;
    tokio::pin!(until_end);
    let mut first_interrupt: Option<Instant> = None;
    loop {
        let got = tokio::select! {
            end = &mut until_end => return end,
            _ = interrupt.recv() => Signal::SIGINT,
            _ = term.recv() => Signal::SIGTERM,
            _ = hangup.recv() => Signal::SIGHUP,
        };
        if got == Signal::SIGINT {
            match first_interrupt {
                Some(at) if at.elapsed() >= DETACH_AFTER => return detach(job),
                Some(_) => {}
                None => {
                    first_interrupt = Some(Instant::now());
                    output::err_line(&format!(
                        "herd: Ctrl-C passed to {}; if it keeps running, Ctrl-C again after {} s \
                         detaches (the job runs on)",
                        job.id,
                        DETACH_AFTER.as_secs()
                    ));
                }
            }
        }
        if let Err(err) = deliver(home, job, got).await {
            output::err_line(&format!("herd: {got} not passed to {}: {err:#}", job.id));
        }
    }
}

/// Stops following: says where the job is and how to reach it.
fn detach(job: &Job) -> anyhow::Result<()> {
    let id = &job.id;
    output::err_line(&format!(
        "herd: detached from {id}, still running; `herd logs -f {id}` follows it, `herd kill \
         {id}` ends it"
    ));
    Err(Failure::silent(Code::Failed).into())
}

/// Passes `got` to the job: Ctrl-C as the byte of a PTY job's terminal, else to
/// its process group; to a job on another host, a `kill`.
async fn deliver(home: &Home, job: &Job, got: Signal) -> anyhow::Result<()> {
    if job.is_remote() {
        Client::connect(home)
            .await?
            .send_typed::<herd_protocol::methods::Kill>(&IdParams::new(job.id.as_str()))
            .await?;
        return Ok(());
    }
    if job.is_pty && got == Signal::SIGINT {
        Client::connect(home)
            .await?
            .send_typed::<herd_protocol::methods::Write>(&StdinParams {
                id: job.id.clone(),
                data: "\u{3}".to_owned(),
            })
            .await?;
        return Ok(());
    }
    if job.pid <= 1 {
        anyhow::bail!("the daemon gave no pid for it");
    }
    // The group is signalled only while its leader is still this session's
    // process (its session tag), never a group that took over a reused pid.
    if !is_tagged(job.pid, &job.id) {
        return Ok(());
    }
    match nix::sys::signal::killpg(nix::unistd::Pid::from_raw(job.pid), got) {
        // Gone already: its end is on its way through the follow.
        Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
        Err(errno) => Err(anyhow::anyhow!(
            "cannot signal its process group {}: {errno}",
            job.pid
        )),
    }
}

/// Whether process `pid` carries `HERD_SESSION=<id>` in its environment (the
/// tag every job starts with); false when it is gone or cannot be read.
fn is_tagged(pid: i32, id: &str) -> bool {
    let Some(environ) = crate::sys::environ(pid) else {
        return false;
    };
    let tag = format!("HERD_SESSION={id}");
    environ
        .split(|b| *b == 0)
        .any(|entry| entry == tag.as_bytes())
}
