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

fn info_record(shim_pid: i32) -> ShimInfo {
    ShimInfo {
        version: SHIM_RECORD_VERSION,
        protocol: 1,
        shim_pid,
        shim_start_time: Some(5),
        pid: shim_pid + 1,
        pgid: shim_pid + 1,
        start_time: Some(6),
        mode: Mode::Pipe,
        cgroup: None,
    }
}

fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fs::symlink_metadata(path).expect("stat").ino()
}

#[test]
fn a_retired_directory_is_the_next_sessions_with_the_same_inodes_and_no_old_record() {
    let (_tmp, home) = home();
    let first = ShimDir::new(&home, "proc_aaaaaaaaaaaa").expect("valid id");
    first.create(&home).expect("created");
    first.write_info(&info_record(10)).expect("written");
    first.write_exit(&exit_record()).expect("written");
    fs::write(first.socket_path(), b"").expect("a stand-in for the socket");
    fs::write(first.path().join("info.json.tmp-1-1"), b"torn").expect("a stray temp");
    let (dir_ino, info_ino, exit_ino) = (
        inode(first.path()),
        inode(&first.info_path()),
        inode(&first.exit_path()),
    );

    let spare = first
        .retire_as_spare()
        .expect("retired")
        .expect("kept as a spare");
    assert!(!first.path().exists());
    assert_eq!(spare.parent(), Some(home.shims_dir().as_path()));
    assert_eq!(spare_shim_dirs(&home), vec![spare.clone()]);
    assert!(
        shim_session_ids(&home).is_empty(),
        "a spare is no session's directory"
    );
    let mut left: Vec<String> = fs::read_dir(&spare)
        .expect("readable")
        .map(|e| e.expect("entry").file_name().into_string().expect("UTF-8"))
        .collect();
    left.sort();
    assert_eq!(left, [".spare-exit.json", ".spare-info.json"]);

    let second = ShimDir::new(&home, "proc_bbbbbbbbbbbb").expect("valid id");
    assert!(second.create_from_spare(&spare));
    assert!(!spare.exists());
    assert_eq!(inode(second.path()), dir_ino);
    assert_eq!(second.read_info().expect("readable"), None);
    assert_eq!(second.read_exit().expect("readable"), None);
    second.write_info(&info_record(20)).expect("written");
    second.write_exit(&exit_record()).expect("written");
    assert_eq!(inode(&second.info_path()), info_ino);
    assert_eq!(inode(&second.exit_path()), exit_ino);
    assert_eq!(second.read_info().expect("read"), Some(info_record(20)));
    assert_eq!(second.read_exit().expect("read"), Some(exit_record()));
    let mode = |p: &Path| fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(second.path()), 0o700);
    assert_eq!(mode(&second.info_path()), 0o600);
    // A longer record over a shorter spare, then a shorter over a longer: no tail of
    // the old bytes is left behind.
    let spare = second.retire_as_spare().expect("retired").expect("a spare");
    let third = ShimDir::new(&home, "proc_cccccccccccc").expect("valid id");
    assert!(third.create_from_spare(&spare));
    let mut long = info_record(30);
    long.cgroup = Some(PathBuf::from(format!("/sys/fs/cgroup/{}", "x".repeat(300))));
    third.write_info(&long).expect("written");
    assert_eq!(third.read_info().expect("read"), Some(long));
    let spare = third.retire_as_spare().expect("retired").expect("a spare");
    let fourth = ShimDir::new(&home, "proc_dddddddddddd").expect("valid id");
    assert!(fourth.create_from_spare(&spare));
    fourth.write_info(&info_record(40)).expect("written");
    assert_eq!(fourth.read_info().expect("read"), Some(info_record(40)));
}

#[test]
fn a_spare_is_not_taken_over_an_existing_directory_nor_when_gone() {
    let (_tmp, home) = home();
    let first = ShimDir::new(&home, "proc_aaaaaaaaaaaa").expect("valid id");
    first.create(&home).expect("created");
    let spare = first.retire_as_spare().expect("retired").expect("a spare");
    let taken = ShimDir::new(&home, "proc_bbbbbbbbbbbb").expect("valid id");
    taken.create(&home).expect("created");
    taken.write_info(&info_record(7)).expect("written");
    assert!(!taken.create_from_spare(&spare));
    assert!(spare.exists(), "the spare stays a spare");
    assert_eq!(taken.read_info().expect("read"), Some(info_record(7)));
    fs::remove_dir_all(&spare).expect("removed");
    let other = ShimDir::new(&home, "proc_cccccccccccc").expect("valid id");
    assert!(!other.create_from_spare(&spare));
    assert!(!other.path().exists());
}
