//! A kernel of `flock` locks for the lease model: a lock belongs to one
//! open file description; locking it again through the same description
//! succeeds; unlocking or closing the description frees it.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::{Arc, Mutex};

use crate::io::lease::LockFile;

#[derive(Debug, Default)]
struct Table {
    files: BTreeSet<PathBuf>,
    owner: BTreeMap<PathBuf, u64>,
}

/// The model kernel, shared by every "process" of a model.
#[derive(Debug, Clone, Default)]
pub struct ModelFs {
    table: Arc<Mutex<Table>>,
    next_ofd: Arc<AtomicU64>,
}

/// One open file description of a lease file.
#[derive(Debug)]
pub struct ModelLock {
    fs: ModelFs,
    path: PathBuf,
    ofd: u64,
}

impl ModelFs {
    fn open(&self, path: &Path) -> ModelLock {
        ModelLock {
            fs: self.clone(),
            path: path.to_path_buf(),
            ofd: self.next_ofd.fetch_add(1, Ordering::SeqCst),
        }
    }

    /// The description holding the lock at `path`, if any.
    pub fn owner(&self, path: &Path) -> Option<u64> {
        self.table.lock().expect("kernel").owner.get(path).copied()
    }
}

impl LockFile for ModelLock {
    type Fs = ModelFs;

    fn create(fs: &ModelFs, path: &Path) -> io::Result<ModelLock> {
        fs.table
            .lock()
            .expect("kernel")
            .files
            .insert(path.to_path_buf());
        Ok(fs.open(path))
    }

    fn open_existing(fs: &ModelFs, path: &Path) -> io::Result<Option<ModelLock>> {
        let exists = fs.table.lock().expect("kernel").files.contains(path);
        Ok(exists.then(|| fs.open(path)))
    }

    fn try_lock(&self) -> io::Result<bool> {
        let mut t = self.fs.table.lock().expect("kernel");
        match t.owner.get(&self.path) {
            Some(o) if *o != self.ofd => Ok(false),
            _ => {
                t.owner.insert(self.path.clone(), self.ofd);
                Ok(true)
            }
        }
    }

    fn unlock(&self) -> io::Result<()> {
        let mut t = self.fs.table.lock().expect("kernel");
        if t.owner.get(&self.path) == Some(&self.ofd) {
            t.owner.remove(&self.path);
        }
        Ok(())
    }
}

impl Drop for ModelLock {
    fn drop(&mut self) {
        // Closing the description frees its lock.
        let _ = self.unlock();
    }
}
