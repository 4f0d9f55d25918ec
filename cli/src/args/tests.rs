//! Unit tests of the command-line grammar.

use clap::{CommandFactory, Parser};

use super::{Cli, Command};

#[test]
fn cli_definition_is_consistent() {
    Cli::command().debug_assert();
}

/// Each subcommand's arguments are defined when it is invoked (`defer`), after its
/// variant's doc comment set its help: a doc comment on an `Args` struct or a nested
/// subcommand enum would then replace that help. Every subcommand's help stays the
/// one its variant gives.
#[test]
fn a_deferred_subcommand_keeps_its_variants_help() {
    let root = Cli::command();
    let before: Vec<_> = root
        .get_subcommands()
        .map(|c| {
            (
                c.get_name().to_owned(),
                c.get_about().map(ToString::to_string),
                c.get_long_about().map(ToString::to_string),
            )
        })
        .collect();
    let mut built = root.clone();
    built.build();
    let mut checked = 0;
    for (name, about, long_about) in before {
        let Some(sub) = built.find_subcommand(&name) else {
            panic!("{name} is gone once built");
        };
        assert!(
            sub.get_arguments().next().is_some(),
            "{name} has its arguments once built"
        );
        assert_eq!(
            sub.get_about().map(ToString::to_string),
            about,
            "{name}'s about"
        );
        assert_eq!(
            sub.get_long_about().map(ToString::to_string),
            long_about,
            "{name}'s long about"
        );
        checked += 1;
    }
    assert!(checked > 20, "only {checked} subcommands");
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
