//! Encoding and decoding of one frame: the 16-byte header and its payload.
//!
//! Everything here is a pure function over byte slices; see the parent
//! module for the on-disk layout and the reasoning behind it.

use std::fmt;
use std::ops::Range;

/// Magic bytes that open every frame (`b"MSPL"`): they let the reader reject
/// foreign or zero-filled data quickly and let the corruption search find
/// frame candidates at arbitrary byte offsets.
pub const FRAME_MAGIC: [u8; 4] = *b"MSPL";

/// Frame format version written into byte 4 of every header. A reader that
/// sees any other value refuses the frame instead of guessing at its layout.
pub const FORMAT_VERSION: u8 = 1;

/// Size of the fixed frame header in bytes (magic, version, type, reserved,
/// payload length, CRC32C).
pub const HEADER_BYTES: usize = 16;

/// Largest payload a frame may carry (64 MiB). A bound keeps a corrupted
/// length field from asking the reader to trust gigabytes of garbage, and
/// keeps single records at a size the session log is meant for.
pub const MAX_PAYLOAD_BYTES: u32 = 64 * 1024 * 1024;

/// Header byte holding the format version.
const VERSION_AT: usize = 4;
/// Header byte holding the record type.
const TYPE_AT: usize = 5;
/// Header bytes that are reserved and must be zero.
const RESERVED_AT: Range<usize> = 6..8;
/// Header bytes holding the little-endian payload length.
const LEN_AT: Range<usize> = 8..12;
/// Header bytes holding the little-endian CRC32C.
const CRC_AT: Range<usize> = 12..16;
/// Header bytes covered by the CRC (version, type, reserved, length); the
/// payload follows them in the CRC input.
const CRC_COVERED_AT: Range<usize> = 4..12;

/// One valid frame found in a buffer, borrowing its payload from that buffer.
///
/// The record type is opaque to this module: it is whatever the writer passed
/// to [`encode_frame`], so higher layers can dispatch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Byte offset of the frame's first header byte within the scanned buffer.
    pub offset: u64,
    /// Record type from header byte 5; always in `1..=255`.
    pub record_type: u8,
    /// The frame's payload, exactly as written.
    pub payload: &'a [u8],
}

impl Frame<'_> {
    /// Size of the whole encoded frame (header plus payload) in bytes, so
    /// callers can step over it without recomputing the layout.
    #[must_use]
    pub fn encoded_len_bytes(&self) -> u64 {
        HEADER_BYTES as u64 + self.payload.len() as u64
    }

    /// Byte offset just past this frame, i.e. where the next frame starts.
    #[must_use]
    pub fn end_offset(&self) -> u64 {
        self.offset + self.encoded_len_bytes()
    }
}

/// Why the bytes at some offset are not a valid frame.
///
/// Variants are listed in the order the decoder checks them, so the first
/// problem found is the one reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// Fewer than [`HEADER_BYTES`] bytes remain, so no header can be read.
    ShortHeader,
    /// The first four bytes are not [`FRAME_MAGIC`].
    BadMagic,
    /// The version byte is not [`FORMAT_VERSION`]; carries the value found.
    BadVersion(u8),
    /// The record type byte is 0, which is never written.
    BadType,
    /// Reserved header bytes 6..8 are not zero.
    ReservedNonZero,
    /// The declared payload length exceeds [`MAX_PAYLOAD_BYTES`]; carries the
    /// declared length.
    TooLarge(u32),
    /// The buffer ends before the declared payload does. `need` is the
    /// declared payload length in bytes, `have` is how many payload bytes are
    /// actually present after the header.
    ShortPayload {
        /// Payload bytes the header declares.
        need: u64,
        /// Payload bytes present in the buffer.
        have: u64,
    },
    /// The CRC32C does not match. `expected` is the value stored in the
    /// header, `actual` is the value computed over the bytes present.
    BadCrc {
        /// CRC32C stored in header bytes 12..16.
        expected: u32,
        /// CRC32C computed over header bytes 4..12 and the payload.
        actual: u32,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FrameError::ShortHeader => write!(
                f,
                "truncated frame header: fewer than {HEADER_BYTES} bytes remain"
            ),
            FrameError::BadMagic => write!(f, "bad frame magic: expected \"MSPL\""),
            FrameError::BadVersion(found) => write!(
                f,
                "unsupported frame format version {found} (expected {FORMAT_VERSION})"
            ),
            FrameError::BadType => write!(f, "invalid record type 0"),
            FrameError::ReservedNonZero => {
                write!(f, "reserved frame header bytes 6..8 are not zero")
            }
            FrameError::TooLarge(len_bytes) => write!(
                f,
                "frame payload length {len_bytes} bytes exceeds the maximum of \
                 {MAX_PAYLOAD_BYTES} bytes"
            ),
            FrameError::ShortPayload { need, have } => write!(
                f,
                "truncated frame payload: header declares {need} bytes but only \
                 {have} remain"
            ),
            FrameError::BadCrc { expected, actual } => write!(
                f,
                "frame CRC32C mismatch: header has {expected:#010x}, computed {actual:#010x}"
            ),
        }
    }
}

impl std::error::Error for FrameError {}

/// CRC32C over the covered header bytes (4..12) followed by the payload.
fn frame_crc(covered_header: &[u8], payload: &[u8]) -> u32 {
    debug_assert_eq!(covered_header.len(), CRC_COVERED_AT.len());
    crc32c::crc32c_append(crc32c::crc32c(covered_header), payload)
}

/// Encodes one frame: the 16-byte header followed by `payload`.
///
/// The caller appends the result to the log in a single write; a crash during
/// that write leaves a prefix of the frame, which [`crate::log::scan`]
/// recognises as a torn tail.
///
/// # Panics
///
/// Panics if `record_type` is 0 (reserved as invalid so a zero-filled region
/// can never look like a record) or if `payload` is longer than
/// [`MAX_PAYLOAD_BYTES`]. Both are caller bugs, not runtime conditions.
#[must_use]
pub fn encode_frame(record_type: u8, payload: &[u8]) -> Vec<u8> {
    assert!(record_type != 0, "record type 0 is invalid");
    assert!(
        payload.len() <= MAX_PAYLOAD_BYTES as usize,
        "payload of {} bytes exceeds MAX_PAYLOAD_BYTES",
        payload.len()
    );
    let payload_len_bytes =
        u32::try_from(payload.len()).expect("payload length bounded by MAX_PAYLOAD_BYTES");

    let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
    out.extend_from_slice(&FRAME_MAGIC);
    out.push(FORMAT_VERSION);
    out.push(record_type);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&payload_len_bytes.to_le_bytes());
    let crc = frame_crc(&out[CRC_COVERED_AT], payload);
    out.extend_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(out.len(), HEADER_BYTES);
    out.extend_from_slice(payload);
    debug_assert_eq!(out.len(), HEADER_BYTES + payload.len());
    out
}

/// Decodes the frame that starts at byte `offset` of `bytes`.
///
/// Checks run in the order of the [`FrameError`] variants and the first
/// failure is returned. Bytes after the frame are ignored, so this is also
/// how [`crate::log::scan`] probes arbitrary offsets for a valid frame.
///
/// # Errors
///
/// Returns the first [`FrameError`] found if the bytes at `offset` are not a
/// complete frame with a matching CRC.
///
/// # Panics
///
/// Panics if `offset > bytes.len()`; an offset outside the buffer is a caller
/// bug.
pub fn decode_frame(bytes: &[u8], offset: usize) -> Result<Frame<'_>, FrameError> {
    assert!(offset <= bytes.len(), "offset past end of buffer");
    let rest = &bytes[offset..];
    let Some(header) = rest.get(..HEADER_BYTES) else {
        return Err(FrameError::ShortHeader);
    };
    if header[..FRAME_MAGIC.len()] != FRAME_MAGIC {
        return Err(FrameError::BadMagic);
    }
    let version = header[VERSION_AT];
    if version != FORMAT_VERSION {
        return Err(FrameError::BadVersion(version));
    }
    let record_type = header[TYPE_AT];
    if record_type == 0 {
        return Err(FrameError::BadType);
    }
    if header[RESERVED_AT].iter().any(|&b| b != 0) {
        return Err(FrameError::ReservedNonZero);
    }
    let payload_len_bytes = read_u32_le(&header[LEN_AT]);
    if payload_len_bytes > MAX_PAYLOAD_BYTES {
        return Err(FrameError::TooLarge(payload_len_bytes));
    }
    let after_header = &rest[HEADER_BYTES..];
    let Some(payload) = after_header.get(..payload_len_bytes as usize) else {
        return Err(FrameError::ShortPayload {
            need: u64::from(payload_len_bytes),
            have: after_header.len() as u64,
        });
    };
    let expected = read_u32_le(&header[CRC_AT]);
    let actual = frame_crc(&header[CRC_COVERED_AT], payload);
    if expected != actual {
        return Err(FrameError::BadCrc { expected, actual });
    }
    Ok(Frame {
        offset: offset as u64,
        record_type,
        payload,
    })
}

/// Reads a little-endian u32 from exactly four bytes.
fn read_u32_le(bytes: &[u8]) -> u32 {
    let array: [u8; 4] = bytes.try_into().expect("caller passes exactly 4 bytes");
    u32::from_le_bytes(array)
}
