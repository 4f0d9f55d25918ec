//! `herd proxy`: herd's protocol on stdin/stdout, bridged to this home's daemon.
//!
//! It is what runs on the far side of a host's door (`ssh build1 herd proxy`).
//! It connects to the home's socket (starting a daemon as every client does, and
//! checking that the socket is served by this user), then copies bytes both ways:
//! whatever JSON lines the near side sends reach the daemon unchanged, streaming
//! methods included, and the daemon's lines come back unchanged, with one
//! exception: the first line the daemon sends (the answer to `hello`, or the error
//! that refused it) gains a `proxy` object saying who and what is on this side
//! (`version`, `protocol`, `user`, `uid`, `os`, `arch`, `glibc`). `herd hosts
//! check` reports the far user from it and `herd hosts install` the far platform;
//! a client that does not know the field ignores it.
//!
//! The bridge ends when either side closes. End of stdin half-closes the socket,
//! so answers already asked for still come back, and the daemon, which ends a
//! connection (its waits and streams included) when its client leaves, then
//! closes it. The daemon closing, or stdout going away, ends the proxy at once.
//!
//! Invariant: nothing but the protocol is written to stdout; logs and the reason
//! for a failure go to stderr, the failure as one line, with exit code 3.
//!
//! Copying uses two plain threads over blocking descriptors rather than the async
//! runtime: tokio's stdin reads on a blocking-pool thread that cannot be
//! cancelled, and a bridge has nothing to multiplex.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;

use anyhow::Context;
use herd_persistence::Home;
use herd_protocol::door::{FarShim, ProxyErrorData, ProxyHello, ProxyInfo};
use serde_json::Value;

use crate::client::{self, Client};
use crate::exit::{Code, Failure};
use crate::protocol::PROTOCOL_VERSION;

/// The longest first line (the hello answer) that is parsed to add `proxy`; a
/// longer one is passed on as it is.
const MAX_HELLO_BYTES: u64 = 1 << 20;

/// Runs `herd proxy` until either side closes.
///
/// # Errors
/// [`Code::Unreachable`] with a one-line reason when the daemon cannot be reached
/// or started, or is served by another user.
pub(crate) fn run(home: &Home) -> anyhow::Result<()> {
    // The first line says the mode: mux (`mux.rs`), or the first request of a
    // plain bridge, passed on.
    let mut stdin = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin());
    let mut first = Vec::new();
    (&mut stdin)
        .take(MAX_HELLO_BYTES)
        .read_until(b'\n', &mut first)
        .context("cannot read stdin")?;
    if first == mux::MUX_LINE {
        tracing::debug!("proxy in mux mode");
        return mux::run(home, stdin).map_err(one_line);
    }
    let stream = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?
        .block_on(connect(home))
        .map_err(one_line)?;
    tracing::debug!("proxy connected to the daemon");
    if !first.is_empty() {
        let mut up = &stream;
        if let Err(err) = up.write_all(&first) {
            tracing::debug!(error = %err, "proxy write to the daemon failed");
            return Ok(());
        }
    }
    bridge(stream, stdin);
    Ok(())
}

/// A connection to the home's daemon, started if none answers, whose peer is
/// this user.
pub(super) async fn connect(home: &Home) -> anyhow::Result<UnixStream> {
    let socket = home.socket_path();
    client::check_socket_path(&socket)?;
    let mut started = false;
    loop {
        match tokio::net::UnixStream::connect(&socket).await {
            Ok(stream) => {
                check_peer(&stream)?;
                let stream = stream
                    .into_std()
                    .context("cannot take over the daemon connection")?;
                stream
                    .set_nonblocking(false)
                    .context("cannot make the daemon connection blocking")?;
                return Ok(stream);
            }
            Err(err)
                if !started
                    && matches!(
                        err.kind(),
                        std::io::ErrorKind::NotFound
                            | std::io::ErrorKind::ConnectionRefused
                            | std::io::ErrorKind::ConnectionReset
                    ) =>
            {
                // Autostart as every client does; its own connection only proves
                // the daemon answers and is closed again.
                started = true;
                drop(Client::connect(home).await?);
            }
            Err(err) => {
                return Err(Failure::new(
                    Code::Unreachable,
                    format!(
                        "cannot connect to the daemon at {}: {err}",
                        socket.display()
                    ),
                )
                .into());
            }
        }
    }
}

/// Refuses a socket another user serves: the near side's requests (which may
/// carry secrets in a job's environment) go only to a daemon of this user.
fn check_peer(stream: &tokio::net::UnixStream) -> anyhow::Result<()> {
    let ours = nix::unistd::getuid().as_raw();
    let theirs = stream
        .peer_cred()
        .context("cannot read the daemon socket's peer credentials")?
        .uid();
    if theirs != ours {
        return Err(Failure::new(
            Code::Unreachable,
            format!(
                "the daemon socket is served by uid {theirs}, not by this user (uid {ours}); \
                 check who owns the home and its run/ directory"
            ),
        )
        .into());
    }
    Ok(())
}

/// The error as one line (a door's stderr is read line by line on the near side),
/// keeping its exit code.
fn one_line(err: anyhow::Error) -> anyhow::Error {
    let code = crate::exit::code_of(&err);
    let text = format!("{err:#}");
    let first = text.lines().next().unwrap_or("cannot reach the daemon");
    let code = if code == Code::Failed {
        Code::Unreachable
    } else {
        code
    };
    Failure::new(code, format!("proxy: {first}")).into()
}

/// Copies stdin to the daemon and the daemon to stdout until either side closes.
fn bridge(stream: UnixStream, stdin: impl Read + Send + 'static) {
    let up = match stream.try_clone() {
        Ok(up) => up,
        Err(err) => {
            tracing::warn!(error = %err, "cannot duplicate the daemon connection");
            return;
        }
    };
    // The thread is not joined: when the daemon side ends first it may still be
    // blocked reading stdin, and the process exits under it.
    let spawned = std::thread::Builder::new()
        .name("herd-proxy-up".into())
        .spawn(move || upstream(up, stdin));
    if let Err(err) = spawned {
        tracing::warn!(error = %err, "cannot start the proxy's stdin thread");
        return;
    }
    downstream(stream);
}

/// stdin → daemon; at end of stdin the socket's write side is shut, so the
/// daemon sees its client leave and answers what it was already asked.
fn upstream(mut socket: UnixStream, mut stdin: impl Read) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => {
                tracing::debug!(error = %err, "proxy stdin read failed");
                break;
            }
        };
        if let Err(err) = socket.write_all(&buf[..n]) {
            tracing::debug!(error = %err, "proxy write to the daemon failed");
            break;
        }
    }
    tracing::debug!("proxy stdin ended");
    let _ = socket.shutdown(Shutdown::Write);
}

/// daemon → stdout, adding `proxy` to the first line.
fn downstream(socket: UnixStream) {
    let shut = socket.try_clone().ok();
    let mut reader = BufReader::with_capacity(256 * 1024, socket);
    let mut stdout = std::io::stdout().lock();
    let mut first = Vec::new();
    let read = (&mut reader)
        .take(MAX_HELLO_BYTES)
        .read_until(b'\n', &mut first);
    let copied = match read {
        Ok(0) => Ok(()),
        Ok(_) => write_flushed(&mut stdout, &with_proxy_info(first)).and_then(|()| {
            loop {
                let chunk = reader.fill_buf()?;
                if chunk.is_empty() {
                    return Ok(());
                }
                let n = chunk.len();
                write_flushed(&mut stdout, chunk)?;
                reader.consume(n);
            }
        }),
        Err(err) => Err(err),
    };
    if let Err(err) = copied {
        tracing::debug!(error = %err, "proxy copy to stdout ended");
    }
    // Stdout gone or the daemon gone: either way the connection is over.
    if let Some(socket) = shut {
        let _ = socket.shutdown(Shutdown::Both);
    }
}

fn write_flushed(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    out.write_all(bytes)?;
    out.flush()
}

/// The first line with `proxy` added to its result (or to its error's data);
/// any line that is not such an object is passed on unchanged.
fn with_proxy_info(line: Vec<u8>) -> Vec<u8> {
    let Ok(mut message) = serde_json::from_slice::<Value>(&line) else {
        return line;
    };
    let proxy = proxy_info();
    if let Some(result) = message.get_mut("result").and_then(Value::as_object_mut) {
        // The environment far jobs run in goes too (a near daemon's host link
        // passes it as the spawn's caller_env; the near caller's never crosses).
        let hello = ProxyHello {
            proxy,
            proxy_env: herd_core::utf8_environment().into_iter().collect(),
        };
        let Ok(Value::Object(added)) = serde_json::to_value(hello) else {
            return line;
        };
        result.extend(added);
    } else if let Some(error) = message.get_mut("error").and_then(Value::as_object_mut) {
        match error.get_mut("data") {
            Some(Value::Object(data)) => {
                let Ok(info) = serde_json::to_value(proxy) else {
                    return line;
                };
                data.insert("proxy".into(), info);
            }
            None | Some(Value::Null) => {
                let Ok(data) = serde_json::to_value(ProxyErrorData { proxy }) else {
                    return line;
                };
                error.insert("data".into(), data);
            }
            Some(_) => return line,
        }
    } else {
        return line;
    }
    match serde_json::to_vec(&message) {
        Ok(mut out) => {
            out.push(b'\n');
            out
        }
        Err(_) => line,
    }
}

/// Who and what is on this side of the door.
pub(crate) fn proxy_info() -> ProxyInfo {
    let uid = nix::unistd::getuid();
    let user = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|user| user.name);
    ProxyInfo {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        protocol: PROTOCOL_VERSION,
        user,
        uid: uid.as_raw(),
        os: std::env::consts::OS.to_owned(),
        arch: std::env::consts::ARCH.to_owned(),
        glibc: super::install::running_glibc(),
        shim: shim_beside_exe(),
        mux: true,
    }
}

/// The `herd-shim` beside this executable (where a daemon started by this herd
/// looks for it when config names none): its path, size and recorded SHA-256
/// (`herd-shim.sha256`, written by `herd hosts install`), none when it is
/// missing. `herd hosts install` reads it to know whether the far side has one.
fn shim_beside_exe() -> Option<FarShim> {
    let exe = std::env::current_exe().ok()?;
    let path = exe.with_file_name("herd-shim");
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() => {
            // The record the install's writer left once the hash checked; one
            // for another length is stale.
            let record = std::fs::read_to_string(path.with_file_name("herd-shim.sha256"))
                .unwrap_or_default();
            let mut fields = record.split_whitespace();
            let sha256 = match (fields.next(), fields.next()) {
                (Some(sum), Some(len)) if len == meta.len().to_string() => Some(sum.to_owned()),
                _ => None,
            };
            Some(FarShim {
                path: path.display().to_string(),
                bytes: meta.len(),
                sha256,
            })
        }
        _ => None,
    }
}

pub(crate) mod mux;

#[cfg(test)]
mod tests;
