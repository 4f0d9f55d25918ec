//! `herd-guards` alone: would this command line kill the host?
//!
//! A host that runs commands for an agent asks the guard before running each one.
//! The guard executes nothing: it parses the line the way bash would and names the
//! rule and the remedy when it refuses. This example judges a few lines against a
//! described host (a Python agent) and any lines given as arguments against this
//! process itself ([`Host::current`]), reading scripts they refer to from the
//! current directory through [`FsScriptReader`].
//!
//! Needs: `herd-guards` only (no features, no runtime).
//! Run it with `cargo run -p herd-guards --example judge -- 'pkill -f judge' 'ls'`.
#![allow(
    clippy::print_stdout,
    reason = "an example shows its results on stdout; a real host returns the verdict to its caller"
)]

use herd_guards::{FsScriptReader, Host, Verdict, judge, judge_with};

fn show(command: &str, verdict: &Verdict) {
    match verdict {
        Verdict::Allow => println!("allow   {command}"),
        Verdict::Block(block) => println!("refuse  {command}\n        {block}"),
    }
}

fn main() -> std::io::Result<()> {
    // A host described by hand: the images that must not die and its command line.
    let agent = Host::new(vec!["python".into()], "python -m agent.main");
    for command in [
        "pkill -9 python3",
        "pkill -f 'python my_script.py'",
        "make test && killall python",
        "grep 'pkill python' notes.txt",
        "kill 4242",
    ] {
        show(command, &judge(command, &agent));
    }

    // This process, as the guard sees it, with scripts read from the working directory.
    let host = Host::current();
    let scripts = FsScriptReader::new(std::env::current_dir()?);
    for command in std::env::args().skip(1) {
        show(&command, &judge_with(&command, &host, &scripts));
    }
    Ok(())
}
