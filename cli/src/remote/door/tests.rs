//! Doors judged by what they say, and real doors (`sh` standing in for ssh) that
//! fail every way a door can before answering.

use std::time::{Duration, Instant};

use super::{DoorError, Fix, diagnose, far_protocol, open};
use crate::config::HostConfig;

fn host(script: &str) -> HostConfig {
    HostConfig {
        command: vec!["sh".into(), "-c".into(), script.into()],
        install: None,
    }
}

#[test]
fn stderr_is_judged_into_a_fix() {
    let argv = vec!["ssh".to_owned(), "b1".to_owned()];
    let cases: &[(&str, Option<i32>, Fix)] = &[
        (
            "No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking.\nHost key verification failed.",
            Some(255),
            Fix::HostKeyUnknown { name: "b1".into() },
        ),
        (
            "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @",
            Some(255),
            Fix::HostKeyChanged {
                fingerprint: None,
                offending: None,
            },
        ),
        (
            // The tail of ssh's warning, its banner cut off.
            "SHA256:abcDEF.\nPlease contact your system administrator.\nOffending ED25519 key in /r/known_hosts:1\n\
             Host key for [127.0.0.1]:2222 has changed and you have requested strict checking.\nHost key verification failed.",
            Some(255),
            Fix::HostKeyChanged {
                fingerprint: Some("SHA256:abcDEF".into()),
                offending: Some("/r/known_hosts:1".into()),
            },
        ),
        (
            "herd: cannot check /var/lib/x/home: Permission denied (os error 13)",
            Some(2),
            Fix::PermissionDenied {
                path: Some("/var/lib/x/home".into()),
                line: "herd: cannot check /var/lib/x/home: Permission denied (os error 13)".into(),
            },
        ),
        (
            "sh: 1: cannot create /opt/bin/herd-shim.new: Permission denied",
            Some(1),
            Fix::PermissionDenied {
                path: Some("/opt/bin/herd-shim.new".into()),
                line: "sh: 1: cannot create /opt/bin/herd-shim.new: Permission denied".into(),
            },
        ),
        (
            "root@127.0.0.1: Permission denied (publickey,password).",
            Some(255),
            Fix::PasswordAsked,
        ),
        (
            "Permission denied, please try again.\nroot@127.0.0.1: Permission denied (publickey,password).",
            Some(255),
            Fix::PasswordAsked,
        ),
        (
            "bash: line 1: herd: command not found",
            Some(127),
            Fix::HerdMissing { name: "b1".into() },
        ),
        (
            "sh: 1: herd: not found",
            Some(127),
            Fix::HerdMissing { name: "b1".into() },
        ),
        ("", Some(127), Fix::HerdMissing { name: "b1".into() }),
        (
            "bash: line 1: /opt/herd: Permission denied",
            Some(126),
            Fix::HerdMissing { name: "b1".into() },
        ),
        (
            "setsid: failed to execute ssh: No such file or directory",
            Some(1),
            Fix::ProgramMissing {
                program: "ssh".into(),
            },
        ),
        (
            "ssh: connect to host 127.0.0.1 port 1: Connection refused",
            Some(255),
            Fix::NoRoute,
        ),
        (
            "something else entirely",
            Some(1),
            Fix::ByHand { argv: argv.clone() },
        ),
    ];
    for (stderr, code, want) in cases {
        assert_eq!(
            &diagnose("b1", &argv, stderr, *code),
            want,
            "for {stderr:?}"
        );
    }
}

#[test]
fn far_protocol_is_read_from_the_mismatch_message() {
    let message = "protocol version mismatch: the client (herd 0.1.0) speaks protocol 1, \
                   the daemon (herd 0.2.0) speaks protocol 2; run `herd shutdown`";
    assert_eq!(far_protocol(message, None), 2);
    assert_eq!(far_protocol("no number here", None), 0);
}

#[tokio::test]
async fn a_door_that_closes_quotes_its_stderr_and_fix() {
    let door = open(
        "b1",
        &host("echo 'root@h: Permission denied (publickey,password).' >&2; exit 255"),
        Duration::from_secs(15),
    )
    .await;
    let err = door.expect_err("the door closed");
    let text = err.to_string();
    assert!(matches!(err.fix(), Some(Fix::PasswordAsked)), "{text}");
    assert!(
        text.contains("Permission denied (publickey,password)"),
        "{text}"
    );
    assert!(text.contains("exit code 255"), "{text}");
    assert!(text.contains("BatchMode=yes"), "{text}");
}

#[tokio::test]
async fn a_door_that_never_answers_is_given_up_at_the_deadline() {
    let start = Instant::now();
    let door = open(
        "b1",
        &host("echo waiting for something >&2; exec sleep 600"),
        Duration::from_millis(500),
    )
    .await;
    let err = door.expect_err("the door never answered");
    assert!(matches!(err, DoorError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("waiting for something"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "took {:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn a_far_herd_of_another_protocol_is_refused_naming_both() {
    let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"protocol":7,"daemon":"9.9.9","pid":1,"home":"/far"}}"#;
    let door = open(
        "b1",
        &host(&format!("read line; echo '{answer}'; exec cat >/dev/null")),
        Duration::from_secs(15),
    )
    .await;
    let err = door.expect_err("protocol 7 is not ours");
    let text = err.to_string();
    assert!(
        matches!(err, DoorError::ProtocolMismatch { theirs: 7, .. }),
        "{text}"
    );
    assert!(
        text.contains("protocol 1") && text.contains("protocol 7"),
        "{text}"
    );
    assert!(
        text.contains("9.9.9") && text.contains(env!("CARGO_PKG_VERSION")),
        "{text}"
    );
}

#[tokio::test]
async fn a_door_that_prints_noise_is_not_herd() {
    let door = open(
        "b1",
        &host("read line; echo 'Welcome to build1!'; exec cat >/dev/null"),
        Duration::from_secs(15),
    )
    .await;
    let err = door.expect_err("a banner is not herd");
    assert!(matches!(err, DoorError::NotHerd { .. }), "{err}");
    assert!(err.to_string().contains("Welcome to build1!"), "{err}");
}

#[tokio::test]
async fn a_door_has_no_controlling_terminal_and_no_askpass() {
    // `ps -o tty=` prints `?` for a process without a controlling terminal.
    let door = open(
        "b1",
        &host("printf 'tty=%s askpass=%s display=%s sid=%s pid=%s\\n' \"$(ps -o tty= -p $$ | tr -d ' ')\" \"$SSH_ASKPASS_REQUIRE\" \"${DISPLAY-unset}\" \"$(ps -o sid= -p $$ | tr -d ' ')\" $$; exec cat >/dev/null"),
        Duration::from_secs(15),
    )
    .await;
    let err = door.expect_err("the report is not herd's answer");
    let DoorError::NotHerd { line, .. } = &err else {
        panic!("expected the door's report, got {err}");
    };
    assert!(
        line.starts_with("tty=? askpass=never display=unset"),
        "{line}"
    );
    let field = |key: &str| {
        line.split(' ')
            .find_map(|kv| kv.strip_prefix(key))
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(
        field("sid="),
        field("pid="),
        "the door leads its own session: {line}"
    );
}
