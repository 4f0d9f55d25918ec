//! A read-out shown from a memo (`super::memo`): the extents shown as read go out
//! as ranges of the log file, unread; the changed blocks are read and redacted
//! again, each alone from the key state at its start, on every core at once.

use std::ops::Range;

use super::{Body, Extent, LogReadout, ReadoutBatch, Replayed};
use crate::error::Error;

impl LogReadout {
    /// [`LogReadout::next`] from the memo: the extents from `next_at` on, about
    /// `max_bytes` of the log.
    pub(super) fn next_replayed(
        &mut self,
        max_bytes: usize,
    ) -> Result<Option<ReadoutBatch>, Error> {
        let Some((memo, mut idx)) = self.replay.take() else {
            return Ok(None);
        };
        let log_at = self.next_at;
        let mut pieces: Vec<Replayed> = Vec::new();
        let mut changed: Vec<(usize, Range<u64>, bool)> = Vec::new();
        let mut covered = 0u64;
        while let Some(extent) = memo.extents.get(idx) {
            if covered >= max_bytes as u64 {
                break;
            }
            match extent {
                Extent::Same(range) => {
                    let start = self.next_at.max(range.start);
                    let end = range.end.min(start + (max_bytes as u64 - covered));
                    pieces.push(Replayed::File(start..end));
                    covered += end - start;
                    self.next_at = end;
                    if end == range.end {
                        idx += 1;
                    }
                }
                Extent::Changed { block, key_open } => {
                    changed.push((pieces.len(), block.clone(), *key_open));
                    pieces.push(Replayed::Shown(String::new()));
                    covered += block.end - block.start;
                    self.next_at = block.end;
                    idx += 1;
                }
            }
        }
        if pieces.is_empty() {
            // Shown to its end: the chunked route goes on from where it reached.
            self.next_at = memo.reached;
            self.stopped = memo.stopped;
            return Ok(None);
        }
        let shown = self.show_blocks(&changed)?;
        for ((at, block, _), text) in changed.iter().zip(shown) {
            match text {
                Some(text) => pieces[*at] = Replayed::Shown(text),
                None => {
                    // Not the text the memo was made of: the chunked route shows
                    // it from this block on.
                    pieces.truncate(*at);
                    self.next_at = block.start;
                    self.stopped = true;
                    return Ok((!pieces.is_empty()).then_some(ReadoutBatch {
                        body: Body::Replayed(pieces),
                        log_at,
                    }));
                }
            }
        }
        self.replay = Some((memo, idx));
        Ok(Some(ReadoutBatch {
            body: Body::Replayed(pieces),
            log_at,
        }))
    }

    /// The changed `blocks` read from the log and shown, in order, on up to
    /// `threads` threads; `None` for one that is not text.
    fn show_blocks(
        &self,
        blocks: &[(usize, Range<u64>, bool)],
    ) -> Result<Vec<Option<String>>, Error> {
        let show = |run: &[(usize, Range<u64>, bool)]| -> std::io::Result<Vec<Option<String>>> {
            let mut buf = Vec::new();
            run.iter()
                .map(|(_, block, key_open)| {
                    buf.resize(usize::try_from(block.end - block.start).unwrap_or(0), 0);
                    crate::output::read_fully(&self.file, &mut buf, block.start)?;
                    Ok(self
                        .hooks
                        .show_log_block(&self.command, &buf, *key_open)
                        .map(std::borrow::Cow::into_owned)
                        .filter(|_| buf.len() as u64 == block.end - block.start))
                })
                .collect()
        };
        let threads = self.threads.clamp(1, blocks.len().max(1));
        let shown: std::io::Result<Vec<Vec<Option<String>>>> = if threads <= 1 {
            show(blocks).map(|one| vec![one])
        } else {
            let per = blocks.len().div_ceil(threads);
            std::thread::scope(|scope| {
                let handles: Vec<_> = blocks
                    .chunks(per)
                    .map(|run| scope.spawn(move || show(run)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| match h.join() {
                        Ok(result) => result,
                        Err(payload) => std::panic::resume_unwind(payload),
                    })
                    .collect()
            })
        };
        shown
            .map(|runs| runs.into_iter().flatten().collect())
            .map_err(|e| self.io_err(e))
    }
}
