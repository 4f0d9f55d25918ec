//! The wire of capability `logs.frames`: a log stream's output as length-prefixed
//! binary frames, every addition to the protocol it makes in this one place.
//!
//! A client whose daemon announces `logs.frames` in `hello` asks `logs.dump` or
//! `logs.follow` with `"frames": true`. For a session of this host the daemon:
//! 1. answers the request at once with `{"frames": 1}` (an unknown session, or bad
//!    params, is an ordinary error answer instead, and nothing follows);
//! 2. writes the output as frames: a 4-byte little-endian length N (1 to
//!    [`MAX_FRAME_BYTES`]), then N bytes of redacted output, unescaped; a frame may
//!    end inside a character (the bytes are the log's text, cut anywhere);
//! 3. ends the frames with a zero length, then writes one JSON-RPC response line
//!    with the request's id again: the stream's end (`{"next_byte"}`, with `result`
//!    for `logs.follow` with `result`), or its error.
//!
//! A far host's session (`NAME:proc_…`) is relayed as the far herd writes it: its
//! stream answers without `frames`, in `log`/`log.bytes` notes, and the client
//! reads it as such. An older daemon refuses the unknown field, which the client
//! never sends it (it is not announced); an older client never asks, and gets the
//! JSON notes as before.

mod stdout;

pub(crate) use stdout::{StdoutSink, move_frame};

/// The capability, announced in `hello`.
pub(crate) const CAPABILITY: &str = "logs.frames";

/// The request param that asks for frames.
pub(crate) const PARAM: &str = "frames";

/// The longest frame either side writes or reads.
pub(crate) const MAX_FRAME_BYTES: usize = 16 << 20;

/// The header of a frame of `len` bytes (0: the end of the frames).
pub(crate) fn header(len: usize) -> [u8; 4] {
    u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes()
}

/// The length a frame header gives.
pub(crate) fn length(header: [u8; 4]) -> usize {
    u32::from_le_bytes(header) as usize
}

/// Whether the first answer of a stream says frames follow it.
pub(crate) fn opens_frames(result: &serde_json::Value) -> bool {
    result.get(PARAM).is_some_and(|v| v == 1)
}

#[cfg(test)]
mod tests {
    use super::{header, length};

    #[test]
    fn a_header_gives_back_its_length() {
        for len in [0, 1, 255, 65_536, super::MAX_FRAME_BYTES] {
            assert_eq!(length(header(len)), len);
        }
        assert_eq!(header(1), [1, 0, 0, 0]);
    }
}
