//! Tests for the home layout.

use super::*;

#[test]
fn b4_paths_derive_from_the_root_given() {
    let a = Home::new("/srv/a");
    let b = Home::new("/srv/b");
    assert_eq!(a.checkpoint_path(), Path::new("/srv/a/processes.json"));
    assert_eq!(b.socket_path(), Path::new("/srv/b/run/herd.sock"));
    assert_eq!(
        a.session_log_path("proc_0123456789ab"),
        Path::new("/srv/a/logs/sessions/proc_0123456789ab.log")
    );
    assert_ne!(a.scratch_dir(), b.scratch_dir());
}

#[test]
fn b29_ensure_dir_never_resurrects_a_deleted_home() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let home = Home::new(tmp.path().join("gone"));
    let err = home.ensure_dir(&home.scratch_dir()).unwrap_err();
    assert!(matches!(err, Error::HomeMissing { .. }), "{err}");
    assert!(!home.root().exists());
}

#[test]
fn ensure_dir_creates_private_directories() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let home = Home::new(tmp.path());
    let dir = home
        .ensure_dir(&home.session_logs_dir())
        .expect("create logs dir");
    let mode = fs::metadata(&dir).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let parent_mode = fs::metadata(dir.parent().expect("parent"))
        .expect("stat")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(parent_mode, 0o700);
    let outside = home.ensure_dir(Path::new("/elsewhere")).unwrap_err();
    assert!(matches!(outside, Error::OutsideHome { .. }));
}
