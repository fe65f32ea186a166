//! Connections: a reader task and a writer task per connection, talking to
//! the driver over channels, so that the driver never waits on a socket.
//!
//! - The reader sends the bytes it reads as [`ConnEvent::Bytes`] over a
//!   bounded channel (a client that floods the host is slowed down at its
//!   own socket, never the driver) and reports end of input once.
//! - The writer drains a queue of frame batches (the driver hands over the
//!   frames of one round in one piece) and writes each batch with one
//!   write. The queue is bounded in frames: a client too slow to read
//!   [`WRITE_QUEUE_FRAMES`] frames is disconnected rather than allowed to
//!   stall the host or grow its memory without bound.
//!
//! Listeners (TCP, Unix socket) number connections from 1, in accept
//! order; stdio is connection 1.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, oneshot};
use tokio::task::{AbortHandle, JoinHandle};

use crate::core::ConnId;

/// Bytes per read from a connection.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Frames a connection's writer may have queued before the client counts
/// as too slow and is disconnected.
pub const WRITE_QUEUE_FRAMES: usize = 16_384;
/// Connection events buffered towards the driver before readers wait.
pub const CONN_EVENTS_MAX: usize = 1024;
/// Pause after a failed accept (e.g. out of file descriptors).
const ACCEPT_RETRY_MS: u64 = 50;

/// What connections tell the driver.
#[derive(Debug)]
pub enum ConnEvent {
    /// A connection opened; its handle lets the driver write to and close
    /// it. Sent before any of its bytes.
    Connected {
        /// The connection id.
        conn: ConnId,
        /// Its writer queue and tasks.
        handle: ConnHandle,
    },
    /// Bytes read from a connection.
    Bytes {
        /// The connection id.
        conn: ConnId,
        /// The bytes, as read (not split into lines).
        bytes: Vec<u8>,
    },
    /// The connection ended (end of input, a read or a write error).
    Closed {
        /// The connection id.
        conn: ConnId,
    },
    /// End of input on stdio: an orderly shutdown (PROTOCOL.md section 1).
    StdinEof,
}

/// The driver's side of a connection.
#[derive(Debug)]
pub struct ConnHandle {
    /// Batches of `\n`-terminated frames to write, with their frame count.
    tx: mpsc::UnboundedSender<(Vec<u8>, usize)>,
    /// Frames handed over and not yet written.
    queued_frames: Arc<AtomicUsize>,
    /// Stops the reader.
    pub reader: AbortHandle,
    /// Finishes once every queued frame is written after the handle is
    /// dropped.
    pub writer: JoinHandle<()>,
}

/// Why a batch was not handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendRefused {
    /// The client has [`WRITE_QUEUE_FRAMES`] frames unread.
    TooSlow,
    /// The writer is gone.
    Closed,
}

impl ConnHandle {
    /// Hands `frames` frames (`bytes`, each `\n`-terminated) to the writer.
    pub fn send(&self, bytes: Vec<u8>, frames: usize) -> Result<(), SendRefused> {
        let queued = self.queued_frames.fetch_add(frames, Ordering::AcqRel);
        if queued + frames > WRITE_QUEUE_FRAMES {
            self.queued_frames.fetch_sub(frames, Ordering::AcqRel);
            return Err(SendRefused::TooSlow);
        }
        self.tx
            .send((bytes, frames))
            .map_err(|_| SendRefused::Closed)
    }
}

/// Starts the tasks of one connection and announces it to the driver.
/// `on_eof` is what the reader reports at end of input.
pub async fn attach<R, W>(
    conn: ConnId,
    r: R,
    w: W,
    events: mpsc::Sender<ConnEvent>,
    on_eof: ConnEvent,
) -> bool
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let queued_frames = Arc::new(AtomicUsize::new(0));
    let writer = tokio::spawn(write_loop(
        conn,
        w,
        rx,
        Arc::clone(&queued_frames),
        events.clone(),
    ));
    let (start_tx, start_rx) = oneshot::channel();
    let reader = tokio::spawn(read_loop(conn, r, events.clone(), start_rx, on_eof)).abort_handle();
    let handle = ConnHandle {
        tx,
        queued_frames,
        reader,
        writer,
    };
    if events
        .send(ConnEvent::Connected { conn, handle })
        .await
        .is_err()
    {
        return false;
    }
    // Only now may the reader report bytes: they must follow `Connected`.
    start_tx.send(()).is_ok()
}

async fn read_loop<R: AsyncRead + Unpin>(
    conn: ConnId,
    mut r: R,
    events: mpsc::Sender<ConnEvent>,
    start: oneshot::Receiver<()>,
    on_eof: ConnEvent,
) {
    if start.await.is_err() {
        return;
    }
    let mut buf = vec![0u8; READ_CHUNK_BYTES];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = events.send(on_eof).await;
                return;
            }
            Ok(n) => {
                let bytes = buf[..n].to_vec();
                if events.send(ConnEvent::Bytes { conn, bytes }).await.is_err() {
                    return;
                }
            }
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    conn: ConnId,
    w: W,
    mut rx: mpsc::UnboundedReceiver<(Vec<u8>, usize)>,
    queued_frames: Arc<AtomicUsize>,
    events: mpsc::Sender<ConnEvent>,
) {
    let mut w = BufWriter::new(w);
    while let Some((batch, frames)) = rx.recv().await {
        let mut ok = w.write_all(&batch).await.is_ok();
        // Each batch stops counting as unread once written (into the
        // buffer, at worst 8 KiB ahead of the socket): counted only after
        // the loop below, a client that reads steadily while the host
        // keeps sending would be charged every frame since the loop began,
        // and cut as too slow after WRITE_QUEUE_FRAMES of them.
        queued_frames.fetch_sub(frames, Ordering::AcqRel);
        // Whatever else is queued goes out with it, in one flush.
        while ok {
            match rx.try_recv() {
                Ok((more, n)) => {
                    ok = w.write_all(&more).await.is_ok();
                    queued_frames.fetch_sub(n, Ordering::AcqRel);
                }
                Err(_) => break,
            }
        }
        if !ok || w.flush().await.is_err() {
            let _ = events.send(ConnEvent::Closed { conn }).await;
            return;
        }
    }
    let _ = w.flush().await;
    let _ = w.shutdown().await;
}

/// Serves stdin/stdout as connection 1; end of stdin is an orderly
/// shutdown.
pub async fn attach_stdio(events: mpsc::Sender<ConnEvent>) -> bool {
    attach(
        1,
        tokio::io::stdin(),
        tokio::io::stdout(),
        events,
        ConnEvent::StdinEof,
    )
    .await
}

/// Accepts TCP connections until the task is aborted.
pub async fn accept_tcp(listener: TcpListener, events: mpsc::Sender<ConnEvent>) {
    let mut next: ConnId = 1;
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                // Acks are small frames; Nagle would add its delay to each.
                let _ = stream.set_nodelay(true);
                let (r, w) = stream.into_split();
                let conn = next;
                next += 1;
                if !attach(conn, r, w, events.clone(), ConnEvent::Closed { conn }).await {
                    return;
                }
            }
            Err(e) => {
                eprintln!("msp serve: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(ACCEPT_RETRY_MS)).await;
            }
        }
    }
}

/// Accepts Unix-socket connections until the task is aborted.
pub async fn accept_unix(listener: UnixListener, events: mpsc::Sender<ConnEvent>) {
    let mut next: ConnId = 1;
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                let (r, w) = stream.into_split();
                let conn = next;
                next += 1;
                if !attach(conn, r, w, events.clone(), ConnEvent::Closed { conn }).await {
                    return;
                }
            }
            Err(e) => {
                eprintln!("msp serve: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(ACCEPT_RETRY_MS)).await;
            }
        }
    }
}

/// Binds a Unix socket at `path`, replacing a stale socket file that no
/// process listens on (left by a killed host). A live one is an error.
pub fn bind_unix(path: &PathBuf) -> std::io::Result<UnixListener> {
    match UnixListener::bind(path) {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            let is_socket = {
                use std::os::unix::fs::FileTypeExt;
                std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
            };
            if !is_socket || std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(e);
            }
            std::fs::remove_file(path)?;
            UnixListener::bind(path)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound counts frames exactly: up to [`WRITE_QUEUE_FRAMES`]
    /// unwritten frames are taken, one more is refused, and a refused
    /// batch is not counted (nothing writes here, so nothing drains).
    #[tokio::test]
    async fn the_bound_is_exactly_write_queue_frames_and_refusals_are_not_counted() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let handle = ConnHandle {
            tx,
            queued_frames: Arc::new(AtomicUsize::new(0)),
            reader: tokio::spawn(async {}).abort_handle(),
            writer: tokio::spawn(async {}),
        };
        assert_eq!(handle.send(Vec::new(), WRITE_QUEUE_FRAMES - 1), Ok(()));
        assert_eq!(
            handle.send(Vec::new(), 1),
            Ok(()),
            "the last frame of the bound"
        );
        for n in [1, 5] {
            assert_eq!(handle.send(Vec::new(), n), Err(SendRefused::TooSlow));
        }
        assert_eq!(
            handle.queued_frames.load(Ordering::Acquire),
            WRITE_QUEUE_FRAMES
        );
    }

    /// A client that never reads: once [`WRITE_QUEUE_FRAMES`] frames wait
    /// for its writer, the next hand-over is refused as too slow (the driver
    /// then disconnects it), however the frames were batched. (The writer
    /// may take up to its buffer's worth before it blocks on the socket.)
    #[tokio::test]
    async fn a_client_that_never_reads_is_refused_after_the_frame_bound() {
        const FRAME: &[u8] = b"{\"x\":1}\n";
        let (client, host_side) = tokio::io::duplex(64);
        let (r, w) = tokio::io::split(host_side);
        let (events_tx, mut events) = mpsc::channel(8);
        assert!(attach(7, r, w, events_tx, ConnEvent::Closed { conn: 7 }).await);
        let handle = match events.recv().await {
            Some(ConnEvent::Connected { conn: 7, handle }) => handle,
            other => panic!("expected Connected, got {other:?}"),
        };
        // What the writer can absorb before it blocks: its 8 KiB buffer,
        // the pipe, and one batch in hand.
        let absorbed_max = (8 * 1024 + 64) / FRAME.len() + 1000;
        let mut taken = 0usize;
        let refused = loop {
            let n = 1000
                .min(WRITE_QUEUE_FRAMES + absorbed_max + 1 - taken)
                .max(1);
            match handle.send(FRAME.repeat(n), n) {
                Ok(()) => taken += n,
                Err(e) => break e,
            }
            assert!(
                taken <= WRITE_QUEUE_FRAMES + absorbed_max,
                "{taken} frames taken from a client that reads nothing"
            );
            tokio::task::yield_now().await;
        };
        assert_eq!(refused, SendRefused::TooSlow);
        assert!(
            taken >= WRITE_QUEUE_FRAMES - 1000,
            "refused after only {taken} frames"
        );
        drop(client);
    }
}
