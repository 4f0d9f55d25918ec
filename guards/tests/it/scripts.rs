//! Referenced scripts, read through [`FsScriptReader`] from real files in a temp directory.

use std::fs;
use std::path::Path;

use herd_guards::{FsScriptReader, Rule, Verdict, judge_with};
use tempfile::TempDir;

use crate::host;

/// A temp directory with the given files, and a reader rooted in it (home = the dir too).
fn dir_with(files: &[(&str, &[u8])]) -> (TempDir, FsScriptReader) {
    let dir = tempfile::tempdir().expect("a temp dir");
    for (name, body) in files {
        let path = dir.path().join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create parent dirs");
        }
        fs::write(&path, body).expect("write a script");
    }
    let reader =
        FsScriptReader::new(dir.path().to_path_buf()).with_home(Some(dir.path().to_path_buf()));
    (dir, reader)
}

fn rule_of(command: &str, reader: &FsScriptReader) -> Option<Rule> {
    match judge_with(command, &host(), reader) {
        Verdict::Allow => None,
        Verdict::Block(block) => Some(block.rule),
    }
}

#[test]
fn b33_script_with_host_lifecycle_is_blocked_and_named() {
    let (_dir, reader) = dir_with(&[("restart.sh", b"#!/bin/sh\necho bye\nherd shutdown\n")]);
    match judge_with("bash restart.sh", &host(), &reader) {
        Verdict::Block(block) => {
            assert_eq!(block.rule, Rule::HostLifecycle);
            assert!(
                block.reason.contains("referenced script restart.sh"),
                "{}",
                block.reason
            );
        }
        Verdict::Allow => panic!("a script running `herd shutdown` must be blocked"),
    }
}

#[test]
fn b33_script_spellings_are_all_followed() {
    let (_dir, reader) = dir_with(&[("k.sh", b"pkill -9 python3\n")]);
    for command in [
        "sh k.sh",
        "/bin/bash k.sh",
        "/bin/bash -O extglob k.sh",
        "bash -e -o pipefail k.sh",
        "source k.sh",
        ". k.sh",
        "./k.sh",
        "sudo bash ./k.sh",
        "bash -c 'bash k.sh'",
        "sh < k.sh",
        "cat k.sh | bash",
        "bash ~/k.sh",
        "bash $HOME/k.sh",
    ] {
        assert_eq!(
            rule_of(command, &reader),
            Some(Rule::KillByName),
            "{command}"
        );
    }
}

#[test]
fn b33_healthy_script_is_allowed() {
    let (_dir, reader) = dir_with(&[(
        "build.sh",
        b"#!/bin/bash\nset -e\ncargo build\nkill 4242\necho 'pkill python'\n",
    )]);
    assert_eq!(rule_of("bash build.sh", &reader), None);
}

#[test]
fn b33_nested_scripts_are_followed() {
    let (_dir, reader) = dir_with(&[
        ("outer.sh", b"echo outer\nbash lib/inner.sh\n"),
        ("lib/inner.sh", b"systemctl --user restart herd\n"),
    ]);
    assert_eq!(rule_of("bash outer.sh", &reader), Some(Rule::ServiceStop));
}

#[test]
fn b33_nul_padded_scripts_are_judged() {
    let (_dir, reader) = dir_with(&[
        ("nul.sh", b"\0\0pk\0ill python\0\n"),
        ("shebang.sh", b"#!/bin/sh\n\0\0killall python\n"),
    ]);
    assert_eq!(rule_of("bash nul.sh", &reader), Some(Rule::KillByName));
    assert_eq!(rule_of("bash shebang.sh", &reader), Some(Rule::KillByName));
}

#[test]
fn b33_python_scripts_are_scanned_as_code() {
    let (_dir, reader) = dir_with(&[
        ("tool.py", b"import os\nos.system('herd daemon restart')\n"),
        ("argv.py", b"#!/usr/bin/env python3\nimport subprocess\nsubprocess.run(['pkill', '-f', 'agent.main'])\n"),
        ("fine.py", b"from pathlib import Path\nprint(Path.home() / '.herd')\n"),
    ]);
    assert_eq!(
        rule_of("python tool.py", &reader),
        Some(Rule::HostLifecycle)
    );
    assert_eq!(rule_of("./argv.py", &reader), Some(Rule::KillByCmdline));
    assert_eq!(rule_of("python3 fine.py", &reader), None);
}

#[test]
fn b33_fifo_fails_closed() {
    let (dir, reader) = dir_with(&[]);
    nix::unistd::mkfifo(&dir.path().join("pipe.sh"), nix::sys::stat::Mode::S_IRWXU)
        .expect("mkfifo");
    assert_eq!(rule_of("bash pipe.sh", &reader), Some(Rule::Unscannable));
}

#[test]
fn b33_device_fails_closed() {
    let (_dir, reader) = dir_with(&[]);
    assert!(Path::new("/dev/null").exists(), "this test needs /dev/null");
    assert_eq!(rule_of("bash /dev/null", &reader), Some(Rule::Unscannable));
}

#[test]
fn b33_oversized_script_fails_closed() {
    let big = "echo hi\n".repeat(140_000);
    let (_dir, reader) = dir_with(&[("big.sh", big.as_bytes())]);
    assert!(big.len() > 1024 * 1024);
    assert_eq!(rule_of("bash big.sh", &reader), Some(Rule::Unscannable));
}

#[test]
fn b33_binaries_directories_and_missing_files_are_nothing() {
    let (dir, reader) = dir_with(&[("tool", b"\x7fELF\x02\x01\x01pkill python")]);
    fs::create_dir(dir.path().join("scripts.d")).expect("mkdir");
    assert_eq!(rule_of("./tool --version", &reader), None);
    assert_eq!(rule_of("bash scripts.d", &reader), None);
    assert_eq!(rule_of("bash missing.sh", &reader), None);
    assert_eq!(
        rule_of(&format!("bash /{}.sh", "a".repeat(4096)), &reader),
        None
    );
    assert_eq!(rule_of("bash ./run\0me.sh", &reader), None);
}

#[test]
fn b33_script_chain_deeper_than_eight_fails_closed() {
    let names: Vec<String> = (0..12).map(|i| format!("s{i}.sh")).collect();
    let bodies: Vec<String> = (0..12).map(|i| format!("bash s{}.sh\n", i + 1)).collect();
    let files: Vec<(&str, &[u8])> = names
        .iter()
        .zip(&bodies)
        .map(|(n, b)| (n.as_str(), b.as_bytes()))
        .collect();
    let (_dir, reader) = dir_with(&files);
    assert_eq!(rule_of("bash s0.sh", &reader), Some(Rule::Unscannable));
}

#[test]
fn b33_self_sourcing_script_terminates() {
    let (_dir, reader) = dir_with(&[("loop.sh", b"echo again\nsource loop.sh\n")]);
    assert_eq!(rule_of("bash loop.sh", &reader), None);
}

#[test]
fn b33_script_written_on_the_same_line_is_judged_before_it_exists() {
    let (_dir, reader) = dir_with(&[]);
    let command =
        "cat > later.sh <<'EOF'\nkillall -9 python3\nEOF\nchmod +x later.sh && ./later.sh";
    assert_eq!(rule_of(command, &reader), Some(Rule::KillByName));
}

#[test]
fn b33_parse_errors_in_scripts_scan_only_the_unreadable_region() {
    let (_dir, reader) = dir_with(&[
        ("odd.sh", b"cleanup() { kill \"$child\"; }\ntrap cleanup EXIT\nfor ((i=0; i<3; i++)); do echo $i; done\necho )) unbalanced\n"),
        ("bad.sh", b"echo start\necho \"never closed\npkill python\n"),
    ]);
    assert_eq!(rule_of("bash odd.sh", &reader), None);
    assert_eq!(rule_of("bash bad.sh", &reader), Some(Rule::Unparseable));
}

#[test]
fn b33_large_library_scripts_with_kill_words_are_allowed() {
    let mut library = String::from("#!/usr/bin/env node\n");
    for i in 0..2000 {
        library.push_str(&format!(
            "const s{i} = 'string {i}'; function stop{i}(p) {{ p.kill('SIGTERM'); }}\n"
        ));
    }
    let (_dir, reader) = dir_with(&[("node_modules/.bin/tool", library.as_bytes())]);
    assert_eq!(rule_of("./node_modules/.bin/tool --watch", &reader), None);
}
