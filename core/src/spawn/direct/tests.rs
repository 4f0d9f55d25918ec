//! Unit tests for the shell bypass rule: which command lines run without the shell.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::direct_argv;

fn bash() -> Vec<String> {
    vec!["bash".to_owned(), "-c".to_owned()]
}

fn env_with_path(path: &str) -> BTreeMap<OsString, OsString> {
    BTreeMap::from([(OsString::from("PATH"), OsString::from(path))])
}

fn host_env() -> BTreeMap<OsString, OsString> {
    env_with_path("/usr/local/bin:/usr/bin:/bin")
}

fn direct(command: &str) -> Option<Vec<String>> {
    direct_argv(&bash(), command, &host_env(), Path::new("/"))
}

fn program_name(argv: &[String]) -> &str {
    Path::new(&argv[0])
        .file_name()
        .and_then(|n| n.to_str())
        .expect("argv[0] is a path")
}

#[test]
fn b1_plain_command_runs_without_the_shell() {
    let argv = direct("true").expect("`true` needs no shell");
    assert!(Path::new(&argv[0]).is_absolute(), "{argv:?}");
    assert_eq!(program_name(&argv), "true");
    assert_eq!(argv.len(), 1);

    let argv = direct("  sleep\t5  ").expect("plain words");
    assert_eq!(program_name(&argv), "sleep");
    assert_eq!(&argv[1..], ["5"]);

    let argv = direct("echo a-b c.d e/f g:h i,j k+l m@n o%p q=r").expect("plain words");
    assert_eq!(program_name(&argv), "echo");
    assert_eq!(
        &argv[1..],
        [
            "a-b", "c.d", "e/f", "g:h", "i,j", "k+l", "m@n", "o%p", "q=r"
        ]
    );
}

#[test]
fn b1_anything_the_shell_would_interpret_goes_through_it() {
    for command in [
        "echo $HOME",
        "echo ${X}",
        "true && false",
        "true || false",
        "true; false",
        "sleep 1 &",
        "ls *",
        "ls ?",
        "ls [ab]",
        "echo {a,b}",
        "echo ~",
        "echo 'quoted'",
        "echo \"quoted\"",
        "echo a\\ b",
        "echo `date`",
        "echo $(date)",
        "echo > out",
        "cat < in",
        "true | cat",
        "echo a # comment",
        "echo a\necho b",
        "FOO=1 env",
        "ls =true",
        "echo ^x",
        "echo !x",
    ] {
        assert_eq!(
            direct(command),
            None,
            "{command:?} must go through the shell"
        );
    }
}

#[test]
fn b1_builtins_and_keywords_go_through_the_shell() {
    for command in [
        "cd /",
        "exit 3",
        "export A",
        "kill 1",
        "pwd",
        "time sleep 1",
        "exec sleep 1",
        "source x",
        ". x",
        "test -e x",
        "printf x",
        "read x",
        "ulimit -n",
        "umask",
        "if",
        "while",
        "wait",
        "set -e",
        "eval x",
        "command ls",
        "type ls",
    ] {
        assert_eq!(
            direct(command),
            None,
            "{command:?} must go through the shell"
        );
    }
}

#[test]
fn b1_unknown_program_goes_through_the_shell_for_its_error() {
    assert_eq!(direct("herd-no-such-program-anywhere --flag"), None);
    assert_eq!(direct("./herd-no-such-script"), None);
    assert_eq!(direct(""), None);
    assert_eq!(direct("   "), None);
}

#[test]
fn b1_only_a_plain_posix_shell_is_bypassed() {
    let env = host_env();
    let cwd = Path::new("/");
    let shell = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    for ok in [
        &["bash", "-c"][..],
        &["/bin/sh", "-c"],
        &["/usr/bin/zsh", "-c"],
        &["dash", "-c"],
    ] {
        assert!(
            direct_argv(&shell(ok), "true", &env, cwd).is_some(),
            "{ok:?}"
        );
    }
    for refused in [
        &["bash", "-lc"][..],
        &["bash", "-l", "-c"],
        &["ssh", "-c"],
        &["fish", "-c"],
        &["bash"],
    ] {
        assert_eq!(
            direct_argv(&shell(refused), "true", &env, cwd),
            None,
            "{refused:?}"
        );
    }
}

#[test]
fn b1_path_search_matches_the_shell() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    std::fs::create_dir_all(&first).expect("dir");
    std::fs::create_dir_all(&second).expect("dir");
    let write = |path: &Path, body: &[u8], mode: u32| {
        std::fs::write(path, body).expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };
    // A non-executable file earlier on PATH is skipped, as the shell skips it.
    write(&first.join("tool"), b"#!/bin/sh\necho first\n", 0o644);
    write(&second.join("tool"), b"#!/bin/sh\necho second\n", 0o755);
    // A header-less script is interpreted by the shell, never exec'd directly; so is
    // one whose interpreter is missing (the shell reports "bad interpreter").
    write(&second.join("bare"), b"echo bare\n", 0o755);
    write(
        &second.join("orphan"),
        b"#!/nonexistent/python9 -u\nprint(1)\n",
        0o755,
    );
    write(&second.join("spaced"), b"#! /bin/sh\necho spaced\n", 0o755);
    let path = format!("{}:{}", first.display(), second.display());
    let env = env_with_path(&path);
    let cwd = dir.path();

    let argv = direct_argv(&bash(), "tool x", &env, cwd).expect("found on PATH");
    assert_eq!(Path::new(&argv[0]), second.join("tool"));
    assert_eq!(direct_argv(&bash(), "bare", &env, cwd), None);
    assert_eq!(direct_argv(&bash(), "orphan", &env, cwd), None);
    let argv = direct_argv(&bash(), "spaced", &env, cwd).expect("`#! /bin/sh` is a script");
    assert_eq!(Path::new(&argv[0]), second.join("spaced"));

    // A relative PATH entry is resolved by the shell against its cwd: left to it.
    let relative = env_with_path(&format!("bin:{}", second.display()));
    assert_eq!(direct_argv(&bash(), "tool", &relative, cwd), None);

    // A word with a slash names a file relative to the session's cwd.
    let argv = direct_argv(&bash(), "second/tool y", &env, cwd).expect("relative path");
    assert_eq!(Path::new(&argv[0]), cwd.join("second/tool"));
    assert_eq!(&argv[1..], ["y"]);
    assert_eq!(direct_argv(&bash(), "second/bare", &env, cwd), None);

    // No PATH at all: the shell's defaults apply, so the shell decides.
    assert_eq!(direct_argv(&bash(), "tool", &BTreeMap::new(), cwd), None);
}
