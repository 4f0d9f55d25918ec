//! The guard's answer: [`Verdict`], the [`Block`] it carries and the [`Rule`] that fired.
//!
//! A block always says three things a caller can show an agent as-is: what would die
//! (`target`), why the command was refused (`reason`) and what to do instead (`remedy`).
//! The texts never quote the whole command line, so a secret typed into it does not travel
//! further through a verdict than it already has.

use std::fmt;

/// The rule that refused a command. Its stable kebab-case name is [`Rule::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// A name-based killer (`pkill`, `killall`, `taskkill /IM`, `Stop-Process -Name`) aimed
    /// at one of the host's images.
    KillByName,
    /// `pkill -f` / `pgrep -f` with a pattern that matches the host's own command line.
    KillByCmdline,
    /// `kill` fed with the PIDs of host processes (`kill $(pgrep …)`, `pidof … | xargs kill`,
    /// a host pid file).
    KillHostPids,
    /// A kill of every process the user owns (`kill -1`, `pkill -u`, `killall -u` without a
    /// name, `killall5`), which includes the host.
    KillEveryone,
    /// `kill $PPID`: the parent of a supervised command is the host or its shell.
    KillParent,
    /// The host's own stop/restart command (`herd shutdown`, `herd daemon stop`).
    HostLifecycle,
    /// A service manager told to stop, restart or kill the host's unit
    /// (`systemctl`, `launchctl`, `service`).
    ServiceStop,
    /// Shutting down or rebooting the machine.
    MachineShutdown,
    /// A referenced script could not be scanned (FIFO, device, too large, budget exhausted),
    /// so the guard fails closed.
    Unscannable,
    /// The command line could not be parsed and names a kill or lifecycle verb.
    Unparseable,
}

impl Rule {
    /// Every rule, in declaration order.
    pub const ALL: [Rule; 10] = [
        Rule::KillByName,
        Rule::KillByCmdline,
        Rule::KillHostPids,
        Rule::KillEveryone,
        Rule::KillParent,
        Rule::HostLifecycle,
        Rule::ServiceStop,
        Rule::MachineShutdown,
        Rule::Unscannable,
        Rule::Unparseable,
    ];

    /// The stable kebab-case name of the rule, for logs, JSON and tests.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::KillByName => "kill-by-name",
            Rule::KillByCmdline => "kill-by-cmdline",
            Rule::KillHostPids => "kill-host-pids",
            Rule::KillEveryone => "kill-everyone",
            Rule::KillParent => "kill-parent",
            Rule::HostLifecycle => "host-lifecycle",
            Rule::ServiceStop => "service-stop",
            Rule::MachineShutdown => "machine-shutdown",
            Rule::Unscannable => "unscannable",
            Rule::Unparseable => "unparseable",
        }
    }

    /// The safe alternative for this rule, as one sentence.
    pub fn remedy(self) -> &'static str {
        match self {
            Rule::HostLifecycle | Rule::ServiceStop | Rule::MachineShutdown => {
                "run it from a separate shell outside the supervised host; to stop a job herd \
                 started, use `herd kill proc_…` with its session id, or kill it by its explicit PID"
            }
            Rule::Unscannable | Rule::Unparseable => {
                "rewrite the command so it can be read (plain shell, scripts under 1 MiB); to stop \
                 a job herd started, use `herd kill proc_…` with its session id, or kill it by its \
                 explicit PID"
            }
            _ => {
                "stop only what you own: `herd kill proc_…` with the session id of a job herd \
                 started, or `kill <pid>` with the explicit PID of the process you mean"
            }
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Rule {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Rule {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Why a command was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The rule that fired.
    pub rule: Rule,
    /// What would die (or, for the fail-closed rules, what could not be read).
    pub target: String,
    /// A sentence for the caller saying why the command was refused.
    pub reason: String,
    /// The safe alternative.
    pub remedy: String,
}

impl Block {
    /// A block for `rule` with its standard remedy.
    pub fn new(rule: Rule, target: impl Into<String>, reason: impl Into<String>) -> Block {
        Block {
            rule,
            target: target.into(),
            reason: reason.into(),
            remedy: rule.remedy().to_owned(),
        }
    }
}

impl fmt::Display for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "blocked ({}): {}; instead, {}",
            self.rule, self.reason, self.remedy
        )
    }
}

/// The guard's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The command may run.
    Allow,
    /// The command would kill the host.
    Block(Block),
}

impl Verdict {
    /// Whether the command was refused.
    pub fn is_block(&self) -> bool {
        matches!(self, Verdict::Block(_))
    }

    /// The block, if the command was refused.
    pub fn block(&self) -> Option<&Block> {
        match self {
            Verdict::Allow => None,
            Verdict::Block(block) => Some(block),
        }
    }
}
