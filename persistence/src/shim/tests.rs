//! Tests for the shim records: real files in a temp home.

use std::os::unix::fs::PermissionsExt;

use super::*;

fn home() -> (tempfile::TempDir, Home) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let home = Home::new(tmp.path().join("home"));
    fs::create_dir(home.root()).expect("home");
    (tmp, home)
}

fn exit_record() -> ExitRecord {
    ExitRecord {
        version: SHIM_RECORD_VERSION,
        code: Some(7),
        signal: None,
        finished_at_ms: 1_790_000_000_000,
        total_ingested: 42,
        bytes_not_kept: 0,
        descendants_alive: vec![12, 13],
        killed_by: None,
        leftovers: Vec::new(),
    }
}

#[test]
fn records_round_trip_in_a_private_directory() {
    let (_tmp, home) = home();
    let dir = ShimDir::new(&home, "proc_0123456789ab").expect("valid id");
    dir.create(&home).expect("created");
    let mode = |p: &Path| fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(dir.path()), 0o700);
    assert_eq!(mode(&home.shims_dir()), 0o700);
    assert_eq!(dir.read_exit().expect("readable"), None);
    let info = ShimInfo {
        version: SHIM_RECORD_VERSION,
        protocol: 1,
        shim_pid: 10,
        shim_start_time: Some(5),
        pid: 11,
        pgid: 11,
        start_time: Some(6),
        mode: Mode::Pty,
        cgroup: None,
    };
    dir.write_info(&info).expect("written");
    dir.write_exit(&exit_record()).expect("written");
    assert_eq!(mode(&dir.exit_path()), 0o600);
    assert_eq!(dir.read_info().expect("read"), Some(info));
    assert_eq!(dir.read_exit().expect("read"), Some(exit_record()));
    assert_eq!(
        shim_session_ids(&home),
        vec!["proc_0123456789ab".to_owned()]
    );
    dir.remove().expect("removed");
    assert!(!dir.path().exists());
    dir.remove().expect("removing twice is fine");
}

#[test]
fn a_newer_or_torn_record_is_an_error_naming_the_file() {
    let (_tmp, home) = home();
    let dir = ShimDir::new(&home, "proc_0123456789ab").expect("valid id");
    dir.create(&home).expect("created");
    fs::write(dir.exit_path(), br#"{"version": 99, "finished_at_ms": 1}"#).expect("written");
    let err = dir.read_exit().expect_err("newer").to_string();
    assert!(
        err.contains("exit.json") && err.contains("upgrade"),
        "{err}"
    );
    fs::write(dir.exit_path(), b"{\"version\": 1, \"fini").expect("written");
    let err = dir.read_exit().expect_err("torn").to_string();
    assert!(err.contains("exit.json"), "{err}");
}

#[test]
fn ids_that_could_escape_are_refused() {
    let (_tmp, home) = home();
    for bad in ["../x", "proc_../../etc", "x", "proc_a/b"] {
        assert!(ShimDir::new(&home, bad).is_err(), "{bad}");
    }
}

#[test]
fn create_clears_a_leftover_of_the_same_id() {
    let (_tmp, home) = home();
    let dir = ShimDir::new(&home, "proc_0123456789ab").expect("valid id");
    dir.create(&home).expect("created");
    dir.write_exit(&exit_record()).expect("written");
    dir.create(&home).expect("created again");
    assert_eq!(dir.read_exit().expect("readable"), None);
}
