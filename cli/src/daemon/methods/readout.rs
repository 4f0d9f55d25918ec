//! The read-out at memory speed of a `logs.frames` stream (`crate::logframes`):
//! before `logs.dump` or `logs.follow` go on by their chunked route, the log from
//! the stream's start to its current end is read, redacted on every core
//! (`herd_core::LogReadout`) and written as binary frames, a producer on the
//! blocking pool reading ahead of the writer by at most [`AHEAD`] batches.
//! Blocks the redactor changed nothing in go out straight from the log file
//! (sendfile(2), no copy through the daemon); a finished session's log read out
//! again from the same offset is not read for them at all (the read-out's memo).

use herd_core::ReadoutPiece;
use tokio::sync::mpsc;

use super::State;
use super::wire::core_error;
use crate::daemon::connection::Outlet;
use crate::protocol::{INTERNAL_ERROR, RpcError};

/// How much of the log one batch reads (its whole-line blocks are then redacted
/// on every core at once).
const BATCH_BYTES: usize = 8 << 20;

/// How many redacted batches may wait for the writer: the bound on how far the
/// producer gets ahead of a slow client.
const AHEAD: usize = 2;

/// How much a followed log must have grown, once the read-out reaches the end it
/// started with, for the read-out to go on to the new end rather than hand over to
/// the chunked route (which reads one chunk at a time, on one core).
pub(super) const GROW_BYTES: u64 = 1 << 20;

/// Why a read-out did not hand over to the chunked route.
pub(super) enum Stop {
    /// The client has gone.
    Gone,
    /// The log could not be read: the stream's answer.
    Failed(RpcError),
}

/// Writes the log of `session` from `from_byte` as far as the read-out serves it
/// (`herd_core::Registry::log_readout`) into `outlet`'s frames; the offset where
/// the chunked route goes on. With `follow`, a log that grew by [`GROW_BYTES`]
/// meanwhile is read out on to its new end, again and again
/// (`herd_core::Registry::log_readout_grow`).
pub(super) async fn read_out(
    state: &State,
    session: &str,
    from_byte: u64,
    follow: bool,
    outlet: &mut Outlet<'_>,
) -> Result<u64, Stop> {
    let registry = state.registry.clone();
    let id = session.to_owned();
    let opened = tokio::task::spawn_blocking(move || registry.log_readout(&id, from_byte)).await;
    let mut readout = match opened {
        Ok(Ok(Some(readout))) => readout,
        Ok(Ok(None)) => return Ok(from_byte),
        Ok(Err(err)) => return Err(Stop::Failed(core_error(err))),
        Err(err) => return Err(Stop::Failed(failed(&err))),
    };
    // What the outlet holds (a spawn's `spawned` note and the answer that opens
    // its frames) goes out before the first batch is read.
    if outlet.flush().await.is_err() {
        return Err(Stop::Gone);
    }
    let log = readout.log_file();
    let (batches, mut shown) = mpsc::channel::<herd_core::ReadoutBatch>(AHEAD);
    let (spent, spares) = std::sync::mpsc::channel::<herd_core::ReadoutBatch>();
    let registry = state.registry.clone();
    let producer = tokio::task::spawn_blocking(move || {
        loop {
            while let Ok(spare) = spares.try_recv() {
                readout.give_back(spare);
            }
            match readout.next(BATCH_BYTES) {
                Ok(Some(blocks)) => {
                    if batches.blocking_send(blocks).is_err() {
                        return Ok(readout.next_byte());
                    }
                }
                Ok(None) => {
                    if !(follow && registry.log_readout_grow(&mut readout, GROW_BYTES)?) {
                        return Ok(readout.next_byte());
                    }
                }
                Err(err) => return Err(err),
            }
        }
    });
    while let Some(batch) = shown.recv().await {
        if let Some(end) = batch.file_end()
            && log.metadata().is_ok_and(|meta| meta.len() < end)
        {
            // The log was cut short since this batch was read: the chunked route
            // shows it from the batch's start as it is now (the producer ends at
            // its next batch, nobody taking it).
            tracing::info!(
                target: "herd::readout",
                session,
                at = batch.log_at(),
                "the log was cut short under a read-out batch: the chunked route shows it from here"
            );
            return Ok(batch.log_at());
        }
        for piece in batch.pieces() {
            let sent = match piece {
                // Shown as it is: sent from the log file itself.
                ReadoutPiece::File { at, len, text } => {
                    outlet.frame_from_file(&log, at, len, text).await
                }
                ReadoutPiece::Shown(bytes) => outlet.frame(bytes).await,
            };
            if sent.is_err() {
                producer.abort();
                return Err(Stop::Gone);
            }
        }
        spent.send(batch).ok();
    }
    match producer.await {
        Ok(Ok(next_byte)) => Ok(next_byte),
        Ok(Err(err)) => Err(Stop::Failed(core_error(err))),
        Err(err) => Err(Stop::Failed(failed(&err))),
    }
}

fn failed(err: &tokio::task::JoinError) -> RpcError {
    RpcError::new(INTERNAL_ERROR, format!("the log reader failed: {err}"))
}

/// Where a framed stream's read-out got to (`readout.rs`): the offset its chunked
/// route goes on from; `None` when the stream has ended (the client left, or the
/// error was answered). With `follow` (`logs.follow`) it reads a growing log on
/// as long as it grows fast.
pub(super) async fn read_out_first(
    state: &State,
    session: &str,
    from_byte: u64,
    follow: bool,
    outlet: &mut Outlet<'_>,
) -> Result<u64, Option<RpcError>> {
    if !outlet.is_framed() {
        return Ok(from_byte);
    }
    match read_out(state, session, from_byte, follow, outlet).await {
        Ok(reached) => Ok(reached),
        Err(Stop::Gone) => Err(None),
        Err(Stop::Failed(err)) => Err(Some(err)),
    }
}
