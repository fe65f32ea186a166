//! Line framing: one JSON-RPC object per `\n`-terminated line.
//!
//! A trailing `\r` is tolerated and stripped. A line longer than the frame
//! limit is never buffered whole: the splitter reports it once as
//! [`Line::TooLarge`] and skips to the next newline, so the connection stays
//! usable (PROTOCOL.md section 1).

/// Default frame limit: 10 MiB.
pub const DEFAULT_FRAME_LIMIT_BYTES: usize = 10 * 1024 * 1024;

/// One framing outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A complete line, without its `\n` and without a trailing `\r`.
    Frame(Vec<u8>),
    /// A line longer than the limit; its bytes were discarded.
    TooLarge,
}

/// Splits a byte stream into lines, enforcing the frame limit.
#[derive(Debug)]
pub struct LineSplitter {
    buf: Vec<u8>,
    limit_bytes: usize,
    skipping: bool,
}

impl LineSplitter {
    /// A splitter that rejects lines longer than `limit_bytes`.
    pub fn new(limit_bytes: usize) -> Self {
        assert!(limit_bytes > 0);
        LineSplitter {
            buf: Vec::new(),
            limit_bytes,
            skipping: false,
        }
    }

    /// Feeds bytes; appends every completed line to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<Line>) {
        while !bytes.is_empty() {
            match find_newline(bytes) {
                Some(nl) => {
                    let (head, rest) = bytes.split_at(nl);
                    bytes = &rest[1..];
                    if self.skipping {
                        self.skipping = false;
                        self.buf.clear();
                        continue;
                    }
                    self.buf.extend_from_slice(head);
                    let mut line = std::mem::take(&mut self.buf);
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    if line.len() > self.limit_bytes {
                        out.push(Line::TooLarge);
                    } else {
                        out.push(Line::Frame(line));
                    }
                }
                None => {
                    if !self.skipping {
                        self.buf.extend_from_slice(bytes);
                        // One byte of slack for a trailing '\r'.
                        if self.buf.len() > self.limit_bytes + 1 {
                            self.buf.clear();
                            self.skipping = true;
                            out.push(Line::TooLarge);
                        }
                    }
                    bytes = &[];
                }
            }
        }
    }

    /// Bytes of an unterminated line still buffered (a client that
    /// disconnects mid-frame leaves these; they are discarded, never parsed).
    pub fn pending_bytes(&self) -> usize {
        self.buf.len()
    }
}

/// The index of the first `\n` in `bytes`, eight bytes at a time (the
/// byte-by-byte search was most of what splitting cost: every line the
/// simulator's hosts and clients read goes through here, issue 10).
fn find_newline(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const NL: u64 = u64::from_ne_bytes([b'\n'; 8]);
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for w in &mut words {
        let x = u64::from_ne_bytes(w.try_into().expect("8 bytes")) ^ NL;
        // Some byte of `x` is zero (a '\n' in `w`): the classic test, exact
        // as a yes/no; the position is then found byte by byte.
        if x.wrapping_sub(ONES) & !x & HIGHS != 0 {
            return w.iter().position(|b| *b == b'\n').map(|i| at + i);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|b| *b == b'\n')
        .map(|i| at + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(limit: usize, chunks: &[&[u8]]) -> Vec<Line> {
        let mut s = LineSplitter::new(limit);
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c, &mut out);
        }
        out
    }

    #[test]
    fn find_newline_is_position() {
        for len in 0..40 {
            for nl in (0..len).map(Some).chain([None]) {
                for fill in [b'a', 0x8a, 0x0b, 0x09, 0xff] {
                    let mut v = vec![fill; len];
                    if let Some(i) = nl {
                        v[i] = b'\n';
                        if i + 3 < len {
                            v[i + 3] = b'\n';
                        }
                    }
                    let want = v.iter().position(|b| *b == b'\n');
                    assert_eq!(find_newline(&v), want, "{v:?}");
                }
            }
        }
    }

    #[test]
    fn lines_across_chunks_and_cr_stripped() {
        let out = split(100, &[b"ab", b"c\r\nde", b"f\n"]);
        assert_eq!(
            out,
            vec![Line::Frame(b"abc".to_vec()), Line::Frame(b"def".to_vec())]
        );
    }

    #[test]
    fn over_limit_line_reported_once_then_next_line_ok() {
        let big = vec![b'x'; 50];
        let out = split(10, &[&big, &big, b"\n{}\n"]);
        assert_eq!(out, vec![Line::TooLarge, Line::Frame(b"{}".to_vec())]);
    }

    #[test]
    fn over_limit_line_in_one_chunk() {
        let mut line = vec![b'y'; 11];
        line.extend_from_slice(b"\nok\n");
        assert_eq!(
            split(10, &[&line]),
            vec![Line::TooLarge, Line::Frame(b"ok".to_vec())]
        );
    }

    #[test]
    fn exactly_limit_is_accepted_with_cr() {
        let mut line = vec![b'z'; 10];
        line.extend_from_slice(b"\r\n");
        assert_eq!(split(10, &[&line]), vec![Line::Frame(vec![b'z'; 10])]);
    }

    #[test]
    fn unterminated_tail_is_buffered_not_emitted() {
        let mut s = LineSplitter::new(10);
        let mut out = Vec::new();
        s.feed(b"{\"a\":", &mut out);
        assert!(out.is_empty());
        assert_eq!(s.pending_bytes(), 5);
    }
}
