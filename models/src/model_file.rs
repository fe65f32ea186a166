//! A session log as the durability properties see it: how many bytes were
//! written and how many are durable. A sync makes durable exactly what was
//! written when it began; bytes written while it runs are not covered (a
//! real fdatasync may or may not write them, so nobody may count on it).

use loom::sync::Mutex;

use crate::io::commit::SyncData;

#[derive(Debug, Default)]
struct Bytes {
    written: u64,
    durable: u64,
}

/// The model log.
#[derive(Debug, Default)]
pub struct ModelFile {
    bytes: Mutex<Bytes>,
}

impl ModelFile {
    /// Appends `n` bytes (a record); returns the new end, the offset its
    /// answer waits for.
    pub fn append(&self, n: u64) -> u64 {
        let mut b = self.bytes.lock().expect("model file");
        b.written += n;
        b.written
    }

    /// Bytes that survive a power loss now.
    pub fn durable(&self) -> u64 {
        self.bytes.lock().expect("model file").durable
    }
}

impl SyncData for ModelFile {
    fn sync_data(&self) -> Result<(), String> {
        let covered = self.bytes.lock().expect("model file").written;
        // The sync takes time: appends may land meanwhile.
        loom::thread::yield_now();
        let mut b = self.bytes.lock().expect("model file");
        b.durable = b.durable.max(covered);
        Ok(())
    }
}
