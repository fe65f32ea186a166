//! Walking a buffer of frames and classifying how it ends.
//!
//! See the parent module for the torn-tail rule this implements.

use std::fmt;

use super::frame::{decode_frame, Frame, FrameError, FRAME_MAGIC, HEADER_BYTES};

/// How a scanned buffer ends after its last valid frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// Every byte belongs to a valid frame (this includes an empty buffer).
    Clean,
    /// The bytes from `offset` on are not a valid frame and no valid frame
    /// starts anywhere after `offset`: the tail is what a crash mid-write
    /// leaves behind, and the caller should truncate the log to `offset`
    /// (equal to [`Scan::valid_len`]).
    Torn {
        /// Byte offset of the first invalid frame (equals `valid_len`).
        offset: u64,
        /// Why the bytes at `offset` are not a valid frame.
        reason: FrameError,
    },
    /// The frame at `offset` is invalid but a valid frame starts somewhere
    /// after it: acknowledged data was damaged, so loading must fail rather
    /// than drop the records that follow.
    Corrupt {
        /// Byte offset of the first invalid frame (equals `valid_len`).
        offset: u64,
        /// Why the bytes at `offset` are not a valid frame.
        reason: FrameError,
    },
}

/// Result of [`scan`]: the valid prefix of frames and how the buffer ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan<'a> {
    /// Every valid frame from offset 0 up to the first invalid one, in order.
    pub frames: Vec<Frame<'a>>,
    /// Byte offset just past the last valid frame (0 if there is none); the
    /// length the log should have after truncating a torn tail.
    pub valid_len: u64,
    /// How the buffer ends after `valid_len`.
    pub tail: Tail,
}

/// Successful load: `(frames, valid_len, torn_tail_truncated)`.
///
/// `valid_len` is the byte length of the valid prefix; `torn_tail_truncated`
/// is true when bytes after `valid_len` were a torn tail that the caller must
/// cut off (e.g. `set_len(valid_len)`) before appending again.
pub type Loaded<'a> = (Vec<Frame<'a>>, u64, bool);

/// Loading failed because the log is corrupt: an invalid frame sits before
/// valid data, so truncating would silently drop acknowledged records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadError {
    /// Byte offset of the first invalid frame.
    pub offset: u64,
    /// Why the bytes at `offset` are not a valid frame.
    pub reason: FrameError,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "session log corrupt at byte offset {}: {} (valid frames follow, \
             refusing to truncate)",
            self.offset, self.reason
        )
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.reason)
    }
}

impl<'a> Scan<'a> {
    /// Turns the scan into what a loader acts on.
    ///
    /// * [`Tail::Clean`] → `Ok((frames, valid_len, false))`.
    /// * [`Tail::Torn`] → `Ok((frames, valid_len, true))`: the caller must
    ///   truncate the log to `valid_len` before appending.
    /// * [`Tail::Corrupt`] → `Err(LoadError)` naming the offset of the first
    ///   invalid frame; nothing is dropped silently.
    ///
    /// # Errors
    ///
    /// Returns [`LoadError`] exactly when the tail is [`Tail::Corrupt`].
    pub fn into_result(self) -> Result<Loaded<'a>, LoadError> {
        match self.tail {
            Tail::Clean => Ok((self.frames, self.valid_len, false)),
            Tail::Torn { .. } => Ok((self.frames, self.valid_len, true)),
            Tail::Corrupt { offset, reason } => Err(LoadError { offset, reason }),
        }
    }
}

/// Scans `bytes` from offset 0, returning every valid frame up to the first
/// invalid one and classifying the rest as clean, torn or corrupt.
///
/// After the first invalid frame at offset `o`, every later byte offset is
/// probed for a frame that decodes fully with a good CRC. None found means a
/// torn tail ([`Tail::Torn`]); one found means corruption ([`Tail::Corrupt`]).
/// The probe only fully decodes offsets where [`FRAME_MAGIC`] occurs, so its
/// cost is one pass over the tail plus one CRC per magic candidate.
///
/// A payload that itself embeds a complete encoded frame makes a torn last
/// frame look corrupt; that errs on the side of failing loudly.
#[must_use]
pub fn scan(bytes: &[u8]) -> Scan<'_> {
    scan_from(bytes, 0)
}

/// As [`scan`], starting at `start`, a frame boundary of `bytes` whose
/// prefix is known to be whole valid frames (a load that already folded
/// that prefix): frame offsets and `valid_len` stay offsets into `bytes`.
/// Framing does not depend on what precedes a frame, so the result is
/// [`scan`]'s with the prefix's frames left out.
#[must_use]
pub fn scan_from(bytes: &[u8], start: usize) -> Scan<'_> {
    assert!(start <= bytes.len(), "scan start past the end of the log");
    let mut frames = Vec::new();
    let mut pos = start;
    while pos < bytes.len() {
        match decode_frame(bytes, pos) {
            Ok(frame) => {
                pos += HEADER_BYTES + frame.payload.len();
                debug_assert!(pos <= bytes.len());
                frames.push(frame);
            }
            Err(reason) => {
                let offset = pos as u64;
                let tail = match find_valid_frame_after(bytes, pos) {
                    Some(later) => {
                        debug_assert!(later > pos);
                        Tail::Corrupt { offset, reason }
                    }
                    None => Tail::Torn { offset, reason },
                };
                return Scan {
                    frames,
                    valid_len: offset,
                    tail,
                };
            }
        }
    }
    debug_assert_eq!(pos, bytes.len());
    Scan {
        frames,
        valid_len: pos as u64,
        tail: Tail::Clean,
    }
}

/// Returns the first offset strictly after `invalid_at` where a complete,
/// CRC-valid frame starts, if any.
fn find_valid_frame_after(bytes: &[u8], invalid_at: usize) -> Option<usize> {
    let mut start = invalid_at + 1;
    while start + HEADER_BYTES <= bytes.len() {
        let relative = bytes[start..]
            .windows(FRAME_MAGIC.len())
            .position(|window| window == FRAME_MAGIC)?;
        let candidate = start + relative;
        if decode_frame(bytes, candidate).is_ok() {
            return Some(candidate);
        }
        start = candidate + 1;
    }
    None
}

/// Checks, chunk by chunk, that a byte range is a run of whole valid frames:
/// what a compaction may move into a session's archive.
///
/// The range a compaction archives was written whole by the holder and
/// synced, so anything but whole valid frames there is damage (bit rot)
/// that happened after the write. Copying it unchecked would move the damage
/// out of the log, where the next load reports it (`logCorrupt`), into the
/// archive, where no load looks, and the damaged records would be replaced
/// by a snapshot as if nothing had happened. A compaction runs its bytes
/// through this and fails instead, leaving the log as it was.
#[derive(Debug, Default)]
pub struct WholeFrames {
    /// Bytes of a frame that began in an earlier chunk.
    carry: Vec<u8>,
    /// Offset in the range of `carry`'s first byte.
    at: u64,
}

impl WholeFrames {
    /// A checker for a range starting at offset 0.
    pub fn new() -> WholeFrames {
        WholeFrames::default()
    }

    /// The next chunk of the range.
    ///
    /// # Errors
    ///
    /// A frame in the range so far is invalid: its offset in the range and
    /// why.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), LoadError> {
        self.carry.extend_from_slice(chunk);
        let mut pos = 0;
        loop {
            match decode_frame(&self.carry, pos) {
                Ok(f) => pos = f.end_offset() as usize,
                // Short: the rest may come with the next chunk.
                Err(FrameError::ShortHeader | FrameError::ShortPayload { .. }) => break,
                Err(reason) => {
                    return Err(LoadError {
                        offset: self.at + pos as u64,
                        reason,
                    })
                }
            }
        }
        self.carry.drain(..pos);
        self.at += pos as u64;
        Ok(())
    }

    /// The range is over.
    ///
    /// # Errors
    ///
    /// It ends inside a frame.
    pub fn finish(self) -> Result<(), LoadError> {
        match decode_frame(&self.carry, 0) {
            Err(reason) if !self.carry.is_empty() => Err(LoadError {
                offset: self.at,
                reason,
            }),
            _ => Ok(()),
        }
    }

    /// Checks a whole range at once.
    ///
    /// # Errors
    ///
    /// As [`WholeFrames::feed`] and [`WholeFrames::finish`].
    pub fn check(range: &[u8]) -> Result<(), LoadError> {
        let mut w = WholeFrames::new();
        w.feed(range)?;
        w.finish()
    }
}
