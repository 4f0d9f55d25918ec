//! herd: the binary — daemon, client commands and MCP server.
//!
//! `main` parses the command line, installs the tracing subscriber (stderr; the
//! autostarted daemon's stderr is `<home>/logs/daemon.log`), runs the command and
//! maps its result to the documented exit codes: 0 ok, 1 the job failed or the
//! guard blocked, 2 usage / not found / bad config, 3 daemon unreachable. A broken
//! stdout pipe ends the process quietly with 0.

mod args;
mod attach;
mod auxiliary;
mod client;
mod commands;
mod complete;
mod config;
mod daemon;
mod daemon_log;
mod doctor;
mod exit;
mod guard;
mod logframes;
mod mcp;
mod output;
mod plugins;
mod proctitle;
mod protocol;
mod remote;
mod restart;
mod service;
mod sizes;
mod sys;
mod top;

use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, Parser};

use crate::args::{Cli, Command, GuardCommand};
use crate::exit::{Code, code_of, is_broken_pipe};

fn main() -> ExitCode {
    complete::answer_the_shell(<Cli as CommandFactory>::command);
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            if let Some(hint) = verb_hint(&err) {
                output::err_line(&hint);
                return Code::Usage.into();
            }
            let _ = err.print();
            return if err.use_stderr() {
                Code::Usage.into()
            } else {
                Code::Ok.into()
            };
        }
    };
    init_tracing(matches!(cli.command, Command::Serve(_)));
    if matches!(cli.command, Command::Run(_)) {
        // A job's `pkill -f` of its own command must not find this client.
        proctitle::hide_arguments(&["run"]);
    }
    match run(cli) {
        Ok(()) => Code::Ok.into(),
        Err(err) if is_broken_pipe(&err) => Code::Ok.into(),
        Err(err) => {
            let message = format!("{err:#}");
            if !message.is_empty() {
                output::err_line(&format!("herd: {message}"));
            }
            code_of(&err).into()
        }
    }
}

/// A hint for a verb people reach for that herd spells differently: `stop` and
/// `rm` mean `kill` (clap would suggest `shutdown`, which kills every job).
fn verb_hint(err: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if err.kind() != ErrorKind::InvalidSubcommand {
        return None;
    }
    let Some(ContextValue::String(verb)) = err.get(ContextKind::InvalidSubcommand) else {
        return None;
    };
    let hint = match verb.as_str() {
        "stop" | "rm" | "terminate" => {
            "to stop a job, use `herd kill ID` (its whole process tree); `herd shutdown` stops the daemon and every job"
        }
        "start" | "exec" | "spawn" => "to start a job, use `herd run -- CMD`",
        "list" | "ls" | "status" => {
            "to list jobs, use `herd ps` (`herd ps --all` for finished ones and every owner)"
        }
        "tail" | "log" | "output" => {
            "to read a job's output, use `herd logs ID` (`-n N -f` follows like tail)"
        }
        _ => return None,
    };
    Some(format!("error: herd has no `{verb}` command; {hint}"))
}

/// Installs the stderr subscriber; `HERD_LOG` overrides the level.
fn init_tracing(daemon: bool) {
    let default = if daemon { "info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("HERD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    if daemon {
        // The daemon's writer never fails and never panics (a full disk), and
        // rotates daemon.log once `serve` knows the home (`daemon_log.rs`).
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(daemon_log::Writer)
            .with_ansi(false)
            .with_target(true)
            .log_internal_errors(false)
            .try_init();
        return;
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .log_internal_errors(false)
        .try_init();
}

/// A current-thread runtime for client commands (quick to start, one connection).
fn client_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")
}

/// `herd man`: one page on stdout, or every page into a directory.
fn man(args: &args::ManArgs) -> anyhow::Result<()> {
    let mut root = Cli::command().disable_help_subcommand(true);
    root.build();
    if let Some(dir) = &args.dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        clap_mangen::generate_to(root, dir)
            .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
        output::line(&format!("wrote the man pages into {}", dir.display()))?;
        return Ok(());
    }
    let mut page = root;
    for name in &args.subcommand {
        let Some(sub) = page.find_subcommand(name).cloned() else {
            let known: Vec<&str> = page
                .get_subcommands()
                .map(clap::Command::get_name)
                .collect();
            return Err(exit::Failure::new(
                Code::Usage,
                format!(
                    "no man page for `{name}`: `{}` has {}",
                    page.get_bin_name().unwrap_or(page.get_name()),
                    known.join(", ")
                ),
            )
            .into());
        };
        page = sub;
    }
    let mut buf = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut buf)
        .context("failed to render the man page")?;
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) && page_with_man(&buf)? {
        return Ok(());
    }
    output::raw(&String::from_utf8_lossy(&buf))?;
    Ok(())
}

/// Shows the roff page `roff` as `man` does on a terminal (`man -l -`, through
/// `$MANPAGER` or `$PAGER`); false when there is no `man` to show it (the roff
/// is then printed as it is).
fn page_with_man(roff: &[u8]) -> anyhow::Result<bool> {
    use std::io::Write;
    let mut man = match auxiliary::command("man")
        .args(["-l", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(err) => return Err(err).context("cannot run `man -l -` to show the page"),
    };
    if let Some(mut stdin) = man.stdin.take() {
        // A pager quit early closes the pipe: nothing more to show.
        let _ = stdin.write_all(roff);
    }
    let status = man.wait().context("`man -l -` failed")?;
    if !status.success() {
        anyhow::bail!("`man -l -` ended with {status}");
    }
    Ok(true)
}

/// Runs one command.
fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Completions(args) => {
            output::raw(&complete::registration(args.shell)?)?;
            Ok(())
        }
        Command::Man(args) => man(&args),
        command => {
            let home = config::resolve_home()?;
            let depth = if matches!(command, Command::Serve(_)) {
                config::HomeCheck::Deep
            } else {
                config::HomeCheck::Shallow
            };
            config::check_home_ownership(&home, depth)?;
            match command {
                Command::Serve(args) => daemon::serve(&home, args.detached),
                Command::Guard(args) => {
                    let config = config::Config::load(&home)?;
                    match args.command {
                        GuardCommand::Check(check) => guard::check(&check, &config),
                    }
                }
                Command::Plugins(args) => {
                    let config = config::Config::load(&home)?;
                    plugins::run(&home, &config, &args.command)
                }
                Command::Service(args) => service::run(&home, &args.command),
                Command::Top(args) => top::run(&home, args),
                Command::Attach(args) => attach::run(&home, args),
                Command::Proxy(args) => remote::proxy(&home, args),
                Command::Mcp(args) => mcp::serve(
                    home,
                    Some(args.owner.resolve("")).filter(|o| !o.is_empty()),
                    args.parent.filter(|p| !p.trim().is_empty()),
                ),
                command => client_runtime()?.block_on(client_command(home, command)),
            }
        }
    }
}

/// Runs a command that talks to the daemon.
async fn client_command(home: herd_persistence::Home, command: Command) -> anyhow::Result<()> {
    match command {
        Command::Run(args) => match commands::run(&home, *args).await? {
            commands::Ran::Done => Ok(()),
            // `run --pty --wait` on a terminal.
            commands::Ran::Attach(id) => attach::started(&home, &id).await,
        },
        Command::Ps(args) => commands::ps(&home, args).await,
        Command::Poll(args) => commands::poll(&home, args).await,
        Command::Logs(args) => commands::logs(&home, args).await,
        Command::Wait(args) => commands::wait(&home, args).await,
        Command::Kill(args) => commands::kill(&home, args).await,
        Command::Clean(args) => commands::clean(&home, args).await,
        Command::Send(args) => commands::stdin(&home, args, "write").await,
        Command::Submit(args) => commands::stdin(&home, args, "submit").await,
        Command::Close(args) => commands::close(&home, args).await,
        Command::Events(args) => commands::events(&home, args).await,
        Command::Handoff(args) => commands::handoff(&home, args).await,
        Command::Group(args) => commands::group(&home, args).await,
        Command::Restart(args) => restart::run(&home, args).await,
        Command::Hosts(args) => remote::hosts(&home, args).await,
        Command::Doctor(args) => doctor::run(&home, args.json).await,
        Command::Shutdown(args) => {
            commands::shutdown(&home, args.json, args.keep_jobs, args.yes).await
        }
        Command::Resize(args) => commands::resize(&home, args).await,
        Command::Completions(_)
        | Command::Man(_)
        | Command::Serve(_)
        | Command::Guard(_)
        | Command::Plugins(_)
        | Command::Service(_)
        | Command::Top(_)
        | Command::Attach(_)
        | Command::Proxy(_)
        | Command::Mcp(_) => unreachable!("handled before connecting"),
    }
}
