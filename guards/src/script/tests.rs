//! Unit tests for the `script` module: `FsScriptReader` path resolution and bounds.

use std::fs;

use super::{FsScriptReader, MAX_SCRIPT_BYTES, Script, ScriptReader, is_binary};

#[test]
fn relative_paths_resolve_against_the_cwd() {
    let dir = tempfile::tempdir().expect("a temp dir");
    fs::write(dir.path().join("a.sh"), "echo a\n").expect("write");
    let reader = FsScriptReader::new(dir.path().to_path_buf());
    assert_eq!(reader.read("a.sh"), Script::Text("echo a\n".to_owned()));
    assert_eq!(reader.read("./a.sh"), Script::Text("echo a\n".to_owned()));
    assert_eq!(reader.read("b.sh"), Script::Nothing);
}

#[test]
fn home_paths_need_a_home() {
    let dir = tempfile::tempdir().expect("a temp dir");
    fs::write(dir.path().join("h.sh"), "echo h\n").expect("write");
    let with_home = FsScriptReader::new("/".into()).with_home(Some(dir.path().to_path_buf()));
    for path in ["~/h.sh", "$HOME/h.sh", "${HOME}/h.sh"] {
        assert_eq!(
            with_home.read(path),
            Script::Text("echo h\n".to_owned()),
            "{path}"
        );
    }
    let without = FsScriptReader::new(dir.path().to_path_buf()).with_home(None);
    assert_eq!(without.read("~/h.sh"), Script::Nothing);
    assert_eq!(without.read("$OTHER/h.sh"), Script::Nothing);
}

#[test]
fn size_limit_is_exact() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let limit = usize::try_from(MAX_SCRIPT_BYTES).expect("1 MiB fits usize");
    fs::write(dir.path().join("max.sh"), "#".repeat(limit)).expect("write");
    fs::write(dir.path().join("over.sh"), "#".repeat(limit + 1)).expect("write");
    let reader = FsScriptReader::new(dir.path().to_path_buf());
    assert!(matches!(reader.read("max.sh"), Script::Text(t) if t.len() == limit));
    assert!(matches!(reader.read("over.sh"), Script::Refused(why) if why.contains("1 MiB")));
}

#[test]
fn special_files_are_refused_and_binaries_are_nothing() {
    let dir = tempfile::tempdir().expect("a temp dir");
    nix::unistd::mkfifo(&dir.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    fs::write(dir.path().join("bin"), b"\x7fELF\x02\x01").expect("write");
    fs::write(dir.path().join("nul.sh"), b"a\0b\n").expect("write");
    fs::write(dir.path().join("latin1.sh"), b"echo \xe9\n").expect("write");
    let reader = FsScriptReader::new(dir.path().to_path_buf());
    assert!(matches!(reader.read("fifo"), Script::Refused(why) if why.contains("fifo")));
    assert!(matches!(reader.read("/dev/null"), Script::Refused(why) if why.contains("device")));
    assert_eq!(reader.read("bin"), Script::Nothing);
    assert_eq!(reader.read("nul.sh"), Script::Text("ab\n".to_owned()));
    assert_eq!(
        reader.read("latin1.sh"),
        Script::Text("echo \u{fffd}\n".to_owned())
    );
    assert_eq!(reader.read("."), Script::Nothing);
}

#[test]
fn cloud_paths_are_refused_without_opening() {
    let reader = FsScriptReader::new("/Users/me/Library/CloudStorage/Drive".into());
    assert!(matches!(reader.read("x.sh"), Script::Refused(why) if why.contains("cloud")));
}

#[test]
fn binary_magic_is_recognised() {
    for magic in [
        &b"\x7fELF"[..],
        b"MZ\x90",
        b"\xcf\xfa\xed\xfe",
        b"PK\x03\x04",
        b"\x1f\x8b\x08",
        b"!<arch>\n",
    ] {
        assert!(is_binary(magic), "{magic:?}");
    }
    assert!(!is_binary(b"#!/bin/sh\n"));
}
