//! The safe-path walk against real directories: private paths pass and resolve, a
//! component others can write is refused with its owner, mode and fix, and a path of
//! the wrong shape is refused.

use std::os::unix::fs::PermissionsExt;

use super::*;

fn me() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn a_private_path_passes_and_its_links_resolve_to_the_real_path() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let home = dir.path().join("home");
    std::fs::create_dir(&home).expect("mkdir");
    std::os::unix::fs::symlink(&home, dir.path().join("link")).expect("symlink");
    let checked = check_dir(&dir.path().join("link"), me())
        .expect("a private path passes")
        .expect("it exists");
    let real = std::fs::canonicalize(&home).expect("canonical");
    assert_eq!(checked.real, real);
    assert!(
        check_dir(&home.join("missing/deeper"), me())
            .expect("a missing tail passes")
            .is_none()
    );
    std::fs::write(home.join("config.toml"), "x = 1\n").expect("write");
    let (mut file, real) = open_file(&dir.path().join("link/config.toml"), me())
        .expect("passes")
        .expect("exists");
    let mut text = String::new();
    std::io::Read::read_to_string(&mut file, &mut text).expect("read");
    assert_eq!(text, "x = 1\n");
    assert!(real.ends_with("home/config.toml"), "{}", real.display());
}

#[test]
fn a_component_writable_by_others_is_refused_with_its_owner_mode_and_fix() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let open = dir.path().join("open");
    std::fs::create_dir_all(open.join("home")).expect("mkdir");
    chmod(&open, 0o777);
    let err = check_dir(&open.join("home"), me()).expect_err("a world-writable parent");
    let text = err.to_string();
    assert!(
        text.contains(&format!("refusing {} (", open.display()))
            && text.contains("writable by everyone")
            && text.contains("mode 777")
            && text.contains(&format!("chmod go-w {}", open.display())),
        "{text}"
    );
    // Sticky and owned by root is the shared-directory exception (as /tmp), for
    // entries of the user's own.
    chmod(&open, 0o1777);
    let sticky = check_dir(&open.join("home"), me());
    if me() == 0 {
        assert!(sticky.expect("a sticky root dir passes").is_some());
    } else {
        assert!(sticky.is_err(), "a sticky dir not owned by root is refused");
    }
    // A config file writable by others is refused too.
    chmod(&open, 0o700);
    let config = open.join("home/config.toml");
    std::fs::write(&config, "").expect("write");
    chmod(&config, 0o646);
    let err = open_file(&config, me()).expect_err("a world-writable file");
    assert!(err.to_string().contains("writable by everyone"), "{err}");
}

#[test]
fn a_relative_path_or_a_file_where_a_directory_goes_is_refused() {
    assert!(matches!(
        check_dir(Path::new("relative/home"), me()),
        Err(PathError::Shape { .. })
    ));
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("file");
    std::fs::write(&file, "").expect("write");
    assert!(matches!(
        check_dir(&file, me()),
        Err(PathError::Shape { .. })
    ));
    assert!(matches!(
        open_file(dir.path(), me()),
        Err(PathError::Shape { .. })
    ));
}
