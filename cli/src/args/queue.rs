//! `herd run`'s queue flags and `herd group`.

use clap::{Args, Subcommand};

// `herd run --group/--after/--after-ready`.
#[derive(Debug, Args, Default)]
pub(crate) struct QueueArgs {
    /// Queue the job in group NAME (see `herd group`): it starts when fewer than
    /// the group's --parallel jobs of it run; until then it is `queued` (ps, poll,
    /// logs, wait and kill work on it; a kill removes it with one completion).
    /// `default` has no limit: the job starts at once.
    #[arg(long, value_name = "NAME")]
    pub(crate) group: Option<String>,
    /// Start only after these jobs (ids or names, comma-separated or repeated)
    /// ended with exit 0; if one fails or is killed this job never runs and ends
    /// with a completion naming it. An unknown or expired one is refused (exit 2).
    #[arg(long, value_name = "ID|NAME", value_delimiter = ',', num_args = 1)]
    pub(crate) after: Vec<String>,
    /// Start only once these jobs are ready (see `--ready`), not when they end.
    #[arg(long, value_name = "ID|NAME", value_delimiter = ',', num_args = 1)]
    pub(crate) after_ready: Vec<String>,
}

impl QueueArgs {
    /// Whether any queue flag was given.
    pub(crate) fn any(&self) -> bool {
        self.group.is_some() || !self.after.is_empty() || !self.after_ready.is_empty()
    }
}

// `herd group`.
#[derive(Debug, Args)]
pub(crate) struct GroupArgs {
    #[command(subcommand)]
    pub(crate) command: GroupCommand,
}

// `herd group` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum GroupCommand {
    /// Add a group whose jobs run at most N at once (`herd run --group NAME …`).
    ///
    /// NAME: 1 to 32 of a-z, 0-9, `_`, `-`; N: 1 to 1024. Groups survive restarts.
    Add(GroupSetArgs),
    /// Change a group's limit; a higher one starts waiting jobs at once.
    Set(GroupSetArgs),
    /// List the groups: name, limit, running and queued jobs (`default` has no limit).
    List(super::JsonFlag),
    /// Remove a group that has no queued job.
    Rm(GroupNameArgs),
}

// `herd group add|set NAME --parallel N`.
#[derive(Debug, Args)]
pub(crate) struct GroupSetArgs {
    /// The group's name.
    pub(crate) name: String,
    /// How many of its jobs may run at once (1 to 1024).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub(crate) parallel: u64,
    /// Print machine-readable JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

// `herd group rm NAME`.
#[derive(Debug, Args)]
pub(crate) struct GroupNameArgs {
    /// The group's name.
    pub(crate) name: String,
    /// Print machine-readable JSON.
    #[arg(long)]
    pub(crate) json: bool,
}
