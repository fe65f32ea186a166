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
            match bytes.iter().position(|b| *b == b'\n') {
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
