//! Unit tests of the command-line grammar.

use clap::{CommandFactory, Parser};

use super::{Cli, Command};

#[test]
fn cli_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn run_keeps_every_argument_after_double_dash() {
    let cli = Cli::try_parse_from([
        "herd",
        "run",
        "--json",
        "--",
        "bash",
        "-c",
        "echo a; echo b",
    ])
    .expect("valid command line");
    let Command::Run(run) = cli.command else {
        panic!("parsed as another command");
    };
    assert!(run.json);
    assert_eq!(run.command, ["bash", "-c", "echo a; echo b"]);
}

// A mistyped option before the command is refused with clap's
// suggestion (exit 2), never taken as the command; after the command's first
// word, or after `--`, anything goes to the job.
#[test]
fn run_refuses_an_unknown_option_before_the_command() {
    for typo in [
        ["--nmae", "web", "--", "sleep", "5"],
        ["--tim-limit", "5s", "--", "sleep", "5"],
    ] {
        let err = Cli::try_parse_from(["herd", "run"].into_iter().chain(typo))
            .expect_err("an unknown option is refused");
        assert_eq!(err.exit_code(), 2, "{err}");
        assert!(
            err.to_string().contains("a similar argument exists"),
            "{err}"
        );
    }
    let err = Cli::try_parse_from(["herd", "run", "-q", "true"]).expect_err("no -q");
    assert_eq!(err.exit_code(), 2, "{err}");
    for (line, command) in [
        (vec!["--json", "--", "--weird", "-x"], vec!["--weird", "-x"]),
        (
            vec!["--pty", "ls", "-l", "--json"],
            vec!["ls", "-l", "--json"],
        ),
        (vec!["echo", "--nmae", "--"], vec!["echo", "--nmae", "--"]),
    ] {
        let cli = Cli::try_parse_from(["herd", "run"].into_iter().chain(line.clone()))
            .unwrap_or_else(|e| panic!("{line:?}: {e}"));
        let Command::Run(run) = cli.command else {
            panic!("parsed as another command");
        };
        assert_eq!(run.command, command, "{line:?}");
    }
}

#[test]
fn run_rejects_a_malformed_env_pair() {
    let err = Cli::try_parse_from(["herd", "run", "--env", "NOEQUALS", "--", "true"])
        .expect_err("K=V is required");
    assert!(err.to_string().contains("expected K=V"), "{err}");
}

#[test]
fn wait_rejects_a_non_positive_timeout() {
    let err = Cli::try_parse_from(["herd", "wait", "proc_abc", "--timeout", "0"])
        .expect_err("zero timeout is invalid");
    assert!(
        err.to_string().contains("timeout must be positive"),
        "{err}"
    );
}
