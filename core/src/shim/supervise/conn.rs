//! The shim's side of the daemon's connection: the first attach, accepting and
//! serving frames, sending, and writing the job's queued input.
//!
//! Invariant: one daemon connection at a time; a newer one replaces the old, and input
//! the job cannot take yet waits in a bounded queue.

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::Instant;

use nix::poll::{PollFd, PollFlags};

use super::{
    BIND_RETRY, Conn, FIRST_ATTACH_WAIT, Input, Job, MAX_QUEUED_INPUT, MAX_QUEUED_OUT, Shim,
    write_all_nonblocking,
};
use crate::shim::PROTOCOL;
use crate::shim::wire::{self, FrameReader, Framing, FromShim, ToShim};

impl Shim {
    /// Waits for the daemon that started this shim to attach (at most
    /// [`FIRST_ATTACH_WAIT`]), so a job that ended at once is reported over the socket
    /// like any other.
    pub(super) fn await_first_attach(&mut self) {
        let deadline = Instant::now() + FIRST_ATTACH_WAIT;
        while !self.greeted {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            let (listen_ready, conn_ready) = {
                let Some(listener) = &self.listener else {
                    // Nothing can connect: the connection the spec came on was the
                    // daemon's, and it greeted (this is not reached then).
                    return;
                };
                let mut fds = vec![PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
                if let Some(conn) = &self.conn {
                    fds.push(PollFd::new(conn.stream.as_fd(), PollFlags::POLLIN));
                }
                match crate::sys::poll::wait_ready(&mut fds, Some(left)) {
                    Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                    Err(_) => return,
                }
                let ready = |fd: &PollFd<'_>| fd.revents().is_some_and(|r| !r.is_empty());
                (ready(&fds[0]), fds.get(1).is_some_and(ready))
            };
            if listen_ready {
                self.accept();
            }
            if conn_ready {
                self.service_conn();
            }
            self.flush_conn();
        }
    }

    pub(super) fn accept(&mut self) {
        loop {
            let Some(listener) = &self.listener else {
                return;
            };
            match listener.accept() {
                Ok((stream, _)) => {
                    let peer = crate::sys::peer::peer_uid(&stream);
                    if !peer.is_ok_and(|uid| uid == self.uid) {
                        tracing::warn!("supervisor connection from another user refused");
                        continue;
                    }
                    // A new daemon replaces the old one: the lock on the home allows
                    // only one, so the old connection belongs to one that is gone.
                    self.adopt(stream);
                }
                Err(_) => return,
            }
        }
    }

    /// Makes `stream` the daemon's connection (accepted, or the one the spec came on,
    /// already non-blocking).
    pub(super) fn adopt(&mut self, stream: UnixStream) {
        if let Err(error) = stream.set_nonblocking(true) {
            tracing::warn!(%error, "daemon connection not taken");
            self.bind_when_unbound();
            return;
        }
        self.conn = Some(Conn {
            stream,
            frames: FrameReader::default(),
            framing: Framing::Lines,
            out: Vec::new(),
        });
        self.want = None;
        self.set_terminal(false);
        self.greeted = true;
    }

    /// Binds the socket when the daemon's first connection was the one the spec came
    /// on and it is gone: the daemon stopped or died, and the next one connects here.
    /// A bind that fails (no inode or descriptor left) is tried again every
    /// [`BIND_RETRY`] by the loop (`bind_retry_at`).
    pub(super) fn bind_when_unbound(&mut self) {
        if self.listener.is_some() {
            return;
        }
        match super::start::bind_private(&self.socket) {
            Ok(listener) => {
                self.listener = Some(listener);
                self.bind_retry_at = None;
            }
            Err(error) => {
                if self.bind_retry_at.is_none() {
                    tracing::error!(
                        %error,
                        socket = %self.socket.display(),
                        "the supervisor socket could not be bound; tried again every second (a daemon that starts meanwhile attaches once it is bound); free an inode or a descriptor to speed it up"
                    );
                }
                self.bind_retry_at = Some(Instant::now() + BIND_RETRY);
            }
        }
    }

    pub(super) fn service_conn(&mut self) {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let Some(conn) = self.conn.as_mut() else {
                return;
            };
            match io::Read::read(&mut conn.stream, &mut buf) {
                Ok(0) => {
                    self.drop_conn();
                    return;
                }
                Ok(n) => conn.frames.feed(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.drop_conn();
                    return;
                }
            }
        }
        loop {
            let Some(conn) = self.conn.as_mut() else {
                return;
            };
            match conn.frames.next() {
                Ok(Some(frame)) => match serde_json::from_slice::<ToShim>(&frame.header) {
                    Ok(message) => self.handle(message, frame.body),
                    Err(error) => self.send(&FromShim::Error {
                        message: format!(
                            "frame not understood by shim protocol {PROTOCOL}: {error}"
                        ),
                    }),
                },
                Ok(None) => return,
                Err(error) => {
                    tracing::warn!(%error, "supervisor connection dropped");
                    self.drop_conn();
                    return;
                }
            }
        }
    }

    pub(super) fn handle(&mut self, message: ToShim, body: Vec<u8>) {
        match message {
            ToShim::Hello {
                protocol,
                capabilities,
                ..
            } => {
                self.greeted = true;
                // The protocol both speak: an older daemon attaches fully too.
                self.send(&FromShim::Hello {
                    protocol: PROTOCOL.min(protocol.max(1)),
                    shim_pid: crate::sys::own_pid(),
                    pid: self.pid,
                    pgid: self.pgid,
                    progress: self.progress,
                    capabilities: wire::capabilities(),
                });
                // Both hellos were lines; what follows is length-prefixed when the
                // daemon can read it.
                if wire::frames_agreed(&capabilities)
                    && let Some(conn) = self.conn.as_mut()
                {
                    conn.framing = Framing::Lengths;
                    conn.frames.set_framing(Framing::Lengths);
                }
            }
            ToShim::Want { after, mark_lag } => {
                self.want = Some(after);
                if let Some(lag) = mark_lag {
                    self.marks.want(lag);
                }
            }
            ToShim::Stdin { id, .. } => {
                if self.exit.is_some() {
                    self.send_done(id, Some("the process has already finished".to_owned()));
                } else if self.job.input().is_none() {
                    self.send_done(
                        id,
                        Some("stdin is closed; the process can no longer read input".to_owned()),
                    );
                } else if self.queued_input + body.len() > MAX_QUEUED_INPUT {
                    self.send_done(
                        id,
                        Some(
                            "the process is not reading its input; nothing more was written"
                                .to_owned(),
                        ),
                    );
                } else {
                    self.queued_input += body.len();
                    self.input.push_back(Input::Write {
                        id,
                        bytes: body,
                        done: 0,
                    });
                }
            }
            ToShim::Close { id } => self.input.push_back(Input::Close { id }),
            ToShim::Resize { id, rows, cols } => {
                let error = match &mut self.job {
                    Job::Pty { master, scanner } => {
                        let result = master.resize(rows, cols);
                        if result.is_ok() {
                            scanner.set_size(rows, cols);
                        }
                        result.err()
                    }
                    Job::Pipe { .. } => {
                        Some("the session has no terminal to resize (it runs on pipes)".to_owned())
                    }
                };
                self.send_done(id, error);
            }
            ToShim::Kill { source } => self.kill_requested(source),
            ToShim::Terminal { attached } => self.set_terminal(attached),
        }
    }

    pub(super) fn send_done(&mut self, id: u64, error: Option<String>) {
        self.send(&FromShim::Done { id, error });
    }

    pub(super) fn send(&mut self, message: &FromShim) {
        if let Some(conn) = self.conn.as_mut() {
            wire::encode(conn.framing, message, b"", &mut conn.out);
            if conn.out.len() > MAX_QUEUED_OUT {
                self.drop_conn();
            }
        }
    }

    pub(super) fn drop_conn(&mut self) {
        self.conn = None;
        self.want = None;
        // The terminals attached through that daemon are gone with it.
        self.set_terminal(false);
        self.bind_when_unbound();
    }

    /// Leaves the PTY's queries to an attached terminal, or answers them again.
    fn set_terminal(&mut self, attached: bool) {
        if let Job::Pty { scanner, .. } = &mut self.job {
            scanner.set_passthrough(attached);
        }
    }

    /// Sends `grew` once the log passed the daemon's mark.
    pub(super) fn maybe_grew(&mut self) {
        if self
            .want
            .is_some_and(|after| self.progress.total_ingested > after)
        {
            self.want = None;
            let progress = self.progress;
            let mark = self.marks.before(progress.log_bytes);
            self.send(&FromShim::Grew { progress, mark });
        }
    }

    pub(super) fn flush_conn(&mut self) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        while !conn.out.is_empty() {
            match conn.stream.write(&conn.out) {
                Ok(n) => {
                    conn.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.drop_conn();
                    return;
                }
            }
        }
    }

    /// Writes queued input as far as the job takes it.
    pub(super) fn write_input(&mut self) {
        while let Some(front) = self.input.front_mut() {
            match front {
                Input::Write { id, bytes, done } => {
                    let Some(fd) = self.job.input() else {
                        let id = *id;
                        self.finish_input(
                            id,
                            Some(
                                "stdin is closed; the process can no longer read input".to_owned(),
                            ),
                        );
                        continue;
                    };
                    match nix::unistd::write(fd, &bytes[*done..]) {
                        Ok(n) => {
                            *done += n;
                            if *done == bytes.len() {
                                let id = *id;
                                self.finish_input(id, None);
                            }
                        }
                        Err(nix::errno::Errno::EAGAIN) => return,
                        Err(nix::errno::Errno::EINTR) => {}
                        Err(error) => {
                            let id = *id;
                            self.finish_input(
                                id,
                                Some(format!("write to the process failed: {error}")),
                            );
                        }
                    }
                }
                Input::Close { id } => {
                    let id = *id;
                    let error = match &mut self.job {
                        Job::Pipe { stdin, .. } => stdin
                            .take()
                            .is_none()
                            .then(|| "stdin is already closed".to_owned()),
                        Job::Pty { master, .. } => {
                            write_all_nonblocking(master.as_fd(), b"\x04");
                            None
                        }
                    };
                    self.finish_input(id, error);
                }
            }
        }
    }

    pub(super) fn finish_input(&mut self, id: u64, error: Option<String>) {
        if let Some(Input::Write { bytes, .. }) = self.input.pop_front() {
            self.queued_input = self.queued_input.saturating_sub(bytes.len());
        }
        self.send_done(id, error);
    }
}
