//! The per-command rules: given one simple command (its name and argument words, wrappers
//! already peeled off), would it kill the host?
//!
//! Options are parsed per tool, so an option's value is never read as a target
//! (`pkill -u python node` targets `node`; `killall -s python` names no process). Each
//! tool's table lists the options that take a value; anything else starting with `-` is a
//! flag. Signal spellings (`-9`, `-KILL`, `-SIGKILL`, `-s KILL`, `--signal=KILL`) are flags
//! here: which signal is sent does not change what dies. The parsing itself is
//! the `options` module.

use regex::RegexBuilder;

use crate::host::{Host, glob_match, image_key, names_host_file};
use crate::options::{Spec, parse};
use crate::shell::Word;
use crate::verdict::{Block, Rule};

/// Patterns longer than this are matched as literal text instead of compiled.
const MAX_PATTERN_BYTES: usize = 4096;

const PKILL: Spec = Spec {
    short_values: "dgGPstuUFOrqT",
    long_values: &[
        "signal",
        "delimiter",
        "pgroup",
        "group",
        "parent",
        "session",
        "terminal",
        "euid",
        "uid",
        "pidfile",
        "ns",
        "nslist",
        "runstates",
        "queue",
        "cgroup",
        "older",
        "env",
    ],
    dash_signals: true,
    assignments: false,
};

const KILLALL: Spec = Spec {
    short_values: "sunoyZct",
    long_values: &[
        "signal",
        "user",
        "ns",
        "older-than",
        "younger-than",
        "context",
    ],
    dash_signals: true,
    assignments: false,
};

const PIDOF: Spec = Spec {
    short_values: "oSd",
    long_values: &[],
    dash_signals: false,
    assignments: false,
};

const SYSTEMCTL: Spec = Spec {
    short_values: "HMtspnoT",
    long_values: &[
        "host",
        "machine",
        "type",
        "signal",
        "property",
        "state",
        "job-mode",
        "root",
        "image",
        "lines",
        "output",
        "kill-whom",
        "kill-value",
        "what",
        "message",
        "when",
        "drop-in",
        "boot-loader-entry",
        "reboot-argument",
    ],
    dash_signals: false,
    assignments: false,
};

const FLAGS_ONLY: Spec = Spec {
    short_values: "",
    long_values: &[],
    dash_signals: false,
    assignments: false,
};

fn block(rule: Rule, target: String, reason: String) -> Option<Block> {
    Some(Block::new(rule, target, reason))
}

/// A compiled name pattern (`pkill`/`pgrep` ERE, `killall -r`), with a literal fallback for
/// patterns the regex engine refuses or that are too large to compile.
pub(crate) struct Pattern {
    regex: Option<regex::Regex>,
    literal: String,
    exact: bool,
    /// Whether the literal fallback compares case-sensitively (plain patterns, as pkill
    /// does); a pattern the regex engine refused is compared case-insensitively, to err
    /// towards blocking.
    case_sensitive: bool,
}

impl Pattern {
    pub(crate) fn new(pattern: &str, exact: bool, ignore_case: bool) -> Pattern {
        // Most patterns are plain names; matching them needs no regex engine.
        let plain = !pattern.contains(|c: char| "\\^$.|?*+()[]{}".contains(c));
        if plain && !ignore_case {
            return Pattern {
                regex: None,
                literal: pattern.to_owned(),
                exact,
                case_sensitive: true,
            };
        }
        let regex = (pattern.len() <= MAX_PATTERN_BYTES)
            .then(|| {
                let source = if exact {
                    format!("^(?:{pattern})$")
                } else {
                    pattern.to_owned()
                };
                RegexBuilder::new(&source)
                    .case_insensitive(ignore_case)
                    .size_limit(1 << 20)
                    .dfa_size_limit(1 << 20)
                    .nest_limit(64)
                    .build()
                    .ok()
            })
            .flatten();
        // If the engine refuses the pattern, compare its plain characters: an unknown
        // regex dialect must not hide a host name.
        let literal: String = pattern
            .chars()
            .filter(|c| !"\\^$.|?*+()[]{}".contains(*c))
            .collect();
        Pattern {
            regex,
            literal: literal.to_lowercase(),
            exact,
            case_sensitive: false,
        }
    }

    pub(crate) fn matches(&self, subject: &str) -> bool {
        match &self.regex {
            Some(regex) => regex.is_match(subject),
            None if self.case_sensitive && self.exact => subject == self.literal,
            None if self.case_sensitive => subject.contains(&self.literal),
            None if self.exact => subject.eq_ignore_ascii_case(&self.literal),
            None => subject.to_lowercase().contains(&self.literal),
        }
    }
}

/// `pkill`/`pgrep` options and patterns, judged against the host. Returns the rule and a
/// description of what the pattern selects, when that includes the host.
pub(crate) fn pgrep_target(args: &[Word], host: &Host) -> Option<(Rule, String)> {
    let parsed = parse(args, &PKILL, false);
    let full = parsed.has("f") || parsed.has("full");
    let exact = parsed.has("x") || parsed.has("exact");
    let ignore_case = parsed.has("i") || parsed.has("ignore-case");
    if parsed.has("v") || parsed.has("inverse") {
        return Some((
            Rule::KillEveryone,
            "every process except the ones the pattern names, the host among them".to_owned(),
        ));
    }
    if parsed.positionals.is_empty() {
        for pidfile in parsed.values("F").chain(parsed.values("pidfile")) {
            if let Some(name) = names_host_file(host, pidfile) {
                return Some((
                    Rule::KillHostPids,
                    format!("the process in pid file {pidfile} (the host {name})"),
                ));
            }
        }
        let selectors = [
            "u", "U", "G", "g", "s", "t", "euid", "uid", "group", "session",
        ];
        if let Some(selector) = selectors.iter().find(|s| parsed.has(s)) {
            return Some((
                Rule::KillEveryone,
                format!("every process selected by -{selector} alone, the host included"),
            ));
        }
        return None;
    }
    for word in &parsed.positionals {
        for pattern_text in &word.values {
            if word.dynamic && pattern_text.starts_with('$') {
                continue;
            }
            let pattern = Pattern::new(pattern_text, exact, ignore_case);
            if full && !host.cmdline().is_empty() {
                if pattern.matches(host.cmdline()) {
                    return Some((
                        Rule::KillByCmdline,
                        format!(
                            "every process whose command line matches '{pattern_text}', \
                             which the host's own command line does"
                        ),
                    ));
                }
                continue;
            }
            if let Some(image) = host.image_matching(&mut |name| pattern.matches(name)) {
                let rule = if full {
                    Rule::KillByCmdline
                } else {
                    Rule::KillByName
                };
                return Some((
                    rule,
                    format!(
                        "every process matching '{pattern_text}', the host image {image} among them"
                    ),
                ));
            }
        }
    }
    None
}

/// `killall` (psmisc and BSD spellings).
fn killall(args: &[Word], host: &Host) -> Option<Block> {
    let parsed = parse(args, &KILLALL, false);
    let regex = parsed.has("r") || parsed.has("regexp") || parsed.has("m");
    let ignore_case = parsed.has("I") || parsed.has("ignore-case");
    let names: Vec<&str> = parsed
        .positionals
        .iter()
        .flat_map(|w| w.values.iter().map(String::as_str))
        .chain(parsed.values("c"))
        .collect();
    if names.is_empty() {
        if parsed.has("u") || parsed.has("user") {
            return block(
                Rule::KillEveryone,
                "every process of the user, the host included".to_owned(),
                "`killall -u` without a process name kills every process the user owns".to_owned(),
            );
        }
        return None;
    }
    for name in names {
        let hit = if regex {
            let pattern = Pattern::new(name, false, ignore_case);
            host.image_matching(&mut |sample| pattern.matches(sample))
        } else {
            host.image_named(name)
        };
        if let Some(image) = hit {
            return kill_by_name("killall", name, image);
        }
    }
    None
}

fn kill_by_name(tool: &str, name: &str, image: &str) -> Option<Block> {
    block(
        Rule::KillByName,
        format!("every process named {name}, the host image {image} among them"),
        format!(
            "`{tool}` kills every process whose image matches {name}, and the host running this \
             command is a {image} process"
        ),
    )
}

/// `pidof` names, as a PID source.
pub(crate) fn pidof_target(args: &[Word], host: &Host) -> Option<String> {
    let parsed = parse(args, &PIDOF, false);
    parsed
        .positionals
        .iter()
        .flat_map(|w| w.values.iter())
        .find_map(|name| {
            host.image_named(name).map(|image| {
                format!("the processes `pidof {name}` lists, the host image {image} among them")
            })
        })
}

/// Windows `taskkill`.
fn taskkill(args: &[Word], host: &Host) -> Option<Block> {
    let mut images = Vec::new();
    let mut filters = Vec::new();
    let mut has_pid = false;
    let mut iter = args.iter().map(Word::value);
    while let Some(arg) = iter.next() {
        let lower = arg.to_lowercase();
        let (flag, inline) = match lower.split_once(':') {
            Some((flag, _)) if flag.starts_with(['/', '-']) => (
                flag.to_owned(),
                arg.split_once(':').map(|(_, v)| v.to_owned()),
            ),
            _ => (lower.clone(), None),
        };
        let mut value = || inline.clone().or_else(|| iter.next().map(str::to_owned));
        match flag.as_str() {
            "/im" | "-im" => images.extend(value()),
            "/fi" | "-fi" => filters.extend(value()),
            "/pid" | "-pid" => {
                has_pid = true;
                let _ = value();
            }
            "/s" | "-s" | "/u" | "-u" | "/p" | "-p" => {
                let _ = value();
            }
            _ => {}
        }
    }
    for image in &images {
        if let Some(host_image) = host.image_named(image) {
            return kill_by_name("taskkill /IM", image, host_image);
        }
    }
    for filter in &filters {
        let parts: Vec<&str> = filter.split_whitespace().collect();
        let [field, op, rest @ ..] = parts.as_slice() else {
            continue;
        };
        let value = rest.join(" ");
        let value = value.trim_matches(['"', '\'']);
        let field = field.to_lowercase();
        let op = op.to_lowercase();
        match (field.as_str(), op.as_str()) {
            ("imagename", "eq") => {
                if let Some(host_image) = host.image_named(value) {
                    return kill_by_name("taskkill /FI IMAGENAME", value, host_image);
                }
            }
            ("imagename", _) => {
                return block(
                    Rule::KillEveryone,
                    format!("every process whose image is not {value}, the host included"),
                    "`taskkill /FI \"IMAGENAME ne …\"` kills every other image, the host's too"
                        .to_owned(),
                );
            }
            ("services", "eq") => {
                if let Some(unit) = host.unit_named(value) {
                    return service_stop("taskkill /FI SERVICES", unit);
                }
            }
            ("username" | "status" | "session" | "memusage" | "cputime" | "modules", _)
                if images.is_empty() && !has_pid =>
            {
                return block(
                    Rule::KillEveryone,
                    format!("every process with {field} {op} {value}, the host included"),
                    "`taskkill` with only a broad filter kills every matching process, the \
                     host's too"
                        .to_owned(),
                );
            }
            _ => {}
        }
    }
    None
}

/// The `-Name` values of a PowerShell process cmdlet (`Stop-Process`, `Get-Process`,
/// and the `kill`/`spps`/`gps`/`ps` aliases), comma lists split.
pub(crate) fn powershell_names(args: &[Word], positional_names: bool) -> Vec<String> {
    let mut names = Vec::new();
    let mut idx = 0;
    while let Some(word) = args.get(idx) {
        idx += 1;
        let arg = word.value();
        let lower = arg.to_lowercase();
        let (param, inline) = match lower.split_once(':') {
            Some((param, _)) => (
                param.to_owned(),
                arg.split_once(':').map(|(_, v)| v.to_owned()),
            ),
            None => (lower.clone(), None),
        };
        if let Some(param) = param.strip_prefix('-') {
            let is_name =
                !param.is_empty() && ("name".starts_with(param) || param == "processname");
            if is_name {
                let value = inline.or_else(|| {
                    let value = args.get(idx).map(|w| w.value().to_owned());
                    idx += 1;
                    value
                });
                names.extend(value.iter().flat_map(|v| split_list(v)));
            } else if ["id", "inputobject", "computername"]
                .iter()
                .any(|p| p.starts_with(param))
            {
                idx += 1;
            }
            continue;
        }
        if positional_names {
            names.extend(split_list(arg));
        }
    }
    names
}

fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|v| v.trim().trim_matches(['"', '\'', '(', ')', '@']).to_owned())
        .filter(|v| !v.is_empty())
        .collect()
}

fn stop_process(args: &[Word], host: &Host) -> Option<Block> {
    powershell_names(args, false).iter().find_map(|name| {
        host.image_named(name)
            .and_then(|image| kill_by_name("Stop-Process -Name", name, image))
    })
}

fn service_stop(tool: &str, unit: &str) -> Option<Block> {
    block(
        Rule::ServiceStop,
        format!("the host's service {unit}"),
        format!(
            "`{tool}` stops the service this command runs under, so it would kill the host and \
             this command with it"
        ),
    )
}

const SYSTEMCTL_STOPS: [&str; 10] = [
    "stop",
    "restart",
    "try-restart",
    "reload-or-restart",
    "try-reload-or-restart",
    "condrestart",
    "force-reload",
    "kill",
    "freeze",
    "clean",
];

fn systemctl(args: &[Word], host: &Host) -> Option<Block> {
    let parsed = parse(args, &SYSTEMCTL, false);
    if ["H", "M", "host", "machine"].iter().any(|o| parsed.has(o)) {
        return None;
    }
    let mut positionals = parsed.positionals.iter().map(|w| w.value().to_lowercase());
    let verb = positionals.next()?;
    let units: Vec<String> = positionals.collect();
    match verb.as_str() {
        "reboot" | "poweroff" | "halt" | "kexec" | "soft-reboot" | "emergency" | "rescue" => {
            machine(&format!("systemctl {verb}"))
        }
        "exit" | "isolate" | "default" => block(
            Rule::ServiceStop,
            "every service of the service manager, the host's among them".to_owned(),
            format!("`systemctl {verb}` stops the services the host runs under"),
        ),
        verb if SYSTEMCTL_STOPS.contains(&verb)
            || (matches!(verb, "disable" | "mask") && parsed.has("now")) =>
        {
            units
                .iter()
                .find_map(|unit| host.unit_named(unit))
                .and_then(|unit| service_stop(&format!("systemctl {verb}"), unit))
        }
        _ => None,
    }
}

const SERVICE_STOPS: [&str; 9] = [
    "stop",
    "restart",
    "force-reload",
    "try-restart",
    "condrestart",
    "kill",
    "force-stop",
    "force-restart",
    "reload-or-restart",
];

/// `service NAME VERB`, `rc-service NAME VERB`, `invoke-rc.d NAME VERB`.
fn sysv_service(tool: &str, args: &[Word], host: &Host) -> Option<Block> {
    let parsed = parse(args, &FLAGS_ONLY, false);
    let mut positionals = parsed.positionals.iter().map(|w| w.value());
    let name = positionals.next()?;
    let verb = positionals.next()?.to_lowercase();
    if !SERVICE_STOPS.contains(&verb.as_str()) {
        return None;
    }
    host.unit_named(name)
        .and_then(|unit| service_stop(&format!("{tool} {verb}"), unit))
}

/// `sv stop NAME`, `supervisorctl restart NAME`, `sc stop NAME`, `net stop NAME`.
fn verb_then_service(tool: &str, args: &[Word], host: &Host) -> Option<Block> {
    let parsed = parse(args, &FLAGS_ONLY, false);
    let mut positionals = parsed.positionals.iter().map(|w| w.value());
    let verb = positionals.next()?.to_lowercase();
    let stops = SERVICE_STOPS.contains(&verb.as_str()) || matches!(verb.as_str(), "down" | "exit");
    if !stops {
        return None;
    }
    positionals
        .find_map(|name| host.unit_named(name))
        .and_then(|unit| service_stop(&format!("{tool} {verb}"), unit))
}

const LAUNCHCTL_STOPS: [&str; 8] = [
    "bootout",
    "kickstart",
    "stop",
    "remove",
    "unload",
    "kill",
    "disable",
    "restart",
];

fn launchctl(args: &[Word], host: &Host) -> Option<Block> {
    let parsed = parse(args, &FLAGS_ONLY, false);
    let mut positionals = parsed.positionals.iter();
    let verb = positionals.next()?.value().to_lowercase();
    if !LAUNCHCTL_STOPS.contains(&verb.as_str()) {
        return None;
    }
    positionals
        .flat_map(|w| w.values.iter())
        .find_map(|label| host.unit_named(label))
        .and_then(|unit| service_stop(&format!("launchctl {verb}"), unit))
}

fn machine(what: &str) -> Option<Block> {
    block(
        Rule::MachineShutdown,
        "the whole machine, the host included".to_owned(),
        format!("`{what}` shuts down or restarts the machine the host runs on"),
    )
}

fn shutdown(args: &[Word]) -> Option<Block> {
    let cancels = args.iter().any(|w| {
        let v = w.value().to_lowercase();
        matches!(v.as_str(), "-c" | "/a" | "-a" | "--help" | "-h" | "--show")
    });
    if cancels && !args.iter().any(|w| w.value() == "now") {
        return None;
    }
    machine("shutdown")
}

/// The host's lifecycle subcommands (`herd shutdown`, `herd daemon stop`).
fn lifecycle(name: &str, args: &[Word], host: &Host) -> Option<Block> {
    let mut words = Vec::new();
    for word in args {
        let value = word.value();
        if value == "--" {
            break;
        }
        if !value.starts_with('-') {
            words.push(value.to_lowercase());
        }
    }
    host.lifecycle()
        .iter()
        .filter(|l| l.program == name)
        .find(|l| {
            !l.words.is_empty()
                && words
                    .windows(l.words.len())
                    .any(|window| window == l.words.as_slice())
        })
        .and_then(|l| {
            let spelled = format!("{} {}", l.program, l.words.join(" "));
            block(
                Rule::HostLifecycle,
                format!("the host itself ({})", l.program),
                format!(
                    "`{spelled}` stops or restarts the host that runs this command, which would \
                     kill the command before it completes"
                ),
            )
        })
}

/// Judges one simple command by its normalised name (lowercase basename, no `.exe`).
/// `kill` itself is judged by the walker, which sees the PID sources in its arguments.
pub(crate) fn judge_simple(name: &str, args: &[Word], host: &Host) -> Option<Block> {
    match name {
        "pkill" | "skill" => pgrep_target(args, host).and_then(|(rule, target)| {
            let reason = match rule {
                Rule::KillByCmdline => format!(
                    "`{name} -f` kills every process whose command line matches the pattern, \
                     and the host's own command line does"
                ),
                Rule::KillEveryone => {
                    format!("`{name}` with this selection kills every process the user owns")
                }
                _ => format!(
                    "`{name}` kills every process whose name matches the pattern, and the host \
                     running this command is one of them"
                ),
            };
            block(rule, target, reason)
        }),
        "killall" => killall(args, host),
        "killall5" => block(
            Rule::KillEveryone,
            "every process on the machine, the host included".to_owned(),
            "`killall5` signals every process outside its own session".to_owned(),
        ),
        "taskkill" | "tskill" => taskkill(args, host),
        "stop-process" | "spps" => stop_process(args, host),
        "systemctl" => systemctl(args, host),
        "service" | "rc-service" | "invoke-rc.d" => sysv_service(name, args, host),
        "sv" | "supervisorctl" | "sc" | "net" | "initctl" => verb_then_service(name, args, host),
        "stop-service" | "restart-service" | "suspend-service" => powershell_names(args, true)
            .iter()
            .find_map(|n| host.unit_named(n))
            .and_then(|unit| service_stop(name, unit)),
        "launchctl" => launchctl(args, host),
        "reboot" | "poweroff" | "halt" | "stop-computer" | "restart-computer" => {
            if args.iter().any(|w| w.value() == "--help") {
                None
            } else {
                machine(name)
            }
        }
        "shutdown" => shutdown(args),
        "init" | "telinit" => args
            .first()
            .filter(|w| matches!(w.value(), "0" | "6"))
            .and_then(|_| machine(name)),
        "loginctl" => {
            let verb = args
                .iter()
                .map(|w| w.value().to_lowercase())
                .find(|v| !v.starts_with('-'))?;
            match verb.as_str() {
                "terminate-user" | "kill-user" | "terminate-session" | "kill-session" => block(
                    Rule::KillEveryone,
                    "every process of a login session or user, the host included".to_owned(),
                    format!("`loginctl {verb}` kills the processes of a whole login"),
                ),
                "poweroff" | "reboot" | "halt" => machine(&format!("loginctl {verb}")),
                _ => None,
            }
        }
        "wmic" => {
            let lower: Vec<String> = args.iter().map(|w| w.value().to_lowercase()).collect();
            let kills = lower.iter().any(|a| a == "delete" || a == "terminate");
            if !(kills && lower.iter().any(|a| a == "process")) {
                return None;
            }
            lower
                .iter()
                .flat_map(|a| {
                    a.split(|c: char| !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-')))
                })
                .find_map(|token| {
                    (token.ends_with(".exe") || host.images().iter().any(|i| i == token))
                        .then(|| host.image_named(token))
                        .flatten()
                })
                .and_then(|image| kill_by_name("wmic process delete", image, image))
        }
        _ => lifecycle(name, args, host),
    }
}

/// A normalised command name: lowercase basename without `.exe`.
pub(crate) fn command_name(word: &str) -> String {
    image_key(word)
}

/// Whether a glob from a PowerShell or Windows tool names a host image (used for the
/// `Get-Process … | Stop-Process` pipeline).
pub(crate) fn names_host_image<'h>(host: &'h Host, name: &str) -> Option<&'h str> {
    let name = name.trim_matches(['"', '\'', '*', '{', '}', '(', ')']);
    if name.is_empty() {
        return None;
    }
    host.image_named(name).or_else(|| {
        host.images()
            .iter()
            .map(String::as_str)
            .find(|image| glob_match(&format!("{name}*"), image))
            .filter(|_| name.len() >= 2)
    })
}

#[cfg(test)]
mod tests;
