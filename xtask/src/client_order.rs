//! `cargo xtask client-order [--check]`: writes `cli/link/client-order.txt`, the
//! functions the short client commands run, which `cli/build.rs` hands to the
//! linker so it places them together at the front of `herd`'s text.
//!
//! Every `herd` command is a new process whose code is paged in from the binary on
//! first touch. The few hundred functions a client runs are otherwise spread over
//! the whole 20 MB text, so each lands on its own page and costs a fault; packed
//! together they share a few dozen. The list is taken, not guessed: each client
//! command below runs once under callgrind against a daemon of a temporary home,
//! and every function it entered that the binary defines is kept.
//!
//! The names carry hashes of the build that made them (the toolchain, `Cargo.lock`,
//! each crate's features and profile), so the list is taken from every build of
//! `herd` that gets shipped or measured: `cargo build --release -p herd-cli` (what
//! `cargo install` builds), the release tarball's build (`cargo xtask release`,
//! with the example plugin, whose features unified with herd's rename some
//! functions) and `cargo bench` (the benches' dependencies unified in, which
//! renames most; what `cargo xtask bench` measures). A name a binary does not have is skipped by the
//! linker; `--check` says how much of the list the release binary still has, so a
//! stale list shows before it costs.
//!
//! Needs `valgrind` and `nm` (binutils).

use anyhow::{Context, Result, bail, ensure};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::shell;

/// Where the list is kept, from the workspace root.
const LIST: &str = "cli/link/client-order.txt";

/// The builds whose names the list holds: what each is called and the cargo
/// arguments that build it (each leaves `herd` in the target's `release`).
const BUILDS: [(&str, &[&str]); 3] = [
    (
        "release",
        &["build", "--quiet", "--release", "-p", "herd-cli"],
    ),
    (
        "dist",
        &[
            "build",
            "--quiet",
            "--release",
            "-p",
            "herd-cli",
            "-p",
            "herd-plugin-example",
        ],
    ),
    ("bench", &["bench", "--quiet", "--no-run", "-p", "herd-cli"]),
];

/// The client commands run under callgrind (`{id}` is a finished session's id).
const COMMANDS: &[&[&str]] = &[
    &["--version"],
    &["run", "--notify", "--", "true"],
    &["run", "--wait", "--", "true"],
    &["wait", "{id}"],
    &["poll", "{id}"],
    &["logs", "{id}"],
    &["ps"],
    &["ps", "--json"],
    &["events"],
    &["kill", "{id}"],
];

/// The list's first lines (the linker skips a line that starts with `#`).
const HEADER: &str = "# The functions herd's short client commands run, placed together at the front of\n# the binary's text by the linker (cli/build.rs). Written by `cargo xtask client-order`;\n# run it again after a toolchain or dependency update (`--check` says how stale it is).\n";

pub(crate) fn run(args: &[String]) -> Result<()> {
    match args {
        [] => write_list(),
        [flag] if flag == "--check" => check(),
        _ => bail!("usage: cargo xtask client-order [--check]"),
    }
}

/// Makes each build, takes its client functions, and writes the union.
fn write_list() -> Result<()> {
    for tool in ["valgrind", "nm"] {
        shell::output(shell::command(tool).arg("--version")).with_context(|| {
            format!("`{tool}` is needed to take the client's functions; install it (Debian: apt-get install valgrind binutils)")
        })?;
    }
    let scratch = Scratch::new()?;
    let mut names = BTreeSet::new();
    let mut counts = Vec::new();
    for (build, cargo_args) in BUILDS {
        shell::cargo(cargo_args)?;
        let built = shell::target_dir()?.join("release");
        let bin = scratch.0.join(format!("bin-{build}"));
        std::fs::create_dir_all(&bin)?;
        for name in ["herd", "herd-shim"] {
            std::fs::copy(built.join(name), bin.join(name))
                .with_context(|| format!("cannot copy the {build} build's {name}"))?;
        }
        let herd = bin.join("herd");
        let ran = functions_run(&herd, &scratch.0.join(format!("home-{build}")))?;
        let defined = defined_functions(&herd)?;
        let kept: BTreeSet<String> = ran.intersection(&defined).cloned().collect();
        shell::say(&format!(
            "{build}: the client commands ran {} functions of herd's own",
            kept.len()
        ));
        ensure!(
            kept.len() > 100,
            "only {} functions were taken from the {build} build; callgrind did not see the client run",
            kept.len()
        );
        counts.push(format!("{build} {}", kept.len()));
        names.extend(kept);
    }
    let mut text = String::from(HEADER);
    text.push_str(&format!("{TAKEN}{}\n", counts.join(", ")));
    for name in &names {
        text.push_str(name);
        text.push('\n');
    }
    let tmp = PathBuf::from(format!("{LIST}.tmp"));
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, LIST).with_context(|| format!("cannot replace {LIST}"))?;
    shell::say(&format!("wrote {LIST}: {} names", names.len()));
    Ok(())
}

/// How many names of the list the release build's `herd` has, against how many
/// it had when the list was taken.
fn check() -> Result<()> {
    shell::cargo(BUILDS[0].1)?;
    let herd = shell::target_dir()?.join("release/herd");
    let defined = defined_functions(&herd)?;
    let text = std::fs::read_to_string(LIST).with_context(|| format!("cannot read {LIST}"))?;
    let found = names_of(&text).filter(|n| defined.contains(*n)).count();
    let taken = taken_from(&text, BUILDS[0].0).with_context(|| {
        format!("{LIST} does not say how many names it took from each build (a `{TAKEN}` line): run `cargo xtask client-order`")
    })?;
    shell::say(&format!(
        "{found} of the {taken} names taken from the release build are in {}",
        herd.display()
    ));
    // The names LLVM gives functions it promotes across codegen units
    // (`….llvm.<hash>`, about a fifth) change with the build's directory and the
    // code around them; the rest only with the toolchain, `Cargo.lock` and features.
    ensure!(
        found * 4 >= taken * 3,
        "the list is stale (the release binary has fewer than 3 in 4 of its names): run `cargo xtask client-order`"
    );
    Ok(())
}

/// The comment line that says how many names each build gave.
const TAKEN: &str = "# taken: ";

/// How many names the list took from `build`, from its `TAKEN` line.
fn taken_from(text: &str, build: &str) -> Option<usize> {
    let line = text.lines().find_map(|line| line.strip_prefix(TAKEN))?;
    line.split(", ").find_map(|part| {
        let (name, count) = part.split_once(' ')?;
        (name == build).then(|| count.trim().parse().ok()).flatten()
    })
}

/// The names of a list, without its comment lines (`#` first, as the linker reads
/// them) and blank lines.
fn names_of(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
}

/// Every function the client commands entered, run under callgrind against a
/// daemon of a fresh home at `home`.
fn functions_run(herd: &Path, home: &Path) -> Result<BTreeSet<String>> {
    std::fs::create_dir_all(home)?;
    let herd_cmd = |args: &[&str]| {
        let mut cmd = shell::command(&herd.to_string_lossy());
        cmd.args(args).env("HERD_HOME", home);
        cmd
    };
    // The daemon first, outside callgrind; then a session the commands can name.
    shell::output(&mut herd_cmd(&["ps"]))
        .context("the daemon of the scratch home did not start")?;
    let id = shell::output(&mut herd_cmd(&["run", "--", "true"]))?
        .trim()
        .to_owned();
    shell::output(&mut herd_cmd(&["wait", &id]))?;
    let mut names = BTreeSet::new();
    let result = (|| {
        for (n, args) in COMMANDS.iter().enumerate() {
            let args: Vec<&str> = args
                .iter()
                .map(|a| if *a == "{id}" { id.as_str() } else { a })
                .collect();
            let out = home.join(format!("callgrind.{n}"));
            let mut cmd = shell::command("valgrind");
            cmd.arg("--tool=callgrind")
                .arg("--demangle=no")
                .arg(format!("--callgrind-out-file={}", out.display()))
                .arg(herd)
                .args(&args)
                .env("HERD_HOME", home);
            // A command that answers non-zero (a kill of a finished session) still ran
            // the client's code; only a run that wrote no profile is a failure.
            let _ = cmd.output().context("cannot start valgrind")?;
            let text = std::fs::read_to_string(&out).with_context(|| {
                format!("callgrind wrote no profile of `herd {}`", args.join(" "))
            })?;
            names.extend(callgrind_functions(&text));
        }
        Ok::<_, anyhow::Error>(())
    })();
    let _ = herd_cmd(&["shutdown", "--yes"]).output();
    result?;
    Ok(names)
}

/// The function names a callgrind profile names (`fn=(N) name`, `cfn=(N) name`).
fn callgrind_functions(text: &str) -> impl Iterator<Item = String> + '_ {
    text.lines().filter_map(|line| {
        let rest = line
            .strip_prefix("fn=(")
            .or_else(|| line.strip_prefix("cfn=("))?;
        let (_, name) = rest.split_once(") ")?;
        Some(name.trim().to_owned())
    })
}

/// The functions `binary` defines (text symbols, as `nm` names them).
fn defined_functions(binary: &Path) -> Result<BTreeSet<String>> {
    let out = shell::output(shell::command("nm").arg("--defined-only").arg(binary))?;
    Ok(out
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (_, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
            matches!(kind, "t" | "T" | "w" | "W").then(|| name.to_owned())
        })
        .collect())
}

/// A scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch> {
        let dir = std::env::temp_dir().join(format!("herd-client-order-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot make {}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callgrind_names_are_taken_from_fn_and_cfn_lines() {
        let text = "fl=(1) x.rs\nfn=(2) _ZN4herd4main17h0123456789abcdefE\ncalls=1 0\ncfn=(3) _RNvCs1_4core3foo\nfn=(2)\n0 5\n";
        let names: Vec<String> = callgrind_functions(text).collect();
        assert_eq!(
            names,
            ["_ZN4herd4main17h0123456789abcdefE", "_RNvCs1_4core3foo"]
        );
    }

    #[test]
    fn the_taken_line_gives_each_builds_count() {
        let text = "# header\n# taken: release 913, bench 921\n_ZN1a1bE\n";
        assert_eq!(taken_from(text, "release"), Some(913));
        assert_eq!(taken_from(text, "bench"), Some(921));
        assert_eq!(taken_from(text, "debug"), None);
        assert_eq!(taken_from("_ZN1a1bE\n", "release"), None);
    }

    #[test]
    fn a_list_reads_without_its_comments() {
        let text = "# header\n\n_ZN1a1bE\n  _ZN1c1dE  \n";
        assert_eq!(names_of(text).collect::<Vec<_>>(), ["_ZN1a1bE", "_ZN1c1dE"]);
    }
}
