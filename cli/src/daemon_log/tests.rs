//! The daemon log's rotation and its ring of failed writes.

use super::*;
use serde_json::Value;

fn file_log(dir: &Path, max_bytes: u64, generations: usize) -> (DaemonLog, PathBuf) {
    let log = DaemonLog::new(max_bytes, generations);
    let path = dir.join("daemon.log");
    log.to_file(&path, false);
    (log, path)
}

#[test]
fn the_daemon_log_rotates_by_size_and_keeps_its_generations() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (log, path) = file_log(dir.path(), 100, 3);
    for n in 0..40 {
        log.write_line(format!("line {n:02} of the daemon log\n").as_bytes());
    }
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let current = read(&path);
    assert!(current.len() <= 100, "{}", current.len());
    assert!(current.contains("line 39"), "{current}");
    let one = PathBuf::from(format!("{}.1", path.display()));
    let two = PathBuf::from(format!("{}.2", path.display()));
    assert!(read(&one).len() <= 100 && !read(&one).is_empty());
    assert!(read(&two).len() <= 100 && !read(&two).is_empty());
    assert!(
        !PathBuf::from(format!("{}.3", path.display())).exists(),
        "three files in all"
    );
    let total: Vec<String> = [&two, &one, &path].iter().map(|p| read(p)).collect();
    assert!(total.concat().ends_with("line 39 of the daemon log\n"));
    let mode = std::fs::metadata(&path).expect("exists").permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
    assert_eq!(log.report().failed_writes, 0);
}

#[test]
fn a_failed_write_is_kept_in_the_ring_and_counted_never_an_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A log whose directory is gone cannot be opened: every write fails.
    let gone = dir.path().join("missing");
    let log = DaemonLog::new(1_000, 2).quiet();
    log.to_file(&gone.join("daemon.log"), false);
    for n in 0..(RING_LINES + 10) {
        log.write_line(format!("event {n}\n").as_bytes());
    }
    log.write_line(&vec![b'x'; RING_LINE_BYTES * 3]);
    let report = serde_json::to_value(log.report()).expect("the report serialises");
    assert_eq!(report["failed_writes"], RING_LINES + 11 + 1, "{report}");
    let ring = report["recent_failed_lines"].as_array().expect("lines");
    assert_eq!(ring.len(), RING_LINES, "bounded");
    assert_eq!(
        ring.last().and_then(Value::as_str).map(str::len),
        Some(RING_LINE_BYTES)
    );
    assert!(
        report["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("daemon.log")),
        "{report}"
    );
    // Once the file can be written, logging resumes there.
    std::fs::create_dir(&gone).expect("mkdir");
    log.write_line(b"back\n");
    assert_eq!(
        std::fs::read_to_string(gone.join("daemon.log")).expect("written"),
        "back\n"
    );
}
