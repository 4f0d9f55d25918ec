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
