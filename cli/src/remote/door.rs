//! A host's door: the configured argv that ends in `herd proxy` on the far side
//! (`ssh build1 herd proxy`, `docker exec -i ctr herd proxy`), started and greeted.
//!
//! [`command`] runs the argv exactly as written in `[hosts.NAME]` (never through a
//! shell, so no job text can reach the transport command), with stdin, stdout and
//! stderr piped, and in a session of its own with no controlling terminal. That
//! last part is what makes a door that wants input fail fast instead of hanging:
//! ssh reads passwords, passphrases and host-key answers from `/dev/tty`, which a
//! process with no controlling terminal cannot open, and `SSH_ASKPASS_REQUIRE=never`
//! with `DISPLAY` removed keeps it from asking through a graphical helper instead.
//!
//! The new session comes from util-linux's `setsid(1)` (Essential on Debian), which
//! calls `setsid(2)` and execs the argv in place (the child's pid is the door's, so
//! killing it reaches the door). A `pre_exec` hook would do the same without the
//! program, but unsafe code is confined to herd-core's `sys` module.
//!
//! [`handshake`] sends `hello` and turns every way a door can fail before answering
//! into a [`DoorError`] carrying the door's own last words on stderr and a fix:
//! an unknown host key (`ssh-keyscan`), a changed one (possibly an attack: compare
//! fingerprints by a trusted way first), a far path refused (named), a password
//! asked (use a key, `BatchMode`),
//! no herd on the far side (`herd hosts install NAME`), no route to the host, a
//! door program missing here. A far herd that speaks another protocol is refused
//! with both versions named.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use herd_protocol::Method;
use herd_protocol::params::HelloParams;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::config::HostConfig;
use crate::exit::{Code, Failure};
use crate::protocol::{
    self, Line, MAX_RESPONSE_BYTES, PROTOCOL_VERSION, Request, Response, RpcError,
};

/// How long a door may take to answer `hello` before it is given up.
pub(crate) const HELLO_DEADLINE: Duration = Duration::from_secs(15);

/// How many of the door's last stderr lines an error quotes.
const STDERR_LINES: usize = 12;

/// How long a closed door is given to finish writing stderr and exit, so its
/// message is quoted whole.
const LAST_WORDS: Duration = Duration::from_secs(3);

/// The program that puts a door in a session of its own.
const SETSID: &str = "setsid";

/// The door of host `name`: its argv as written, stdio piped, in a new session
/// with no controlling terminal, killed when dropped.
pub(crate) fn command(name: &str, host: &HostConfig) -> tokio::process::Command {
    tracing::debug!(host = name, program = ?host.command.first(), "door command");
    detached(&host.command)
}

/// `argv` (config validation refuses an empty one; `setsid` refuses it too) in a new session
/// with no controlling terminal and no way to ask for a password, stdio piped.
pub(crate) fn detached(argv: &[String]) -> tokio::process::Command {
    let mut std = crate::auxiliary::command(SETSID);
    std.arg("--")
        .args(argv)
        .env("SSH_ASKPASS_REQUIRE", "never")
        .env_remove("DISPLAY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut command = tokio::process::Command::from(std);
    command.kill_on_drop(true);
    command
}

// The `proxy` object a far `herd proxy` adds to its hello answer, and the far
// `herd-shim` it names, are herd-protocol's (`protocol/src/door.rs`).
pub(crate) use herd_protocol::door::ProxyInfo;

/// What the far side said in the handshake.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct FarHello {
    /// The far daemon's protocol version.
    pub(crate) protocol: u32,
    /// The far daemon's herd version.
    pub(crate) daemon: String,
    /// The far home.
    pub(crate) home: String,
    /// What the far daemon serves beyond protocol 1.
    #[serde(default)]
    pub(crate) capabilities: Vec<String>,
    /// Who and what runs the far proxy (none from a door that is not `herd proxy`).
    #[serde(default)]
    pub(crate) proxy: Option<ProxyInfo>,
    /// The far proxy's environment, which far jobs run in (the daemon's host
    /// link, `daemon/hosts.rs`).
    #[serde(default)]
    pub(crate) proxy_env: Option<std::collections::BTreeMap<String, String>>,
}

/// Why a door gave no usable `hello`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DoorError {
    /// The door's program (or `setsid`) could not be started here.
    #[error("host {name}: cannot start its door `{program}`: {source}; fix: {fix}")]
    Spawn {
        name: String,
        program: String,
        fix: String,
        #[source]
        source: std::io::Error,
    },
    /// The door closed before answering.
    #[error(
        "host {name}: the door closed before herd answered ({status}){said}\nfix: {fix}",
        said = quoted(stderr)
    )]
    Closed {
        name: String,
        status: String,
        stderr: String,
        fix: Fix,
    },
    /// The door did not answer in time.
    #[error(
        "host {name}: no answer through the door within {}s{said}\nfix: {fix}",
        after.as_secs(),
        said = quoted(stderr)
    )]
    Timeout {
        name: String,
        after: Duration,
        stderr: String,
        fix: Fix,
    },
    /// Something answered that is not herd (a banner or a shell's noise on stdout).
    #[error(
        "host {name}: the door's first line is not herd's answer: {line:?}{said}\nfix: make the host's \
         command end in `herd proxy` and print nothing else on stdout (a login script that echoes breaks it)",
        said = quoted(stderr)
    )]
    NotHerd {
        name: String,
        line: String,
        stderr: String,
    },
    /// The far herd speaks another protocol.
    #[error(
        "host {name}: protocol version mismatch: this herd ({ours_version}) speaks protocol {ours}, \
         the far one ({theirs_version}) speaks protocol {theirs}; install the same herd on both \
         (`herd hosts install {name}`, then `herd shutdown` on the far side if its daemon is older)"
    )]
    ProtocolMismatch {
        name: String,
        ours: u32,
        ours_version: String,
        theirs: u32,
        theirs_version: String,
        proxy: Option<ProxyInfo>,
    },
    /// The far daemon refused the handshake for another reason.
    #[error("host {name}: the far herd refused the handshake: {}", error.message)]
    Refused {
        name: String,
        error: RpcError,
        proxy: Option<ProxyInfo>,
    },
}

impl DoorError {
    /// The error with exit code 3 (the host is unreachable), for the CLI.
    pub(crate) fn into_failure(self) -> anyhow::Error {
        Failure::new(Code::Unreachable, self.to_string()).into()
    }

    /// The far side's platform, when the far herd answered at all.
    pub(crate) fn proxy(&self) -> Option<&ProxyInfo> {
        match self {
            DoorError::ProtocolMismatch { proxy, .. } | DoorError::Refused { proxy, .. } => {
                proxy.as_ref()
            }
            _ => None,
        }
    }

    /// What the fix is, as a kind.
    pub(crate) fn fix(&self) -> Option<&Fix> {
        match self {
            DoorError::Closed { fix, .. } | DoorError::Timeout { fix, .. } => Some(fix),
            _ => None,
        }
    }
}

/// The door's last words, indented under the message; nothing when it said nothing.
fn quoted(stderr: &str) -> String {
    if stderr.trim().is_empty() {
        "; it wrote nothing on stderr".to_owned()
    } else {
        let lines: Vec<String> = stderr.lines().map(|l| format!("  {l}")).collect();
        format!("; it said:\n{}", lines.join("\n"))
    }
}

/// What to do about a door that failed, judged from what it said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fix {
    /// ssh does not know the far host's key.
    HostKeyUnknown { name: String },
    /// ssh knows another key for the far host: possibly an attack.
    HostKeyChanged {
        /// The fingerprint of the key the far host sent, as ssh printed it.
        fingerprint: Option<String>,
        /// Where the old key is (`FILE:LINE`), as ssh printed it.
        offending: Option<String>,
    },
    /// The far side was refused access to a path (not ssh's login refused).
    PermissionDenied {
        /// The path named in the refusal, when one was.
        path: Option<String>,
        /// The line that said it.
        line: String,
    },
    /// The door wanted a password or passphrase.
    PasswordAsked,
    /// The far side has no herd where the command looks.
    HerdMissing { name: String },
    /// The door's own program is missing here.
    ProgramMissing { program: String },
    /// The far host is not reachable.
    NoRoute,
    /// Nothing recognisable: try the command by hand.
    ByHand { argv: Vec<String> },
}

impl std::fmt::Display for Fix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fix::HostKeyUnknown { name } => write!(
                f,
                "the far host's key is not known here: add it with `ssh-keyscan [-p PORT] HOST >> \
                 ~/.ssh/known_hosts` (compare its fingerprint), or connect once by hand with the \
                 same ssh options, then `herd hosts check {name}`"
            ),
            Fix::HostKeyChanged {
                fingerprint,
                offending,
            } => write!(
                f,
                "the far host answered with a key other than the one known here: this may be an attack \
                 (someone between here and the host) or the host was reinstalled. Do not accept the new \
                 key blindly: compare its fingerprint ({}) with the host's own key, read there by a way \
                 you trust (its console or administrator: `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`); \
                 only if they match, remove the old key ({}) with `ssh-keygen -R HOST` and connect once by hand",
                fingerprint.as_deref().unwrap_or("as ssh printed it above"),
                offending
                    .as_deref()
                    .map_or_else(|| "ssh named its file above".to_owned(), |o| format!("in {o}")),
            ),
            Fix::PermissionDenied { path, line } => match path {
                Some(path) => write!(
                    f,
                    "the far side was refused access to {path} ({line:?}): the far user the door runs as \
                     must be able to reach and write it (`ls -ld {path}` and each directory above it, \
                     there), or point the host's command at a path of that user's own (HERD_HOME=...)"
                ),
                None => write!(
                    f,
                    "the far side was refused access ({line:?}): check who the door runs as there and \
                     the permissions of the path it names"
                ),
            },
            Fix::PasswordAsked => f.write_str(
                "the door asked for a password or passphrase, which nobody can type for it: use a key \
                 it can use unattended (ssh-agent, or a key without a passphrase for this host) and \
                 add `-o BatchMode=yes` to the host's command",
            ),
            Fix::HerdMissing { name } => write!(
                f,
                "the far side has no herd where the command looks: `herd hosts install {name}` \
                 (give [hosts.{name}] an `install` argv), or put herd on the far PATH"
            ),
            Fix::ProgramMissing { program } => write!(
                f,
                "`{program}` is not installed here (or not on PATH): install it or write its full path \
                 in the host's command"
            ),
            Fix::NoRoute => f.write_str(
                "the far host is not reachable: check its name, port and the network, then retry",
            ),
            Fix::ByHand { argv } => write!(
                f,
                "run the host's command by hand to see what it needs: {}",
                shell_words::join(argv)
            ),
        }
    }
}

/// Judges a failed door by its stderr and exit code.
pub(crate) fn diagnose(name: &str, argv: &[String], stderr: &str, code: Option<i32>) -> Fix {
    let text = stderr.to_ascii_lowercase();
    let has = |needle: &str| text.contains(needle);
    let permission = permission_line(stderr);
    if has("remote host identification has changed")
        || has("has changed and you have requested strict checking")
        || has("offending ") && has(" key in ")
    {
        Fix::HostKeyChanged {
            fingerprint: stderr
                .split_whitespace()
                .find(|w| w.starts_with("SHA256:") || w.starts_with("MD5:"))
                .map(|w| w.trim_end_matches('.').to_owned()),
            offending: stderr.lines().find_map(|l| {
                let (_, rest) = l.split_once(" key in ")?;
                Some(rest.trim().to_owned())
            }),
        }
    } else if has("host key verification failed")
        || has("authenticity of host")
        || has("no matching host key")
        || has("host key is known")
    {
        Fix::HostKeyUnknown {
            name: name.to_owned(),
        }
    } else if has("setsid: failed to execute") {
        Fix::ProgramMissing {
            program: argv.first().cloned().unwrap_or_default(),
        }
    } else if let Some((line, path)) = permission.filter(|_| {
        // ssh's own refusals of the login are about keys and passwords.
        code != Some(126)
            && !ssh_login_refused(&text)
            && !has("please try again")
            && !has("password")
            && !has("passphrase")
    }) {
        Fix::PermissionDenied { path, line }
    } else if (code != Some(126) && ssh_login_refused(&text))
        || has("password")
        || has("passphrase")
        || has("/dev/tty")
        || has("askpass")
    {
        Fix::PasswordAsked
    } else if has("command not found")
        || has(": not found")
        || has("no such file or directory")
        || has("herd is not installed")
        || has("executable file not found")
        || code == Some(127)
        || code == Some(126)
    {
        Fix::HerdMissing {
            name: name.to_owned(),
        }
    } else if has("could not resolve")
        || has("connection refused")
        || has("connection timed out")
        || has("no route to host")
        || has("network is unreachable")
    {
        Fix::NoRoute
    } else {
        Fix::ByHand {
            argv: argv.to_vec(),
        }
    }
}

/// Whether ssh refused the login (`Permission denied (publickey,password).`),
/// judged on lower-cased text.
fn ssh_login_refused(text: &str) -> bool {
    ["publickey", "password", "keyboard", "gssapi", "hostbased"]
        .iter()
        .any(|method| text.contains(&format!("permission denied ({method}")))
}

/// A line saying permission was denied that is not ssh refusing the login
/// (`Permission denied (publickey,password).`), and the path it names.
fn permission_line(stderr: &str) -> Option<(String, Option<String>)> {
    let line = stderr.lines().find(|l| {
        let lower = l.to_ascii_lowercase();
        lower.contains("permission denied") && !ssh_login_refused(&lower)
    })?;
    let path = line
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| matches!(c, ':' | ',' | ';' | '\'' | '"' | '`' | '(' | ')'))
        })
        .find(|w| w.starts_with('/') || w.starts_with("~/"))
        .map(str::to_owned);
    Some((line.trim().to_owned(), path))
}

/// The last lines a door wrote on stderr, read as they come (a door whose stderr
/// pipe filled up would block).
#[derive(Debug, Clone, Default)]
pub(crate) struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    ended: Arc<tokio::sync::Notify>,
    done: Arc<std::sync::atomic::AtomicBool>,
}

impl StderrTail {
    /// Reads `stderr` to its end in the background.
    pub(crate) fn follow(stderr: Option<tokio::process::ChildStderr>) -> StderrTail {
        let tail = StderrTail::default();
        let Some(stderr) = stderr else {
            tail.done.store(true, std::sync::atomic::Ordering::SeqCst);
            return tail;
        };
        let writer = tail.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut kept = writer
                    .lines
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if kept.len() == STDERR_LINES {
                    kept.pop_front();
                }
                kept.push_back(line.chars().take(500).collect());
            }
            writer.done.store(true, std::sync::atomic::Ordering::SeqCst);
            writer.ended.notify_waiters();
        });
        tail
    }

    /// The lines so far, joined.
    pub(crate) fn text(&self) -> String {
        let kept = self
            .lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// The lines once stderr has ended, or when `within` passes.
    async fn settled(&self, within: Duration) -> String {
        let ended = self.ended.notified();
        if !self.done.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = tokio::time::timeout(within, ended).await;
        }
        self.text()
    }
}

/// A door that answered `hello`.
#[derive(Debug)]
pub(crate) struct Door {
    name: String,
    child: Child,
    reader: BufReader<ChildStdout>,
    writer: ChildStdin,
    stderr: StderrTail,
    next_id: u64,
    buf: Vec<u8>,
    /// The far side's answer.
    pub(crate) hello: FarHello,
}

/// The `hello` a door is greeted with (the same as a local client's).
pub(crate) fn hello_params() -> Value {
    // Two plain fields: they always serialise.
    serde_json::to_value(HelloParams {
        protocol: Some(u64::from(PROTOCOL_VERSION)),
        client: Some(env!("CARGO_PKG_VERSION").to_owned()),
    })
    .unwrap_or_default()
}

/// Starts host `name`'s door and greets the far herd, within `deadline`.
///
/// # Errors
/// A [`DoorError`] with the door's stderr and a fix.
pub(crate) async fn open(
    name: &str,
    host: &HostConfig,
    deadline: Duration,
) -> Result<Door, DoorError> {
    let child = command(name, host).spawn().map_err(|source| {
        let fix = if source.kind() == std::io::ErrorKind::NotFound {
            format!("install util-linux, whose `{SETSID}` herd runs each door under")
        } else {
            format!("run {} by hand", shell_words::join(&host.command))
        };
        DoorError::Spawn {
            name: name.to_owned(),
            program: host.command.first().cloned().unwrap_or_default(),
            fix,
            source,
        }
    })?;
    handshake(name, &host.command, child, deadline).await
}

/// Greets the far herd through a spawned door (`command`'s, stdio piped) and
/// checks its protocol against ours.
///
/// # Errors
/// A [`DoorError`]; the door is killed.
pub(crate) async fn handshake(
    name: &str,
    argv: &[String],
    mut child: Child,
    deadline: Duration,
) -> Result<Door, DoorError> {
    let stderr = StderrTail::follow(child.stderr.take());
    let (Some(writer), Some(reader)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(closed(name, argv, child, &stderr).await);
    };
    let mut door = Door {
        name: name.to_owned(),
        child,
        reader: BufReader::with_capacity(256 * 1024, reader),
        writer,
        stderr,
        next_id: 1,
        buf: Vec::new(),
        hello: FarHello {
            protocol: 0,
            daemon: String::new(),
            home: String::new(),
            capabilities: Vec::new(),
            proxy: None,
            proxy_env: None,
        },
    };
    let started = Instant::now();
    let greeted = tokio::time::timeout(deadline, door.first_answer()).await;
    let answer = match greeted {
        Err(_) => {
            let _ = door.child.start_kill();
            let stderr = door.stderr.settled(LAST_WORDS).await;
            let fix = diagnose(name, argv, &stderr, None);
            return Err(DoorError::Timeout {
                name: name.to_owned(),
                after: deadline,
                stderr,
                fix,
            });
        }
        Ok(None) => return Err(closed(name, argv, door.child, &door.stderr).await),
        Ok(Some(line)) => line,
    };
    tracing::debug!(
        host = name,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "door answered"
    );
    let not_herd = |door: &Door, line: &[u8]| DoorError::NotHerd {
        name: name.to_owned(),
        line: String::from_utf8_lossy(line).chars().take(200).collect(),
        stderr: door.stderr.text(),
    };
    let Ok(response) = serde_json::from_slice::<Response>(&answer) else {
        return Err(not_herd(&door, &answer));
    };
    if let Some(error) = response.error {
        let proxy = error
            .data
            .as_ref()
            .and_then(|data| data.get("proxy"))
            .and_then(|p| serde_json::from_value::<ProxyInfo>(p.clone()).ok());
        if error.code == protocol::VERSION_MISMATCH {
            return Err(DoorError::ProtocolMismatch {
                name: name.to_owned(),
                ours: PROTOCOL_VERSION,
                ours_version: env!("CARGO_PKG_VERSION").to_owned(),
                theirs: far_protocol(&error.message, proxy.as_ref()),
                theirs_version: proxy
                    .as_ref()
                    .map_or_else(|| "unknown version".to_owned(), |p| p.version.clone()),
                proxy,
            });
        }
        return Err(DoorError::Refused {
            name: name.to_owned(),
            error,
            proxy,
        });
    }
    let Some(hello) = response
        .result
        .and_then(|result| serde_json::from_value::<FarHello>(result).ok())
    else {
        return Err(not_herd(&door, &answer));
    };
    if hello.protocol != PROTOCOL_VERSION {
        return Err(DoorError::ProtocolMismatch {
            name: name.to_owned(),
            ours: PROTOCOL_VERSION,
            ours_version: env!("CARGO_PKG_VERSION").to_owned(),
            theirs: hello.protocol,
            theirs_version: hello.daemon.clone(),
            proxy: hello.proxy,
        });
    }
    door.hello = hello;
    Ok(door)
}

/// The far daemon's protocol, read from its mismatch message (`the daemon (herd
/// X) speaks protocol N`), else the far proxy's.
fn far_protocol(message: &str, proxy: Option<&ProxyInfo>) -> u32 {
    message
        .rsplit_once("speaks protocol ")
        .and_then(|(_, rest)| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse().ok())
        })
        .or(proxy.map(|p| p.protocol))
        .unwrap_or(0)
}

/// The error for a door that closed before answering, once it has exited.
async fn closed(name: &str, argv: &[String], mut child: Child, stderr: &StderrTail) -> DoorError {
    let status = match tokio::time::timeout(LAST_WORDS, child.wait()).await {
        Ok(Ok(status)) => match status.code() {
            Some(code) => format!("exit code {code}"),
            None => "killed by a signal".to_owned(),
        },
        Ok(Err(err)) => format!("its status is unknown: {err}"),
        Err(_) => {
            let _ = child.start_kill();
            "it closed its stdout and was killed".to_owned()
        }
    };
    let code = child.try_wait().ok().flatten().and_then(|s| s.code());
    let stderr = stderr.settled(LAST_WORDS).await;
    let fix = diagnose(name, argv, &stderr, code);
    DoorError::Closed {
        name: name.to_owned(),
        status,
        stderr,
        fix,
    }
}

impl Door {
    /// Sends `hello` and reads the first line back; `None` when the door closed first.
    async fn first_answer(&mut self) -> Option<Vec<u8>> {
        let id = self.next_id;
        self.next_id += 1;
        let line = request_line(id, "hello", hello_params());
        if self.writer.write_all(&line).await.is_err() || self.writer.flush().await.is_err() {
            return None;
        }
        match protocol::read_line(&mut self.reader, &mut self.buf, MAX_RESPONSE_BYTES).await {
            Ok(Line::Complete) => Some(self.buf.clone()),
            Ok(Line::TooLong) => Some(b"(an oversized line)".to_vec()),
            Ok(Line::Eof) | Err(_) => None,
        }
    }

    /// Calls `method` on the far daemon and returns its result.
    ///
    /// # Errors
    /// The far daemon's error, or the door closing.
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let lost = |what: String| -> anyhow::Error {
            Failure::new(Code::Unreachable, format!("host {}: {what}", self.name)).into()
        };
        let line = request_line(id, method, params);
        if let Err(err) = self.writer.write_all(&line).await {
            return Err(lost(format!("the door closed: {err}")));
        }
        loop {
            let read =
                protocol::read_line(&mut self.reader, &mut self.buf, MAX_RESPONSE_BYTES).await;
            match read {
                Ok(Line::Complete) => {}
                Ok(Line::Eof) => return Err(lost("the door closed".to_owned())),
                Ok(Line::TooLong) => {
                    return Err(lost("the far side sent an oversized line".into()));
                }
                Err(err) => return Err(lost(format!("the door failed: {err}"))),
            }
            let Ok(message) = serde_json::from_slice::<Response>(&self.buf) else {
                return Err(lost("the far side sent a line that is not JSON-RPC".into()));
            };
            if message.method.is_some() || message.id != id {
                continue;
            }
            if let Some(error) = message.error {
                return Err(crate::client::rpc_failure(error));
            }
            return Ok(message.result.unwrap_or(Value::Null));
        }
    }

    /// The door's parts, for a caller that speaks the protocol itself: the child
    /// (killed on drop), its stdout (buffered, past the hello answer), its stdin,
    /// and its stderr tail.
    pub(crate) fn into_parts(self) -> (Child, BufReader<ChildStdout>, ChildStdin, StderrTail) {
        (self.child, self.reader, self.writer, self.stderr)
    }

    /// Closes the door: end of stdin ends the far proxy, and the door exits; one
    /// that does not within a few seconds is killed.
    pub(crate) async fn close(self) {
        let Door {
            mut child, writer, ..
        } = self;
        drop(writer);
        if tokio::time::timeout(LAST_WORDS, child.wait())
            .await
            .is_err()
        {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// Calls method `M` with typed params; its answer read as the protocol's type.
    ///
    /// # Errors
    /// As [`Door::call`]'s, and an answer that does not read as `M`'s.
    pub(crate) async fn ask<M: Method>(&mut self, params: &M::Params) -> anyhow::Result<M::Answer> {
        let answer = self
            .call(M::NAME, crate::client::params_of(params)?)
            .await?;
        crate::client::answer_of::<M>(answer)
    }
}

/// One request line.
fn request_line(id: u64, method: &str, params: Value) -> Vec<u8> {
    let request = Request {
        jsonrpc: "2.0".into(),
        id: Some(Value::from(id)),
        method: method.to_owned(),
        params,
    };
    // A request of strings and `Value`s always serialises.
    let mut line = serde_json::to_vec(&request).unwrap_or_default();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests;
