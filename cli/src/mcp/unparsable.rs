//! A line of stdin that is not JSON is answered with a JSON-RPC parse error
//! (−32700, id null), as JSON-RPC 2.0 asks, instead of being dropped in silence
//! (rmcp's transport skips it). [`Screened`] wraps stdin: it passes on whole lines
//! that parse as JSON (and blank ones), holds back the others and counts them on a
//! channel, and the transport ([`super::delivery::Acking`]) answers each count. It
//! also renames the requests of the 2025-11-25 tasks revision (`tasks_2025.rs`).

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::mpsc::UnboundedSender;

/// The longest line screened; a longer one is passed on as is (rmcp refuses it).
const MAX_SCREENED_LINE: usize = 16 << 20;

/// Stdin, less the lines that are not JSON.
#[derive(Debug)]
pub(super) struct Screened<R> {
    inner: R,
    /// Bytes read, not yet a whole line.
    partial: Vec<u8>,
    /// Whole lines passed on, not yet read out.
    ready: Vec<u8>,
    refused: UnboundedSender<String>,
    /// The handshake's era, for the 2025-11-25 tasks requests (`tasks_2025.rs`).
    era: super::tasks_2025::Era,
}

impl<R> Screened<R> {
    pub(super) fn new(
        inner: R,
        refused: UnboundedSender<String>,
        era: super::tasks_2025::Era,
    ) -> Screened<R> {
        Screened {
            inner,
            partial: Vec::new(),
            ready: Vec::new(),
            refused,
            era,
        }
    }

    /// Moves the whole lines of `partial` to `ready`, or to `refused`.
    fn screen(&mut self) {
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let body = line.trim_ascii();
            match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
                Err(err) if !body.is_empty() && (err.is_syntax() || err.is_eof()) => {
                    let _ = self.refused.send(err.to_string());
                }
                _ => match super::tasks_2025::screen_line(body, &self.era) {
                    Some(renamed) => self.ready.extend_from_slice(&renamed),
                    None => self.ready.extend_from_slice(&line),
                },
            }
        }
        if self.partial.len() > MAX_SCREENED_LINE {
            self.ready.append(&mut self.partial);
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Screened<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        loop {
            if !self.ready.is_empty() {
                let n = self.ready.len().min(buf.remaining());
                buf.put_slice(&self.ready[..n]);
                self.ready.drain(..n);
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 8192];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut self.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) if read.filled().is_empty() => {
                    // End of input: what is left is passed on as it is.
                    let rest = std::mem::take(&mut self.partial);
                    if rest.is_empty() {
                        return Poll::Ready(Ok(()));
                    }
                    self.ready = rest;
                }
                Poll::Ready(Ok(())) => {
                    let filled = read.filled().to_vec();
                    self.partial.extend_from_slice(&filled);
                    self.screen();
                }
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn lines_that_are_not_json_are_held_back_and_counted() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let input: &[u8] = b"{\"a\":1}\nnot json\n\n{\"b\":\n[1]\n";
        let mut screened = Screened::new(input, tx, super::super::tasks_2025::Era::default());
        let mut out = String::new();
        screened.read_to_string(&mut out).await.expect("reads");
        assert_eq!(out, "{\"a\":1}\n\n[1]\n");
        let mut refused = 0;
        while rx.try_recv().is_ok() {
            refused += 1;
        }
        assert_eq!(refused, 2);
    }
}
