//! Following a log through a daemon restart: `logs -f`, `wait -f` and
//! `run --wait` connect again when their daemon goes away (a crash, a restart)
//! and carry on where they were, no line lost or shown twice.
//!
//! Where they were is counted in what was shown: the lines since the byte the
//! follow started at, and the characters of the line under way. A `log` note
//! carries no byte offset, and redaction changes lengths, but not lines (a
//! masked private key is masked line by line). On a new connection the log is
//! read again in `log_chunk` pieces from that byte, whose chunks end at line
//! ends: the piece holding the next line to show has that line's unshown rest
//! and every line after it printed, and the follow goes on from its end; when
//! no piece holds it (the line under way is the log's unfinished last one),
//! the follow goes on from the last line end and skips what was shown of it.
//!
//! No daemon back within [`RECONNECT_DEADLINE`](crate::client::RECONNECT_DEADLINE)
//! ends the follow with exit 3, saying the job was last seen running.

use herd_persistence::Home;
use herd_protocol::params::FollowParams;
use serde_json::Value;

use crate::client::{Backoff, Client, Gone, gone, is_lost, reconnect};

/// What a follow has shown since the byte it started at.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shown {
    /// Whole lines.
    pub(crate) lines: u64,
    /// Characters of the line under way.
    pub(crate) partial_chars: usize,
}

impl Shown {
    /// Counts `text` in.
    pub(crate) fn took(&mut self, text: &str) {
        match memchr::memrchr(b'\n', text.as_bytes()) {
            Some(at) => {
                self.lines += newlines(text);
                self.partial_chars = text[at + 1..].chars().count();
            }
            None => self.partial_chars += text.chars().count(),
        }
    }
}

/// The line ends in `text`, counted in byte-wide lanes the compiler vectorises
/// (a chunk holds at most 255 of them, so a lane never overflows), where
/// `str::matches` stopped at each one: a follow of a long log spent half its CPU
/// counting its lines.
fn newlines(text: &str) -> u64 {
    /// 14 SSE2 vectors, under 256.
    const CHUNK: usize = 224;
    text.as_bytes()
        .chunks(CHUNK)
        .map(|chunk| {
            let n = chunk
                .iter()
                .fold(0u8, |n, &b| n.wrapping_add(u8::from(b == b'\n')));
            u64::from(n)
        })
        .sum()
}

/// Drops the first `skip` characters of `text`, never past a line end; what is
/// left of `skip` for the next piece.
pub(crate) fn skipped<'t>(text: &'t str, skip: &mut usize) -> &'t str {
    if *skip == 0 {
        return text;
    }
    let mut cut = text.len();
    for (n, (at, c)) in text.char_indices().enumerate() {
        if n == *skip || c == '\n' {
            cut = at;
            break;
        }
    }
    let dropped = text[..cut].chars().count();
    *skip = if cut < text.len() { 0 } else { *skip - dropped };
    &text[cut..]
}

/// The rest of `text` after its first `lines` lines and then `chars`
/// characters (not past a line end); `None` when nothing follows its first
/// `lines` lines.
pub(crate) fn after(text: &str, lines: u64, chars: usize) -> Option<&str> {
    let mut rest = text;
    for _ in 0..lines {
        let at = rest.find('\n')?;
        rest = &rest[at + 1..];
    }
    if rest.is_empty() {
        return None;
    }
    let mut skip = chars;
    Some(skipped(rest, &mut skip))
}

/// Follows session `id`'s log from `from_byte` to the session's end on
/// `client`, handing the output to `emit`, through daemon restarts; the
/// session's result when the stream's end carried it.
///
/// # Errors
/// As [`super::logstream::stream`]'s; a daemon gone for good after the deadline.
pub(crate) async fn stream(
    home: &Home,
    client: Client,
    id: &str,
    from_byte: u64,
    emit: impl FnMut(&str) -> std::io::Result<()>,
) -> anyhow::Result<Option<Value>> {
    stream_from(home, client, id, (from_byte, None), emit).await
}

/// As [`stream`], from byte 0 of a stream already asked for on `client` as request
/// `request` (a `spawn` with `follow`, capability `spawn.follow`).
///
/// # Errors
/// As [`stream`]'s.
pub(crate) async fn stream_started(
    home: &Home,
    client: Client,
    id: &str,
    request: u64,
    emit: impl FnMut(&str) -> std::io::Result<()>,
) -> anyhow::Result<Option<Value>> {
    stream_from(home, client, id, (0, Some(request)), emit).await
}

async fn stream_from(
    home: &Home,
    mut client: Client,
    id: &str,
    (from_byte, mut started): (u64, Option<u64>),
    mut emit: impl FnMut(&str) -> std::io::Result<()>,
) -> anyhow::Result<Option<Value>> {
    let mut shown = Shown::default();
    let mut at = from_byte;
    let mut skip = 0_usize;
    // While a far host does not answer: until when it is asked again, and what
    // had been shown when it stopped answering.
    let mut far_lost: Option<(tokio::time::Instant, Shown)> = None;
    loop {
        let mut shown_here = |text: &str| {
            let text = skipped(text, &mut skip);
            shown.took(text);
            emit(text)
        };
        let attempt = match started.take() {
            Some(request) => {
                super::logstream::stream_started(&mut client, request, shown_here).await
            }
            None => super::logstream::stream(&mut client, id, at, &mut shown_here).await,
        };
        match attempt {
            Err(err) if is_lost(&err) => {
                tracing::debug!(error = %format!("{err:#}"), "the daemon went away; reconnecting");
                client = reconnect(home).await.map_err(|e| {
                    e.context(format!(
                        "lost the daemon while following {id}, which was running then; `herd \
                         logs -f {id}` follows it once a daemon runs"
                    ))
                })?;
                (at, skip) = locate(&mut client, id, from_byte, shown, &mut |text| {
                    shown.took(text);
                    emit(text)
                })
                .await?;
            }
            Err(err) if gone(&err) == Some(Gone::Host) => {
                // A far job's host blinked (its door, its daemon): asked again
                // until it answers or the deadline passes since the last output.
                let until = match far_lost {
                    Some((until, seen)) if seen == shown => until,
                    _ => tokio::time::Instant::now() + crate::client::RECONNECT_DEADLINE,
                };
                (client, at, skip) =
                    far_again(home, id, (from_byte, shown), until, err, &mut |text| {
                        shown.took(text);
                        emit(text)
                    })
                    .await?;
                far_lost = Some((until, shown));
            }
            end => return end,
        }
    }
}

/// After a far host did not answer: a new connection, then [`locate`] through
/// the host once it answers again, pausing between tries (the daemon or the
/// host still gone), never past `until` ([`Backoff`]).
async fn far_again(
    home: &Home,
    id: &str,
    (base, shown): (u64, Shown),
    until: tokio::time::Instant,
    mut last: anyhow::Error,
    emit: &mut impl FnMut(&str) -> std::io::Result<()>,
) -> anyhow::Result<(Client, u64, usize)> {
    let mut pace = Backoff::new(until, std::time::Duration::from_millis(100));
    while pace.pause().await {
        tracing::debug!(error = %format!("{last:#}"), "the far host did not answer; asking again");
        let mut client = match pace.bound(Client::connect(home)).await {
            Some(Ok(client)) => client,
            Some(Err(err)) => {
                last = err;
                continue;
            }
            None => break,
        };
        match pace.bound(locate(&mut client, id, base, shown, emit)).await {
            Some(Ok((at, skip))) => return Ok((client, at, skip)),
            Some(Err(err)) if gone(&err).is_some() => last = err,
            Some(Err(err)) => return Err(err),
            None => break,
        }
    }
    Err(last.context(format!(
        "the host of {id} did not answer again within {} s; `herd logs -f {id}` follows it once it does",
        crate::client::RECONNECT_DEADLINE.as_secs()
    )))
}

/// Finds where to go on after `shown` of the log from `base` was shown: prints
/// the rest of the chunk that holds the next line to show, and answers the byte
/// to follow from and the characters to skip there.
async fn locate(
    client: &mut Client,
    id: &str,
    base: u64,
    shown: Shown,
    emit: &mut impl FnMut(&str) -> std::io::Result<()>,
) -> anyhow::Result<(u64, usize)> {
    let mut from = base;
    let mut lines = 0_u64;
    loop {
        let chunk = client
            .ask::<herd_protocol::methods::LogChunk>(&FollowParams::new(id, from))
            .await?;
        let text = chunk.output.as_str();
        let next = chunk.next_byte;
        let ahead = shown.lines.saturating_sub(lines);
        if let Some(rest) = after(text, ahead, shown.partial_chars) {
            emit(rest)?;
            return Ok((next, 0));
        }
        if next <= from {
            return Ok((from, shown.partial_chars));
        }
        lines += newlines(text);
        from = next;
    }
}

#[cfg(test)]
mod tests {
    use super::{Shown, after, newlines, skipped};

    #[test]
    fn line_ends_are_counted_across_chunk_edges_however_dense() {
        for len in [0, 1, 223, 224, 225, 447, 448, 1000, 5000] {
            let all = "\n".repeat(len);
            assert_eq!(newlines(&all), len as u64, "all line ends, {len}");
            let mixed: String = (0..len)
                .map(|i| if i % 3 == 0 { '\n' } else { 'é' })
                .collect();
            assert_eq!(
                newlines(&mixed),
                mixed.matches('\n').count() as u64,
                "mixed, {len}"
            );
        }
    }

    #[test]
    fn what_was_shown_is_counted_in_lines_and_the_line_under_way() {
        let mut shown = Shown::default();
        shown.took("ab");
        shown.took("c\nde");
        shown.took("f\n\nghé");
        assert_eq!(
            shown,
            Shown {
                lines: 3,
                partial_chars: 3
            }
        );
    }

    #[test]
    fn skipping_stops_at_a_line_end_and_carries_over() {
        let mut skip = 3;
        assert_eq!(skipped("ab", &mut skip), "");
        assert_eq!(skip, 1);
        assert_eq!(skipped("cdef\n", &mut skip), "def\n");
        assert_eq!(skip, 0);
        let mut skip = 5;
        assert_eq!(skipped("ab\ncd", &mut skip), "\ncd");
        assert_eq!(skip, 0);
    }

    // The rest of a chunk after what a follow showed before its
    // daemon went away: the next line's unshown part and every line after it.
    #[test]
    fn after_a_restart_the_follow_resumes_at_the_next_unshown_character() {
        let log = "one\ntwo\nthree\n";
        assert_eq!(after(log, 0, 0), Some(log));
        assert_eq!(after(log, 1, 0), Some("two\nthree\n"));
        assert_eq!(after(log, 1, 2), Some("o\nthree\n"));
        assert_eq!(after(log, 3, 0), None, "nothing unshown here");
        // A finished session's chunk ends with its unfinished last line.
        assert_eq!(after("one\npart", 1, 2), Some("rt"));
        assert_eq!(after("one\n", 2, 0), None);
    }
}
