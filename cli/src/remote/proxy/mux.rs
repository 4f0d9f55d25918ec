//! `herd proxy` in mux mode: many connections to this home's daemon over one
//! door, so a near host link opens no new door (over ssh, no new connection) per
//! far stream or long call.
//!
//! A near link that sees `mux: true` in a far proxy's `proxy` object opens a door
//! whose first line is [`MUX_LINE`]. From then on every line either way is
//! `<channel> <line>`: the first line of a channel number not open yet opens a
//! connection to the daemon for it (as a plain proxy connects: started if needed,
//! served by this user), and the channel's lines go to it as written; the
//! daemon's lines come back with the channel number in front. `<channel> .`
//! closes a channel: from the near side the daemon connection is shut (which
//! ends its waits and streams), from here it says the daemon closed it (or it
//! could not be opened). End of stdin shuts every channel and ends the proxy.
//! Channel numbers are the near side's, never reused within a door.
//!
//! Blocking threads, as the plain bridge: the main thread reads stdin and writes
//! to the sockets; one thread per channel copies the daemon's lines to stdout,
//! whole lines under one lock.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use herd_persistence::Home;

/// The first line of a door that asks for mux mode.
pub(crate) const MUX_LINE: &[u8] = b"herd-proxy-mux 1\n";

/// The most channels open at once; one more is closed at once.
const MAX_CHANNELS: usize = 256;

/// The longest line taken from stdin (a request); a longer one closes its channel.
const MAX_LINE_BYTES: u64 = crate::protocol::MAX_REQUEST_BYTES as u64 + 64;

type Out = Arc<Mutex<std::io::Stdout>>;

/// Serves channels until stdin ends.
///
/// # Errors
/// The async runtime cannot be started.
pub(super) fn run(home: &Home, mut stdin: impl BufRead) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    let out: Out = Arc::new(Mutex::new(std::io::stdout()));
    let mut channels: HashMap<u64, UnixStream> = HashMap::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        match Read::by_ref(&mut stdin)
            .take(MAX_LINE_BYTES)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Some((channel, payload)) = parse(&line) else {
            tracing::debug!("a mux line without a channel number is ignored");
            continue;
        };
        if payload == b"." {
            if let Some(socket) = channels.remove(&channel) {
                let _ = socket.shutdown(Shutdown::Both);
            }
            continue;
        }
        if !channels.contains_key(&channel) {
            if channels.len() >= MAX_CHANNELS {
                tracing::warn!(channel, "too many mux channels; closed");
                closed(&out, channel);
                continue;
            }
            match runtime.block_on(super::connect(home)).and_then(|socket| {
                let reader = socket
                    .try_clone()
                    .context("cannot duplicate the daemon connection")?;
                Ok((socket, reader))
            }) {
                Ok((socket, reader)) => {
                    let copy = Arc::clone(&out);
                    let spawned = std::thread::Builder::new()
                        .name("herd-proxy-mux".into())
                        .spawn(move || relay(channel, reader, &copy));
                    if spawned.is_err() {
                        tracing::warn!(channel, "cannot start a mux channel's thread; closed");
                        closed(&out, channel);
                        continue;
                    }
                    channels.insert(channel, socket);
                }
                Err(err) => {
                    tracing::warn!(channel, error = %format!("{err:#}"), "a mux channel could not reach the daemon");
                    closed(&out, channel);
                    continue;
                }
            }
        }
        let sent = channels.get_mut(&channel).map(|socket| {
            socket
                .write_all(payload)
                .and_then(|()| socket.write_all(b"\n"))
        });
        if let Some(Err(_)) = sent
            && let Some(socket) = channels.remove(&channel)
        {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
    for socket in channels.values() {
        let _ = socket.shutdown(Shutdown::Both);
    }
    Ok(())
}

/// `<channel> <payload>\n` split; none for a line that does not start so.
fn parse(line: &[u8]) -> Option<(u64, &[u8])> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let space = line.iter().position(|b| *b == b' ')?;
    let channel = std::str::from_utf8(&line[..space]).ok()?.parse().ok()?;
    Some((channel, &line[space + 1..]))
}

/// Copies the daemon's lines of `channel` to stdout until it closes, then says so.
fn relay(channel: u64, socket: UnixStream, out: &Out) {
    let mut reader = BufReader::with_capacity(256 * 1024, socket);
    let prefix = format!("{channel} ");
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") {
            line.push(b'\n');
        }
        let mut stdout = out
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let written = stdout
            .write_all(prefix.as_bytes())
            .and_then(|()| stdout.write_all(&line))
            .and_then(|()| stdout.flush());
        if written.is_err() {
            return;
        }
    }
    closed(out, channel);
}

/// Tells the near side `channel` is closed.
fn closed(out: &Out, channel: u64) {
    let mut stdout = out
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let _ = stdout
        .write_all(format!("{channel} .\n").as_bytes())
        .and_then(|()| stdout.flush());
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn mux_lines_split_into_channel_and_payload() {
        assert_eq!(parse(b"7 {\"a\":1}\n"), Some((7, &b"{\"a\":1}"[..])));
        assert_eq!(parse(b"12 .\n"), Some((12, &b"."[..])));
        assert_eq!(parse(b"x {}\n"), None);
        assert_eq!(parse(b"{}\n"), None);
    }
}
