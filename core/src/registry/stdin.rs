//! Input to a running session: raw writes, submit (text and Enter), end-of-file and
//! PTY resize, over a pipe, a PTY master or the session's shim link.
//!
//! Owns nothing: it takes the session's stdin handle out of its state under the
//! session lock and writes after letting go, so no lock is held while the child
//! reads (a write waits at most `STDIN_WRITE_TIMEOUT`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::Registry;
use crate::answers::{ModeName, StdinAnswer, StdinStatus};
use crate::error::Error;
use crate::session::{Input, Session, ShimInput, Stdin};
use crate::shim::wire::ToShim;
use crate::spawn;

/// How long a stdin write may wait for the child to read.
const STDIN_WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a resize waits for the supervisor's answer: a size is best effort, and
/// the caller (an attach's first request) must hear back well inside its own 10 s.
/// A session that ended is answered at once (the link fails what it cannot send).
const RESIZE_TIMEOUT: Duration = Duration::from_secs(2);

impl Registry {
    /// Writes raw bytes to the session's stdin (pipe) or keyboard (PTY).
    ///
    /// # Errors
    /// [`Error::Lookup`].
    pub async fn write(&self, id: &str, data: &[u8]) -> Result<StdinAnswer, Error> {
        let s = self.inner.lookup(id)?;
        Ok(write_input(&s, data).await)
    }

    /// Writes `text` followed by Enter (`\n` on a pipe, `\r` on a PTY).
    ///
    /// # Errors
    /// [`Error::Lookup`].
    pub async fn submit(&self, id: &str, text: &str) -> Result<StdinAnswer, Error> {
        let s = self.inner.lookup(id)?;
        let enter = if s.mode == ModeName::Pty { "\r" } else { "\n" };
        Ok(write_input(&s, format!("{text}{enter}").as_bytes()).await)
    }

    /// Sends end-of-file: closes the stdin pipe, or sends EOT (Ctrl-D) on a PTY.
    ///
    /// # Errors
    /// [`Error::Lookup`].
    pub async fn close_stdin(&self, id: &str) -> Result<StdinAnswer, Error> {
        let s = self.inner.lookup(id)?;
        let handle = {
            let mut st = s.state();
            if st.finished.is_some() {
                return Ok(already_exited());
            }
            match &st.stdin {
                Some(Stdin::Pipe(_)) => st.stdin.take(),
                Some(Stdin::Shim(_)) if s.mode == ModeName::Pipe => st.stdin.take(),
                other => other.clone(),
            }
        };
        Ok(match handle {
            Some(Stdin::Pipe(_)) => StdinAnswer {
                status: StdinStatus::Ok,
                bytes_written: None,
                message: Some("stdin closed".to_owned()),
            },
            Some(Stdin::Pty(master)) => {
                let mut answer = write_pty(&master, b"\x04").await;
                answer.message = Some("EOF sent".to_owned());
                answer
            }
            Some(Stdin::Shim(link)) => {
                let answer = link.send_input(Input::Close, STDIN_WRITE_TIMEOUT).await;
                match answer {
                    Ok(()) => StdinAnswer {
                        status: StdinStatus::Ok,
                        bytes_written: None,
                        message: Some(
                            if s.mode == ModeName::Pipe {
                                "stdin closed"
                            } else {
                                "EOF sent"
                            }
                            .to_owned(),
                        ),
                    },
                    Err(message) => stdin_error(&message),
                }
            }
            None => stdin_error(closed_or_reaching(&s, "stdin is already closed")),
        })
    }

    /// Sets a PTY session's window size; the program gets SIGWINCH, and the terminal
    /// query responder answers size queries with the new size.
    ///
    /// # Errors
    /// [`Error::Lookup`]; [`Error::InvalidArgument`] for a size out of range (1 to
    /// 10,000 each) or a session without a terminal.
    pub async fn resize(&self, id: &str, rows: u16, cols: u16) -> Result<StdinAnswer, Error> {
        if !(1..=10_000).contains(&rows) || !(1..=10_000).contains(&cols) {
            return Err(Error::InvalidArgument {
                message: format!(
                    "a terminal size of {rows} rows x {cols} columns is out of range; each must be 1 to 10000"
                ),
            });
        }
        let s = self.inner.lookup(id)?;
        if s.mode != ModeName::Pty {
            return Err(Error::InvalidArgument {
                message: format!(
                    "session {} runs on pipes and has no terminal to resize; start it with a PTY",
                    s.id
                ),
            });
        }
        let handle = {
            let st = s.state();
            if st.finished.is_some() {
                return Ok(already_exited());
            }
            st.stdin.clone()
        };
        let result = match handle {
            Some(Stdin::Pty(master)) => master.get_ref().resize(rows, cols),
            Some(Stdin::Shim(link)) => {
                link.send_input(Input::Resize { rows, cols }, RESIZE_TIMEOUT)
                    .await
            }
            Some(Stdin::Pipe(_)) | None => Err(closed_or_reaching(
                &s,
                "the session's terminal is no longer reachable",
            )
            .to_owned()),
        };
        Ok(match result {
            Ok(()) => StdinAnswer {
                status: StdinStatus::Ok,
                bytes_written: None,
                message: Some(format!("resized to {rows}x{cols}")),
            },
            Err(message) => stdin_error(&message),
        })
    }
}

/// A real terminal attached to a PTY session (`herd attach`), for as long as the
/// guard lives: the session's queries (cursor position, status, size) go out with
/// its output for that terminal to answer, and herd answers them again once the last
/// guard is dropped.
#[derive(Debug)]
pub struct TerminalGuard {
    session: Arc<Session>,
}

impl Registry {
    /// Counts a real terminal as attached to `id` until the guard is dropped; `None`
    /// for a session without a PTY or one that has finished.
    ///
    /// # Errors
    /// [`Error::Lookup`].
    pub fn attach_terminal(&self, id: &str) -> Result<Option<TerminalGuard>, Error> {
        let s = self.inner.lookup(id)?;
        if s.mode != ModeName::Pty || s.state().finished.is_some() {
            return Ok(None);
        }
        count_terminal(&s, true);
        Ok(Some(TerminalGuard { session: s }))
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        count_terminal(&self.session, false);
    }
}

/// One terminal more or less; the supervisor is told when the first comes or the
/// last goes. The count's lock is held while telling, so the messages go out in the
/// order of the changes (telling is a push on the link's queue).
fn count_terminal(s: &Session, more: bool) {
    // The session's state is held until the count is: a link given meanwhile
    // (`attach_late`) is either read here or finds this count.
    let st = s.state();
    let stdin = st.stdin.clone();
    let mut count = s
        .terminals
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    drop(st);
    let before = *count;
    *count = if more {
        before.saturating_add(1)
    } else {
        before.saturating_sub(1)
    };
    if (before == 0) != (*count == 0)
        && let Some(Stdin::Shim(link)) = stdin
    {
        link.set_terminal(*count > 0);
    }
}

fn already_exited() -> StdinAnswer {
    StdinAnswer {
        status: StdinStatus::AlreadyExited,
        bytes_written: None,
        message: Some("the process has already finished".to_owned()),
    }
}

fn stdin_error(message: &str) -> StdinAnswer {
    StdinAnswer {
        status: StdinStatus::Error,
        bytes_written: None,
        message: Some(message.to_owned()),
    }
}

async fn write_input(s: &Session, data: &[u8]) -> StdinAnswer {
    let handle = {
        let st = s.state();
        if st.finished.is_some() {
            return already_exited();
        }
        st.stdin.clone()
    };
    match handle {
        Some(Stdin::Pipe(tx)) => write_pipe(&tx, data).await,
        Some(Stdin::Pty(master)) => write_pty(&master, data).await,
        Some(Stdin::Shim(link)) => {
            let answer = link
                .send_input(Input::Bytes(data.to_vec()), STDIN_WRITE_TIMEOUT)
                .await;
            match answer {
                Ok(()) => StdinAnswer {
                    status: StdinStatus::Ok,
                    bytes_written: Some(data.len()),
                    message: None,
                },
                Err(message) => stdin_error(&message),
            }
        }
        None => stdin_error(closed_or_reaching(
            s,
            "stdin is closed; the process can no longer read input",
        )),
    }
}

/// Why session `s` has no input handle: `closed`, or that its supervisor is not
/// reached yet.
fn closed_or_reaching<'a>(s: &Session, closed: &'a str) -> &'a str {
    if s.state().reaching {
        "its supervisor runs but this daemon has not reached it yet (it restarted while the supervisor could not answer); retry in a few seconds"
    } else {
        closed
    }
}

/// Gives a session restored without a link the link to its supervisor, reached
/// late: its input goes there from now on, and a terminal attached meanwhile is
/// told to the supervisor (under the count's lock, as [`count_terminal`] tells).
pub(super) fn attach_late(s: &Session, link: &Arc<crate::shim::link::Link>) {
    let mut st = s.state();
    st.stdin = Some(shim_stdin(link));
    st.reaching = false;
    let count = s
        .terminals
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    drop(st);
    if *count > 0 {
        ShimInput::set_terminal(link.as_ref(), true);
    }
}

async fn write_pipe(tx: &tokio::net::unix::pipe::Sender, data: &[u8]) -> StdinAnswer {
    let write = async {
        let mut rest = data;
        while !rest.is_empty() {
            tx.writable().await?;
            match tx.try_write(rest) {
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    };
    finish_write(
        tokio::time::timeout(STDIN_WRITE_TIMEOUT, write).await,
        data.len(),
    )
}

async fn write_pty(master: &tokio::io::unix::AsyncFd<spawn::MasterFd>, data: &[u8]) -> StdinAnswer {
    let write = async {
        let mut rest = data;
        while !rest.is_empty() {
            let mut guard = master.writable().await?;
            match guard.try_io(|fd| {
                nix::unistd::write(std::os::fd::AsFd::as_fd(fd.get_ref()), rest)
                    .map_err(std::io::Error::from)
            }) {
                Ok(Ok(n)) => rest = &rest[n..],
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => {}
            }
        }
        Ok(())
    };
    finish_write(
        tokio::time::timeout(STDIN_WRITE_TIMEOUT, write).await,
        data.len(),
    )
}

fn finish_write(
    result: Result<std::io::Result<()>, tokio::time::error::Elapsed>,
    n: usize,
) -> StdinAnswer {
    match result {
        Ok(Ok(())) => StdinAnswer {
            status: StdinStatus::Ok,
            bytes_written: Some(n),
            message: None,
        },
        Ok(Err(e)) => stdin_error(&format!("write to the process failed: {e}")),
        Err(_) => stdin_error("the process is not reading its input; nothing more was written"),
    }
}

impl ShimInput for crate::shim::link::Link {
    fn send_input(
        &self,
        input: Input,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + '_>> {
        Box::pin(self.request(
            move |id| match input {
                Input::Bytes(body) => (
                    ToShim::Stdin {
                        id,
                        len: body.len(),
                    },
                    body,
                ),
                Input::Close => (ToShim::Close { id }, Vec::new()),
                Input::Resize { rows, cols } => (ToShim::Resize { id, rows, cols }, Vec::new()),
            },
            timeout,
        ))
    }

    fn set_terminal(&self, attached: bool) {
        // A link that is gone has no supervisor to tell; the next one starts unattached.
        let _ = self.send(&ToShim::Terminal { attached }, b"");
    }
}

/// The stdin handle of a supervised session: its shim link.
pub(super) fn shim_stdin(link: &Arc<crate::shim::link::Link>) -> Stdin {
    let input: Arc<dyn ShimInput> = Arc::clone(link) as Arc<dyn ShimInput>;
    Stdin::Shim(input)
}
