//! The OS side of leases and syncs for real files: `flock` through `fs4`
//! (the [`LockFile`] of [`LeaseRegistry`](super::lease::LeaseRegistry)) and
//! `fdatasync` (the [`SyncData`] of the group committer).

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

use fs4::fs_std::FileExt;

use super::commit::SyncData;
use super::lease::LockFile;

impl LockFile for File {
    type Fs = ();

    fn create(_: &(), path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
    }

    fn open_existing(_: &(), path: &Path) -> io::Result<Option<File>> {
        match OpenOptions::new().read(true).open(path) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn try_lock(&self) -> io::Result<bool> {
        FileExt::try_lock_exclusive(self)
    }

    fn unlock(&self) -> io::Result<()> {
        FileExt::unlock(self)
    }
}

impl SyncData for File {
    fn sync_data(&self) -> Result<(), String> {
        File::sync_data(self).map_err(|e| format!("fsync failed: {e}"))
    }
}
