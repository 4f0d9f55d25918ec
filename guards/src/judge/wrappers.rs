//! Wrappers and runners: which commands only run another command (`sudo`, `env`,
//! `timeout`, `xargs`, `nohup`, …) and where in their arguments it starts, which take
//! text to run (`env -S`, `watch`, `su -c`, `flock -c`), and which read commands from
//! their stdin (shells, interpreters, PowerShell). Each wrapper's option table says which
//! options take a value, so a value is never taken for the inner command.

use crate::options::{Spec, parse};
use crate::rules::command_name;
use crate::shell::Word;

/// How a command consumes text it is fed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Runner {
    Shell,
    Code,
}

/// What a wrapper does with the rest of its command line.
pub(super) enum Step {
    /// The inner command starts at this index of the wrapper's arguments.
    Inner(usize),
    /// The wrapper runs this text through a shell.
    Text(String),
    /// Nothing runs (`command -v pkill`).
    Nothing,
    /// Not a wrapper.
    Final,
}

const SHELLS: [&str; 10] = [
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh", "fish",
];

pub(super) fn is_shell(name: &str) -> bool {
    SHELLS.contains(&name)
}

pub(super) fn is_code_interpreter(name: &str) -> bool {
    let family = crate::host::family(name);
    matches!(
        family.as_str(),
        "python"
            | "pypy"
            | "node"
            | "nodejs"
            | "deno"
            | "bun"
            | "perl"
            | "ruby"
            | "php"
            | "lua"
            | "osascript"
    )
}

const fn spec(short_values: &'static str, long_values: &'static [&'static str]) -> Spec {
    Spec {
        short_values,
        long_values,
        dash_signals: false,
        assignments: false,
    }
}

const SUDO: Spec = Spec {
    short_values: "ugCDhpRrtTU",
    long_values: &[
        "user",
        "group",
        "close-from",
        "chdir",
        "host",
        "prompt",
        "chroot",
        "role",
        "type",
        "command-timeout",
        "other-user",
    ],
    dash_signals: false,
    assignments: true,
};
const ENV: Spec = Spec {
    short_values: "uCSP",
    long_values: &["unset", "chdir", "split-string"],
    dash_signals: false,
    assignments: true,
};
const TIMEOUT: Spec = spec("sk", &["signal", "kill-after"]);
const NICE: Spec = spec("n", &["adjustment"]);
const IONICE: Spec = spec("cnp", &["class", "classdata", "pid"]);
const STDBUF: Spec = spec("ioe", &["input", "output", "error"]);
const TIME: Spec = spec("fo", &["format", "output"]);
const EXEC: Spec = spec("a", &[]);
const XARGS: Spec = spec(
    "adEIILnPs",
    &[
        "arg-file",
        "delimiter",
        "eof",
        "replace",
        "max-lines",
        "max-args",
        "max-procs",
        "max-chars",
        "process-slot-var",
    ],
);
const SYSTEMD_RUN: Spec = spec(
    "upEMHS",
    &[
        "unit",
        "property",
        "description",
        "slice",
        "setenv",
        "uid",
        "gid",
        "machine",
        "host",
        "working-directory",
        "on-calendar",
        "on-active",
        "on-boot",
        "on-startup",
        "on-unit-active",
        "on-unit-inactive",
        "nice",
        "service-type",
        "path-property",
        "socket-property",
        "timer-property",
    ],
);
const STRACE: Spec = spec(
    "oepsEuabIOPSX",
    &["output", "expr", "attach", "string-limit", "env", "user"],
);
const PKEXEC: Spec = spec("", &["user"]);
const WATCH: Spec = spec("nqd", &["interval", "differences", "equexit"]);
const SU: Spec = spec(
    "cgGsw",
    &[
        "command",
        "group",
        "supp-group",
        "shell",
        "whitelist-environment",
    ],
);
const FLOCK: Spec = spec("wEc", &["timeout", "conflict-exit-code", "command"]);
const SCRIPT: Spec = spec(
    "cEIOTBm",
    &[
        "command",
        "echo",
        "log-in",
        "log-out",
        "log-timing",
        "log-io",
    ],
);
const TASKSET: Spec = spec("", &[]);
const CHRT: Spec = spec("T", &["sched-runtime", "sched-deadline", "sched-period"]);
const CAFFEINATE: Spec = spec("tw", &[]);
const ENTR: Spec = spec("", &[]);
pub(super) const FIND: Spec = spec("", &[]);

/// One step of peeling a wrapper named `name` with arguments `args`.
pub(super) fn wrapper_step(name: &str, args: &[Word]) -> Step {
    let skip = |spec: &Spec, extra_positionals: usize| {
        let parsed = parse(args, spec, true);
        match parsed.first_positional_idx {
            Some(idx) => Step::Inner(idx + extra_positionals),
            None => Step::Nothing,
        }
    };
    match name {
        "sudo" | "doas" => {
            let parsed = parse(args, &SUDO, true);
            match parsed.first_positional_idx {
                Some(idx) => Step::Inner(idx),
                None => Step::Nothing,
            }
        }
        "env" => env_step(args),
        "nohup" | "builtin" | "unbuffer" | "then" | "do" | "else" | "busybox" | "rlwrap" => {
            skip(&spec("", &[]), 0)
        }
        "command" => {
            if args.iter().any(|w| matches!(w.value(), "-v" | "-V")) {
                return Step::Nothing;
            }
            skip(&spec("", &[]), 0)
        }
        "exec" => skip(&EXEC, 0),
        "time" => skip(&TIME, 0),
        "setsid" | "setpgid" => skip(&spec("", &[]), 0),
        "nice" => nice_step(args),
        "ionice" => skip(&IONICE, 0),
        "stdbuf" => skip(&STDBUF, 0),
        "timeout" | "gtimeout" => skip(&TIMEOUT, 1),
        "chrt" => skip(&CHRT, 1),
        "taskset" => {
            if args.iter().any(|w| matches!(w.value(), "-p" | "--pid")) {
                return Step::Nothing;
            }
            skip(&TASKSET, 1)
        }
        "caffeinate" => skip(&CAFFEINATE, 0),
        "xargs" => skip(&XARGS, 0),
        "systemd-run" => skip(&SYSTEMD_RUN, 0),
        "strace" | "ltrace" => skip(&STRACE, 0),
        "pkexec" => skip(&PKEXEC, 0),
        "gosu" | "su-exec" | "chroot" => skip(&spec("", &[]), 1),
        "entr" => skip(&ENTR, 0),
        "watch" => watch_step(args),
        "su" | "runuser" => su_step(name, args),
        "flock" => flock_step(args),
        "script" => {
            let parsed = parse(args, &SCRIPT, false);
            match parsed.values("c").chain(parsed.values("command")).next() {
                Some(command) => Step::Text(command.to_owned()),
                None => Step::Nothing,
            }
        }
        _ => Step::Final,
    }
}

/// `env [-S TEXT] [NAME=value…] cmd`: `-S` splits its text into the command line.
fn env_step(args: &[Word]) -> Step {
    let parsed = parse(args, &ENV, true);
    let split = parsed
        .values("S")
        .chain(parsed.values("split-string"))
        .next();
    if let Some(split) = split {
        let rest: Vec<&str> = parsed
            .first_positional_idx
            .and_then(|idx| args.get(idx..))
            .unwrap_or_default()
            .iter()
            .map(Word::value)
            .collect();
        return Step::Text(format!("{split} {}", rest.join(" ")));
    }
    match parsed.first_positional_idx {
        Some(idx) => Step::Inner(idx),
        None => Step::Nothing,
    }
}

/// `nice [-N | -n N] cmd`: `nice -10 cmd` is an adjustment, not an option cluster.
fn nice_step(args: &[Word]) -> Step {
    // `nice -10 cmd` is an adjustment, not an option cluster.
    let start = usize::from(args.first().is_some_and(|w| {
        w.value()
            .strip_prefix('-')
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
    }));
    match parse(args.get(start..).unwrap_or_default(), &NICE, true).first_positional_idx {
        Some(idx) => Step::Inner(idx + start),
        None => Step::Nothing,
    }
}

/// `watch cmd…` runs its arguments as shell text, `watch -x cmd…` as a command.
fn watch_step(args: &[Word]) -> Step {
    let parsed = parse(args, &WATCH, true);
    let Some(idx) = parsed.first_positional_idx else {
        return Step::Nothing;
    };
    if parsed.has("x") || parsed.has("exec") {
        return Step::Inner(idx);
    }
    let rest: Vec<&str> = args
        .get(idx..)
        .unwrap_or_default()
        .iter()
        .map(Word::value)
        .collect();
    Step::Text(rest.join(" "))
}

/// `su -c TEXT`, `runuser -c TEXT`, `runuser -u user -- cmd`.
fn su_step(name: &str, args: &[Word]) -> Step {
    let parsed = parse(args, &SU, false);
    match parsed.values("c").chain(parsed.values("command")).next() {
        Some(command) => Step::Text(command.to_owned()),
        None => {
            // `runuser -u user -- cmd`: what follows `--` runs.
            match args.iter().position(|w| w.value() == "--") {
                Some(idx) if name == "runuser" => Step::Inner(idx + 1),
                _ => Step::Nothing,
            }
        }
    }
}

/// `flock [-c TEXT] lock [-c TEXT | cmd…]`.
fn flock_step(args: &[Word]) -> Step {
    let parsed = parse(args, &FLOCK, true);
    if let Some(command) = parsed.values("c").chain(parsed.values("command")).next() {
        return Step::Text(command.to_owned());
    }
    match parsed.first_positional_idx {
        Some(idx) => {
            let rest = args.get(idx + 1..).unwrap_or_default();
            let inner = parse(rest, &FLOCK, false);
            match inner.values("c").chain(inner.values("command")).next() {
                Some(command) => Step::Text(command.to_owned()),
                None => Step::Inner(idx + 1),
            }
        }
        None => Step::Nothing,
    }
}

/// Peels wrappers off `words` without judging anything.
pub(super) fn peel(words: &[Word]) -> &[Word] {
    let mut words = words;
    while let Some(first) = words.first() {
        let args = words.get(1..).unwrap_or_default();
        match wrapper_step(&command_name(first.value()), args) {
            Step::Inner(idx) => words = args.get(idx..).unwrap_or_default(),
            _ => break,
        }
    }
    words
}

/// Whether `words` (peeled) read commands from stdin, and how.
pub(super) fn stdin_runner(words: &[Word]) -> Option<Runner> {
    let first = words.first()?;
    let name = command_name(first.value());
    let args = words.get(1..).unwrap_or_default();
    if is_shell(&name) {
        let (command_string, script, _) = shell_args(args);
        return (command_string.is_none() && script.is_none()).then_some(Runner::Shell);
    }
    if is_code_interpreter(&name) {
        let reads_stdin = args
            .iter()
            .all(|w| w.value().starts_with('-') && w.value() != "-c" && w.value() != "-e")
            || args.iter().any(|w| w.value() == "-");
        return reads_stdin.then_some(Runner::Code);
    }
    if matches!(name.as_str(), "powershell" | "pwsh") {
        return Some(Runner::Shell);
    }
    None
}

/// A shell's arguments: the `-c` command string, the script path, and the index after them.
pub(super) fn shell_args(args: &[Word]) -> (Option<&Word>, Option<&Word>, usize) {
    let mut idx = 0;
    let mut has_c = false;
    let mut reads_stdin = false;
    while let Some(word) = args.get(idx) {
        let arg = word.value();
        if arg == "--" || arg == "-" {
            idx += 1;
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            idx += if matches!(long, "rcfile" | "init-file") {
                2
            } else {
                1
            };
            continue;
        }
        if let Some(cluster) = arg.strip_prefix(['-', '+']) {
            if cluster.is_empty() {
                break;
            }
            has_c |= cluster.contains('c');
            reads_stdin |= cluster.contains('s');
            idx += 1;
            if cluster.ends_with(['o', 'O']) {
                idx += 1;
            }
            continue;
        }
        break;
    }
    let positional = args.get(idx);
    if has_c {
        (positional, None, idx + 1)
    } else if reads_stdin {
        (None, None, idx)
    } else {
        (None, positional, idx + 1)
    }
}
