//! Platform judging for `herd hosts install`: glibc versions, the probe's line,
//! this binary's own ELF version-needs, and the probe script run by a real `sh`.

use super::{GlibcVersion, PROBE_SCRIPT, Platform, needed_glibc, refusal};

fn v(text: &str) -> GlibcVersion {
    GlibcVersion::parse(text).expect("a version")
}

fn linux(glibc: Option<&str>) -> Platform {
    Platform {
        os: "linux".into(),
        arch: "x86_64".into(),
        glibc: glibc.map(str::to_owned),
    }
}

#[test]
fn glibc_versions_order_numerically() {
    assert!(v("2.9") < v("2.17"));
    assert!(v("2.34") < v("2.36"));
    assert!(v("2.17") < v("2.17.1"));
    assert_eq!(v("2.36-9+deb12u4").to_string(), "2.36");
    assert_eq!(GlibcVersion::parse("none"), None);
    assert_eq!(GlibcVersion::parse("2"), None);
}

#[test]
fn this_binary_needs_a_glibc_version() {
    let exe = std::env::current_exe().expect("the test binary has a path");
    let image = std::fs::read(exe).expect("the test binary is readable");
    let needed = needed_glibc(&image).expect("the test binary is ELF");
    let needed = needed.expect("a dynamic binary built against glibc needs a GLIBC_x.y");
    assert!(needed >= v("2.2.5"), "{needed}");
    assert!(needed_glibc(b"#!/bin/sh\n").is_err());
}

#[test]
fn the_probe_line_maps_uname_names_to_rusts() {
    let platform = Platform::of_probe("noise\nherd-probe os=Linux arch=x86_64 glibc=2.36\n");
    assert_eq!(platform, Some(linux(Some("2.36"))));
    let arm = Platform::of_probe("herd-probe os=Linux arch=arm64 glibc=none").expect("parses");
    assert_eq!((arm.arch.as_str(), arm.glibc), ("aarch64", None));
    assert_eq!(Platform::of_probe("bash: herd: command not found"), None);
}

#[test]
fn refusals_name_both_sides() {
    let here = linux(Some("2.36"));
    let needed = v("2.34");
    assert_eq!(refusal(&here, Some(&needed), &linux(Some("2.36"))), None);
    assert_eq!(refusal(&here, Some(&needed), &linux(Some("2.34"))), None);
    let old = refusal(&here, Some(&needed), &linux(Some("2.31"))).expect("2.31 is too old");
    assert!(old.contains("2.31") && old.contains("2.34"), "{old}");
    let musl = refusal(&here, Some(&needed), &linux(None)).expect("no glibc");
    assert!(musl.contains("no glibc") && musl.contains("2.34"), "{musl}");
    let arm = Platform {
        arch: "aarch64".into(),
        ..linux(Some("2.36"))
    };
    let other = refusal(&here, Some(&needed), &arm).expect("another architecture");
    assert!(
        other.contains("linux/aarch64") && other.contains("linux/x86_64"),
        "{other}"
    );
}

#[test]
fn the_probe_script_reports_this_machine() {
    let out = crate::auxiliary::command("sh")
        .args(["-c", PROBE_SCRIPT, "herd", "proxy"])
        .output()
        .expect("sh runs");
    assert_eq!(out.status.code(), Some(127));
    let platform =
        Platform::of_probe(&String::from_utf8_lossy(&out.stdout)).expect("the probe's line");
    let here = Platform::here();
    assert_eq!((platform.os, platform.arch), (here.os, here.arch));
    assert_eq!(platform.glibc, here.glibc);
    assert!(String::from_utf8_lossy(&out.stderr).contains("herd is not installed"));
}

/// Runs [`super::SHIM_WRITER`] from a fresh directory with `stdin`; its exit
/// code and the directory.
fn run_writer(stdin: &[u8]) -> (Option<i32>, tempfile::TempDir) {
    use std::io::Write;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let script = dir.path().join("herd");
    std::fs::write(&script, super::SHIM_WRITER).expect("the writer written");
    let mut child = crate::auxiliary::command("sh")
        .arg(&script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("sh runs");
    let mut pipe = child.stdin.take().expect("its stdin");
    let _ = pipe.write_all(stdin);
    drop(pipe);
    let status = child.wait().expect("sh ends");
    (status.code(), dir)
}

#[test]
fn shim_writer_refuses_protocol_lines() {
    let (code, dir) = run_writer(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\"}\n");
    assert_eq!(code, Some(127));
    assert!(!dir.path().join("herd-shim").exists());
    let (code, dir) = run_writer(b"herd-shim 5 nothex\nhello");
    assert_eq!(code, Some(127));
    assert!(!dir.path().join("herd-shim").exists());
}

#[test]
fn shim_writer_copies_exactly_the_header_length_and_checks_the_hash() {
    let shim = b"\x7fELF pretend shim\nwith lines\n";
    let mut stdin = super::shim_header(shim).into_bytes();
    stdin.extend_from_slice(shim);
    stdin.extend_from_slice(b"{\"id\":2}\n");
    let (code, dir) = run_writer(&stdin);
    assert_eq!(code, Some(0));
    assert_eq!(std::fs::read(dir.path().join("herd-shim")).unwrap(), shim);
    let record = std::fs::read_to_string(dir.path().join("herd-shim.sha256")).unwrap();
    assert_eq!(
        record,
        format!("{} {}\n", super::sha256_hex(shim), shim.len())
    );

    let mut damaged = super::shim_header(shim).into_bytes();
    damaged.extend_from_slice(b"\x7fELF pretend shiM\nwith lines\n");
    let (code, dir) = run_writer(&damaged);
    assert_eq!(code, Some(1));
    assert!(!dir.path().join("herd-shim").exists());
    assert!(!dir.path().join("herd-shim.new").exists());
}
