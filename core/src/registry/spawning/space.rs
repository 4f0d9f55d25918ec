//! Free space before a spawn: a job is not started on a full disk,
//! where its supervisor record, its exit record and its log could not be written.
//! The refusal names the free space and the path, so the person or agent knows
//! what to free; everything else herd does (list, poll, wait, kill, shutdown)
//! goes on working on a full disk.

use std::path::Path;

use crate::error::SpawnError;

/// The free space a spawn needs on the file system of the home's logs: the
/// session's records and the first of its output.
pub(crate) const MIN_FREE_BYTES: u64 = 1024 * 1024;

/// Refuses a spawn when the file system holding `dir` has less than
/// [`MIN_FREE_BYTES`] (or no inode) free for an unprivileged user. A file system
/// that cannot be asked is not refused here: the spawn reports what failed.
pub(crate) fn check_free_space(dir: &Path) -> Result<(), SpawnError> {
    let Ok(stat) = nix::sys::statvfs::statvfs(dir) else {
        return Ok(());
    };
    let free_bytes = stat.blocks_available().saturating_mul(stat.fragment_size());
    // Some file systems report no inode counts at all (files = 0).
    let out_of_inodes = stat.files() > 0 && stat.files_available() == 0;
    if free_bytes >= MIN_FREE_BYTES && !out_of_inodes {
        return Ok(());
    }
    tracing::warn!(path = %dir.display(), free_bytes, out_of_inodes, "spawn refused: the disk is full");
    Err(SpawnError::DiskFull {
        path: dir.to_path_buf(),
        free: if out_of_inodes {
            format!("{} and no free inode", human_bytes(free_bytes))
        } else {
            human_bytes(free_bytes)
        },
        needed: human_bytes(MIN_FREE_BYTES),
    })
}

/// `n` bytes for a person: `512 bytes`, `12.5 KiB`, `3.0 MiB`, `1.2 GiB`.
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    #[expect(
        clippy::cast_precision_loss,
        reason = "one decimal of a size shown to a person"
    )]
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_a_person_writes_them() {
        assert_eq!(human_bytes(0), "0 bytes");
        assert_eq!(human_bytes(1023), "1023 bytes");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(MIN_FREE_BYTES), "1.0 MiB");
        assert_eq!(human_bytes(5 << 30), "5.0 GiB");
    }

    #[test]
    fn a_file_system_with_room_is_not_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        // The test machine's temp dir has more than a mebibyte free.
        assert!(check_free_space(dir.path()).is_ok());
    }
}
