//! Session-log record framing: bytes in, frames out, no IO.
//!
//! The session log is an append-only file of *frames*. This module only
//! encodes frames ([`encode_frame`]) and scans a byte buffer back into frames
//! ([`scan`]); reading, writing, fsync and truncation belong to the caller.
//!
//! # Frame format
//!
//! Every frame is a 16-byte little-endian header followed by the payload:
//!
//! | bytes    | field                                                        |
//! |----------|--------------------------------------------------------------|
//! | `0..4`   | magic `b"MSPL"` ([`FRAME_MAGIC`])                            |
//! | `4`      | format version, currently `1` ([`FORMAT_VERSION`])           |
//! | `5`      | record type, `1..=255`, opaque here; `0` is invalid          |
//! | `6..8`   | reserved, must be zero                                       |
//! | `8..12`  | payload length in bytes, `u32`, at most [`MAX_PAYLOAD_BYTES`] |
//! | `12..16` | CRC32C over header bytes `4..12` followed by the payload     |
//!
//! # Why this shape
//!
//! It is the tag + length + checksum framing used by write-ahead logs such as
//! okaywal: the length lets a reader step from frame to frame without parsing
//! payloads, the type tag lets higher layers dispatch without this module
//! knowing their schema, and the CRC detects both torn writes and bit rot.
//! The magic and the non-zero type make zero-filled (preallocated) space and
//! foreign bytes fail immediately instead of decoding as empty records.
//!
//! # The torn-tail rule
//!
//! A crash while appending can leave only a *prefix* of the last write on
//! disk. So when [`scan`] meets the first invalid frame it asks: does any
//! valid frame start anywhere after it?
//!
//! * **No** → [`Tail::Torn`]: the damage is confined to the end, exactly what
//!   an interrupted append looks like. The caller truncates the log to
//!   [`Scan::valid_len`] and carries on.
//! * **Yes** → [`Tail::Corrupt`]: invalid bytes sit *before* valid data, which
//!   no crash of an append-only writer can produce. Truncating would silently
//!   drop acknowledged records, so loading must fail, naming the offset of the
//!   first invalid frame ([`LoadError`]).
//!
//! Nothing is ever dropped silently: every byte is either in a returned
//! frame, in a torn tail the caller is told to truncate, or reported as
//! corruption. [`Scan::into_result`] maps these outcomes onto a `Result`.

mod frame;
mod scan;

pub use self::frame::{
    decode_frame, encode_frame, Frame, FrameError, FORMAT_VERSION, FRAME_MAGIC, HEADER_BYTES,
    MAX_PAYLOAD_BYTES,
};
pub use self::scan::{scan, scan_from, LoadError, Loaded, Scan, Tail, WholeFrames};

#[cfg(test)]
mod tests;
