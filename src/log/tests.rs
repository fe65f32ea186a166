//! Tests for frame encoding and log scanning.

use super::*;
use proptest::prelude::*;

/// Encodes `records` back to back; returns the log and the frame start
/// offsets followed by the final length (so `bounds.len() == records.len() + 1`).
fn log_of(records: &[(u8, Vec<u8>)]) -> (Vec<u8>, Vec<u64>) {
    let mut log = Vec::new();
    let mut bounds = vec![0u64];
    for (record_type, payload) in records {
        log.extend_from_slice(&encode_frame(*record_type, payload));
        bounds.push(log.len() as u64);
    }
    (log, bounds)
}

/// Three frames with distinct types and non-empty payloads that cannot
/// contain an embedded frame.
fn three_records() -> Vec<(u8, Vec<u8>)> {
    vec![
        (1, b"first record".to_vec()),
        (7, vec![0xAB; 40]),
        (255, b"third".to_vec()),
    ]
}

/// Builds a frame with arbitrary header fields but a CRC that is correct for
/// them, so decoding fails on the field under test and not on the CRC.
fn raw_frame(
    version: u8,
    record_type: u8,
    reserved: [u8; 2],
    len_field: u32,
    payload: &[u8],
) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&FRAME_MAGIC);
    out.push(version);
    out.push(record_type);
    out.extend_from_slice(&reserved);
    out.extend_from_slice(&len_field.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[4..12]), payload);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Asserts `scanned` ends torn at `offset` for `reason`.
fn assert_torn(scanned: &Scan<'_>, offset: u64, reason: FrameError) {
    assert_eq!(scanned.tail, Tail::Torn { offset, reason });
    assert_eq!(scanned.valid_len, offset);
}

/// A valid frame appended after `bad` so that `bad` becomes corruption.
fn followed_by_valid(bad: Vec<u8>) -> Vec<u8> {
    let mut log = bad;
    log.extend_from_slice(&encode_frame(3, b"after"));
    log
}

#[test]
fn empty_input_is_clean() {
    let scanned = scan(&[]);
    assert!(scanned.frames.is_empty());
    assert_eq!(scanned.valid_len, 0);
    assert_eq!(scanned.tail, Tail::Clean);
}

#[test]
fn header_layout_matches_spec() {
    let frame = encode_frame(9, b"abc");
    assert_eq!(&frame[0..4], b"MSPL");
    assert_eq!(frame[4], 1);
    assert_eq!(frame[5], 9);
    assert_eq!(&frame[6..8], &[0, 0]);
    assert_eq!(&frame[8..12], &3u32.to_le_bytes());
    let mut crc_input = frame[4..12].to_vec();
    crc_input.extend_from_slice(b"abc");
    assert_eq!(&frame[12..16], &crc32c::crc32c(&crc_input).to_le_bytes());
    assert_eq!(&frame[16..], b"abc");
}

#[test]
fn round_trip_many_frames() {
    let records: Vec<(u8, Vec<u8>)> = (0..500u32)
        .map(|i| {
            let record_type = u8::try_from(i % 255).unwrap() + 1;
            let payload: Vec<u8> = (0..(i * 7) % 300).map(|j| (i ^ j) as u8).collect();
            (record_type, payload)
        })
        .collect();
    let (log, bounds) = log_of(&records);
    let scanned = scan(&log);
    assert_eq!(scanned.tail, Tail::Clean);
    assert_eq!(scanned.valid_len, log.len() as u64);
    assert_eq!(scanned.frames.len(), records.len());
    for ((frame, (record_type, payload)), offset) in
        scanned.frames.iter().zip(&records).zip(&bounds)
    {
        assert_eq!(frame.offset, *offset);
        assert_eq!(frame.record_type, *record_type);
        assert_eq!(frame.payload, payload.as_slice());
        assert_eq!(frame.end_offset(), frame.offset + frame.encoded_len_bytes());
    }
}

#[test]
fn empty_payload_round_trips() {
    let log = encode_frame(42, &[]);
    assert_eq!(log.len(), HEADER_BYTES);
    let scanned = scan(&log);
    assert_eq!(scanned.tail, Tail::Clean);
    assert_eq!(scanned.frames.len(), 1);
    assert_eq!(scanned.frames[0].record_type, 42);
    assert!(scanned.frames[0].payload.is_empty());
}

#[test]
fn every_truncation_point_of_three_frames_is_torn_or_clean() {
    let records = three_records();
    let (log, bounds) = log_of(&records);
    for cut in 0..=log.len() {
        let scanned = scan(&log[..cut]);
        let cut_u64 = cut as u64;
        let whole = bounds.iter().rposition(|&b| b <= cut_u64).unwrap();
        let boundary = bounds[whole];
        assert_eq!(scanned.frames.len(), whole, "cut {cut}");
        assert_eq!(scanned.valid_len, boundary, "cut {cut}");
        if boundary == cut_u64 {
            assert_eq!(scanned.tail, Tail::Clean, "cut {cut}");
            continue;
        }
        let partial_bytes = cut_u64 - boundary;
        let expected_reason = if partial_bytes < HEADER_BYTES as u64 {
            FrameError::ShortHeader
        } else {
            FrameError::ShortPayload {
                need: records[whole].1.len() as u64,
                have: partial_bytes - HEADER_BYTES as u64,
            }
        };
        assert_torn(&scanned, boundary, expected_reason);
    }
}

#[test]
fn flipped_bit_in_last_frame_is_torn_bad_crc() {
    let (mut log, bounds) = log_of(&three_records());
    let last_payload_at = bounds[2] as usize + HEADER_BYTES + 2;
    log[last_payload_at] ^= 0x10;
    let scanned = scan(&log);
    assert_eq!(scanned.frames.len(), 2);
    assert!(matches!(
        scanned.tail,
        Tail::Torn { offset, reason: FrameError::BadCrc { .. } } if offset == bounds[2]
    ));
    assert_eq!(scanned.valid_len, bounds[2]);
}

#[test]
fn flipped_bit_in_first_of_three_frames_is_corrupt_at_zero() {
    let (mut log, _) = log_of(&three_records());
    log[HEADER_BYTES + 3] ^= 0x01;
    let scanned = scan(&log);
    assert!(scanned.frames.is_empty());
    assert_eq!(scanned.valid_len, 0);
    assert!(matches!(
        scanned.tail,
        Tail::Corrupt {
            offset: 0,
            reason: FrameError::BadCrc { .. }
        }
    ));
}

#[test]
fn corrupted_length_field_before_valid_data_is_corrupt() {
    // A damaged length makes the reader look for the next frame at the wrong
    // place; the search must still find the real second frame.
    let (mut log, bounds) = log_of(&three_records());
    log[8] ^= 0x04;
    let scanned = scan(&log);
    assert!(scanned.frames.is_empty());
    assert!(matches!(scanned.tail, Tail::Corrupt { offset: 0, .. }));
    let (mut log, _) = log_of(&three_records());
    log[bounds[1] as usize + 8] = 0xFF; // second frame now claims a huge payload
    let scanned = scan(&log);
    assert_eq!(scanned.frames.len(), 1);
    assert!(matches!(scanned.tail, Tail::Corrupt { offset, .. } if offset == bounds[1]));
}

#[test]
fn garbage_after_valid_frames_is_torn() {
    let (mut log, bounds) = log_of(&three_records());
    log.extend_from_slice(b"this is definitely not a frame header at all");
    let scanned = scan(&log);
    assert_eq!(scanned.frames.len(), 3);
    assert_torn(&scanned, bounds[3], FrameError::BadMagic);
}

#[test]
fn zero_filled_tail_is_torn() {
    let (mut log, bounds) = log_of(&three_records());
    log.resize(log.len() + 4096, 0);
    let scanned = scan(&log);
    assert_eq!(scanned.frames.len(), 3);
    assert_torn(&scanned, bounds[3], FrameError::BadMagic);
}

#[test]
fn error_short_header() {
    let scanned = scan(b"MSPL\x01");
    assert!(scanned.frames.is_empty());
    assert_torn(&scanned, 0, FrameError::ShortHeader);
}

#[test]
fn error_bad_magic() {
    let mut frame = encode_frame(1, b"x");
    frame[0] = b'X';
    assert_eq!(decode_frame(&frame, 0), Err(FrameError::BadMagic));
    let log = followed_by_valid(frame);
    let scanned = scan(&log);
    assert_eq!(
        scanned.tail,
        Tail::Corrupt {
            offset: 0,
            reason: FrameError::BadMagic
        }
    );
}

#[test]
fn error_bad_version() {
    let frame = raw_frame(2, 1, [0, 0], 1, b"x");
    assert_torn(&scan(&frame), 0, FrameError::BadVersion(2));
}

#[test]
fn error_bad_type() {
    let frame = raw_frame(FORMAT_VERSION, 0, [0, 0], 1, b"x");
    assert_torn(&scan(&frame), 0, FrameError::BadType);
    let log = followed_by_valid(frame);
    let scanned = scan(&log);
    assert_eq!(
        scanned.tail,
        Tail::Corrupt {
            offset: 0,
            reason: FrameError::BadType
        }
    );
}

#[test]
fn error_reserved_non_zero() {
    let frame = raw_frame(FORMAT_VERSION, 1, [0, 1], 1, b"x");
    assert_torn(&scan(&frame), 0, FrameError::ReservedNonZero);
}

#[test]
fn error_too_large() {
    let too_large = MAX_PAYLOAD_BYTES + 1;
    let frame = raw_frame(FORMAT_VERSION, 1, [0, 0], too_large, b"");
    assert_torn(&scan(&frame), 0, FrameError::TooLarge(too_large));
}

#[test]
fn error_short_payload() {
    let frame = encode_frame(1, b"0123456789");
    assert_torn(
        &scan(&frame[..HEADER_BYTES + 4]),
        0,
        FrameError::ShortPayload { need: 10, have: 4 },
    );
}

#[test]
fn error_bad_crc() {
    let mut frame = encode_frame(1, b"payload");
    let stored = u32::from_le_bytes(frame[12..16].try_into().unwrap());
    frame[12] ^= 0xFF;
    let scanned = scan(&frame);
    assert_torn(
        &scanned,
        0,
        FrameError::BadCrc {
            expected: stored ^ 0xFF,
            actual: stored,
        },
    );
}

#[test]
fn frame_error_display_is_distinct_and_descriptive() {
    let errors = [
        FrameError::ShortHeader,
        FrameError::BadMagic,
        FrameError::BadVersion(9),
        FrameError::BadType,
        FrameError::ReservedNonZero,
        FrameError::TooLarge(MAX_PAYLOAD_BYTES + 1),
        FrameError::ShortPayload { need: 10, have: 4 },
        FrameError::BadCrc {
            expected: 1,
            actual: 2,
        },
    ];
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    for (i, message) in messages.iter().enumerate() {
        assert!(!message.is_empty());
        assert!(messages[i + 1..].iter().all(|other| other != message));
    }
    assert!(messages[2].contains('9'));
    assert!(messages[6].contains("10") && messages[6].contains('4'));
    assert!(messages[7].contains("0x00000001") && messages[7].contains("0x00000002"));
}

#[test]
fn into_result_clean_is_ok_without_truncation() {
    let (log, bounds) = log_of(&three_records());
    let (frames, valid_len, truncated) = scan(&log).into_result().unwrap();
    assert_eq!(frames.len(), 3);
    assert_eq!(valid_len, bounds[3]);
    assert!(!truncated);
}

#[test]
fn into_result_torn_is_ok_with_truncation() {
    let (log, bounds) = log_of(&three_records());
    let (frames, valid_len, truncated) = scan(&log[..log.len() - 1]).into_result().unwrap();
    assert_eq!(frames.len(), 2);
    assert_eq!(valid_len, bounds[2]);
    assert!(truncated);
}

#[test]
fn into_result_corrupt_is_error_naming_offset() {
    let (mut log, bounds) = log_of(&three_records());
    log[bounds[1] as usize + HEADER_BYTES] ^= 0x80;
    let err = scan(&log).into_result().unwrap_err();
    assert_eq!(err.offset, bounds[1]);
    assert!(matches!(err.reason, FrameError::BadCrc { .. }));
    let message = err.to_string();
    assert!(
        message.contains(&format!("offset {}", bounds[1])),
        "{message}"
    );
    let source = std::error::Error::source(&err).expect("reason is the source");
    assert_eq!(source.to_string(), err.reason.to_string());
}

#[test]
#[should_panic(expected = "record type 0 is invalid")]
fn encode_rejects_type_zero() {
    let _ = encode_frame(0, b"x");
}

#[test]
#[should_panic(expected = "exceeds MAX_PAYLOAD_BYTES")]
fn encode_rejects_oversized_payload() {
    let payload = vec![0u8; MAX_PAYLOAD_BYTES as usize + 1];
    let _ = encode_frame(1, &payload);
}

/// Random record lists: types in `1..=255`, small payloads.
fn records_strategy(min_frames: usize) -> impl Strategy<Value = Vec<(u8, Vec<u8>)>> {
    prop::collection::vec(
        (1u8..=255, prop::collection::vec(any::<u8>(), 0..64)),
        min_frames..10,
    )
}

proptest! {
    #[test]
    fn prop_prefix_scan_returns_exactly_whole_frames(
        records in records_strategy(0),
        cut_seed in any::<prop::sample::Index>(),
    ) {
        let (log, bounds) = log_of(&records);
        let cut = cut_seed.index(log.len() + 1);
        let scanned = scan(&log[..cut]);
        let whole = bounds.iter().rposition(|&b| b <= cut as u64).unwrap();
        prop_assert_eq!(scanned.frames.len(), whole);
        prop_assert_eq!(scanned.valid_len, bounds[whole]);
        for (frame, (record_type, payload)) in scanned.frames.iter().zip(&records) {
            prop_assert_eq!(frame.record_type, *record_type);
            prop_assert_eq!(frame.payload, payload.as_slice());
        }
        if bounds[whole] == cut as u64 {
            prop_assert_eq!(scanned.tail, Tail::Clean);
        } else {
            let is_torn_at_boundary =
                matches!(scanned.tail, Tail::Torn { offset, .. } if offset == bounds[whole]);
            prop_assert!(is_torn_at_boundary, "tail {:?}", scanned.tail);
        }
    }

    #[test]
    fn prop_flipped_byte_in_non_last_frame_is_corrupt(
        records in records_strategy(2),
        frame_seed in any::<prop::sample::Index>(),
        byte_seed in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let (mut log, bounds) = log_of(&records);
        let victim = frame_seed.index(records.len() - 1);
        let victim_start = bounds[victim];
        let victim_len_bytes = (bounds[victim + 1] - victim_start) as usize;
        let at = victim_start as usize + byte_seed.index(victim_len_bytes);
        log[at] ^= flip;
        let scanned = scan(&log);
        prop_assert_eq!(scanned.frames.len(), victim);
        prop_assert_eq!(scanned.valid_len, victim_start);
        let is_corrupt_at_victim =
            matches!(scanned.tail, Tail::Corrupt { offset, .. } if offset == victim_start);
        prop_assert!(is_corrupt_at_victim, "tail {:?}", scanned.tail);
        prop_assert!(scanned.into_result().is_err());
    }
    /// The chunked check accepts exactly the ranges of whole valid frames,
    /// wherever the chunks cut them, and names the first damaged frame.
    #[test]
    fn prop_whole_frames_accepts_exactly_whole_valid_runs(
        records in records_strategy(1),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        damage in prop::option::of((any::<prop::sample::Index>(), 1u8..=255)),
        shorten in 0usize..3,
    ) {
        let (mut log, bounds) = log_of(&records);
        if let Some((at, flip)) = damage {
            let at = at.index(log.len());
            log[at] ^= flip;
        }
        let end = log.len() - shorten.min(log.len());
        let range = &log[..end];
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(end + 1)).collect();
        points.sort_unstable();
        let mut w = WholeFrames::new();
        let mut prev = 0;
        let mut fed = Ok(());
        for p in points.into_iter().chain([end]) {
            fed = fed.and_then(|()| w.feed(&range[prev..p]));
            prev = p;
        }
        let chunked = fed.and_then(|()| w.finish());
        prop_assert_eq!(&chunked, &WholeFrames::check(range));
        let whole = scan(range);
        let expected_ok = whole.tail == Tail::Clean;
        prop_assert_eq!(chunked.is_ok(), expected_ok, "{:?} / {:?}", chunked, whole.tail);
        if let Err(e) = chunked {
            // The first frame that is not whole and valid.
            prop_assert_eq!(e.offset, whole.valid_len);
            prop_assert!(bounds.contains(&e.offset));
        }
    }
}
