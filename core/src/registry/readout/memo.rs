//! What a read-out of a finished session's log showed, kept so the next read-out
//! of the same log from the same offset redacts nothing it already found
//! unchanged: the log's extents, each either shown as read or a block the
//! redactor changed (with the key state at its start). A later read-out from the
//! same offset sends the unchanged extents straight from the log file and
//! redacts the changed blocks again, alone, from the same key state: the same
//! blocks, so the same bytes as the first read-out.
//!
//! A finished session's log is whole and no longer written, but a memo is used
//! only while the log file is the one it was made of (device, inode, length and
//! modification time). The registry's output pipeline is fixed for its life, so
//! the redaction a memo records stays the one a read-out would do. The store keeps
//! the last [`KEPT`] memos, each of at most [`MAX_EXTENTS`] extents.

use std::collections::VecDeque;
use std::fs::File;
use std::ops::Range;
use std::sync::Arc;

use crate::lock_order::{Mutex, rank};

/// How many memos the store keeps (the most recently made or used).
const KEPT: usize = 8;

/// The most extents one memo holds (a log with a secret in every block of a few
/// GiB); a read-out that needs more records none.
pub(crate) const MAX_EXTENTS: usize = 1 << 16;

/// Which file a log was, when its memo was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl FileId {
    /// The identity of the open `file` now.
    pub(crate) fn of(file: &File) -> std::io::Result<FileId> {
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata()?;
        Ok(FileId {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        })
    }
}

/// One extent of the log, in log offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Extent {
    /// Shown as read.
    Same(Range<u64>),
    /// A block the redactor changed, and whether a private-key block was open at
    /// its start.
    Changed { block: Range<u64>, key_open: bool },
}

/// What a read-out from `from` showed, up to `reached`.
#[derive(Debug)]
pub(crate) struct Memo {
    file: FileId,
    from: u64,
    pub(crate) extents: Vec<Extent>,
    /// Where the read-out ended: the chunked route goes on from there.
    pub(crate) reached: u64,
    /// It stopped there (bytes that are not text, a line too long).
    pub(crate) stopped: bool,
}

/// A memo being made, extent by extent, as a read-out shows its batches.
#[derive(Debug)]
pub(crate) struct Recording {
    file: FileId,
    from: u64,
    extents: Vec<Extent>,
}

impl Recording {
    /// A memo of the read-out of the log `file` is, from `from`.
    pub(crate) fn new(file: FileId, from: u64) -> Recording {
        Recording {
            file,
            from,
            extents: Vec::new(),
        }
    }

    /// The file the memo is of.
    pub(crate) fn file(&self) -> FileId {
        self.file
    }

    /// Where the read-out started.
    pub(crate) fn from(&self) -> u64 {
        self.from
    }

    /// Adds what a batch at log offset `log_at` showed; `false` when the memo
    /// grew too long to keep (the caller drops it).
    pub(crate) fn add(
        &mut self,
        log_at: u64,
        shown: impl Iterator<Item = herd_hooks::Extent>,
    ) -> bool {
        let at = |range: Range<usize>| log_at + range.start as u64..log_at + range.end as u64;
        for extent in shown {
            match extent {
                herd_hooks::Extent::Same(range) => {
                    let range = at(range);
                    match self.extents.last_mut() {
                        Some(Extent::Same(last)) if last.end == range.start => last.end = range.end,
                        _ => self.extents.push(Extent::Same(range)),
                    }
                }
                herd_hooks::Extent::Changed { block, key_open } => {
                    self.extents.push(Extent::Changed {
                        block: at(block),
                        key_open,
                    });
                }
            }
        }
        self.extents.len() <= MAX_EXTENTS
    }

    /// The memo, the read-out having shown up to `reached` (stopped there when
    /// `stopped`).
    pub(crate) fn done(self, reached: u64, stopped: bool) -> Memo {
        Memo {
            file: self.file,
            from: self.from,
            extents: self.extents,
            reached,
            stopped,
        }
    }
}

/// The memos of the last read-outs, by session.
#[derive(Debug)]
pub(crate) struct Memos {
    kept: Mutex<VecDeque<(String, Arc<Memo>)>, { rank::READOUT_MEMOS }>,
}

impl Default for Memos {
    fn default() -> Memos {
        Memos {
            kept: Mutex::new(VecDeque::with_capacity(KEPT)),
        }
    }
}

impl Memos {
    /// The memo of session `id`'s read-out from `from`, when its log is still the
    /// file `file` is.
    pub(crate) fn get(&self, id: &str, from: u64, file: FileId) -> Option<Arc<Memo>> {
        let mut kept = self.kept.acquire();
        let at = kept
            .iter()
            .position(|(kept_id, memo)| kept_id == id && memo.from == from)?;
        let (kept_id, memo) = kept.remove(at)?;
        if memo.file != file {
            // The log changed since: the memo is of another file.
            return None;
        }
        kept.push_front((kept_id, Arc::clone(&memo)));
        Some(memo)
    }

    /// Keeps `memo` of session `id`'s log, in place of one from the same offset.
    pub(crate) fn put(&self, id: &str, memo: Memo) {
        let mut kept = self.kept.acquire();
        kept.retain(|(kept_id, old)| !(kept_id == id && old.from == memo.from));
        kept.truncate(KEPT - 1);
        kept.push_front((id.to_owned(), Arc::new(memo)));
    }
}
