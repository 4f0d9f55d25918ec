//! `herd ps`: the sessions as a table that fits the terminal.

use herd_persistence::Home;
use herd_protocol::answers::ListRow;
use herd_protocol::methods::List;
use herd_protocol::params::ListParams;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

use super::{ending, old_daemon_for_hosts, truncate};
use crate::args::PsArgs;
use crate::client::Client;
use crate::output;

/// The finished sessions `ps --all` shows without `--since`: the last day's.
const DEFAULT_WINDOW_SECONDS: u64 = 24 * 3600;

/// `86400` as `24h`, `90` as `90s`.
fn age_text(seconds: u64) -> String {
    match seconds {
        s if s % 86_400 == 0 && s >= 7 * 86_400 => format!("{}d", s / 86_400),
        s if s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// `herd ps`.
pub(crate) async fn ps(home: &Home, args: PsArgs) -> anyhow::Result<()> {
    let owner = (!args.all)
        .then(|| args.owner.resolve("cli"))
        .or_else(|| args.owner.owner.clone());
    let mut client = Client::connect(home).await?;
    let mut params = ListParams::by_owner(owner.clone());
    params.all = args.all;
    // Finished sessions of a recent window; the store keeps them for days.
    let window = args.since.unwrap_or(DEFAULT_WINDOW_SECONDS);
    if args.all && client.hello.serves("list.window") {
        params.finished_since_seconds = Some(window);
    }
    let by_host = args.host.is_some() || args.all_hosts;
    // The table shows no CPU or memory (two cgroup reads a row); far hosts get the plain request.
    let lean = !args.json && !by_host && client.hello.serves("list.usage");
    params.usage = lean.then_some(false);
    if by_host {
        if !client.hello.serves("hosts") {
            return Err(old_daemon_for_hosts(&client.hello.daemon));
        }
        params.host.clone_from(&args.host);
        params.all_hosts = args.all_hosts;
    }
    // Thousands of rows: read as the daemon wrote them, into the few fields shown.
    let raw = client.ask_raw::<List>(&params).await?;
    if args.json {
        return Ok(output::line(&pretty::pretty(raw.get()))?);
    }
    let answer: Answer<'_> = serde_json::from_str(raw.get()).map_err(|err| {
        anyhow::anyhow!(
            "the daemon's answer to `list` does not read as the protocol says ({err}); is the \
             running daemon another herd version? `herd status` names it"
        )
    })?;
    say_late_hosts(&answer);
    if let Some(n_older) = answer.older {
        output::err_line(&format!(
            "{n_older} older finished session{} not shown (finished more than {} ago) — use --since",
            if n_older == 1 { "" } else { "s" },
            age_text(window)
        ));
    }
    let rows = answer.processes;
    if rows.is_empty() {
        output::line(if args.all {
            "no sessions"
        } else {
            "no running sessions (herd ps --all shows finished ones and every owner)"
        })?;
        return Ok(());
    }
    let mut table = comfy_table::Table::new();
    // Rows never wrap: the command and the last line are cut to what the terminal
    // has room for.
    table
        .load_preset(comfy_table::presets::NOTHING)
        .set_content_arrangement(comfy_table::ContentArrangement::Disabled);
    // Every owner's sessions: say whose each one is (an agent's is `mcp-<12 hex>`).
    let by_owner = owner.is_none();
    let mut header = vec!["ID", "STATE", "PID", "AGE", "COMMAND", "LAST LINE"];
    if by_owner {
        header.insert(1, "OWNER");
    }
    if by_host {
        header.insert(1, "HOST");
    }
    let cells: Vec<Cells> = rows
        .iter()
        .map(|row| row_cells(row, by_owner, by_host))
        .collect::<anyhow::Result<_>>()?;
    let (cells, command_width, line_width) = layout(&header, cells, table.width());
    // A column with no room is left out rather than wrapping every row.
    if line_width.is_none() {
        header.pop();
    }
    if command_width.is_none() {
        header.pop();
    }
    table.set_header(header);
    for (fixed, command, line) in cells {
        let mut row = fixed;
        if let Some(width) = command_width {
            row.push(truncate(&command, width));
        }
        if let Some(width) = line_width {
            row.push(truncate(&line, width));
        }
        table.add_row(row);
    }
    output::line(&table.to_string())?;
    Ok(())
}

/// Says which far hosts did not answer: their rows are the last known ones.
fn say_late_hosts(answer: &Answer<'_>) {
    for host in answer.hosts.iter().flatten() {
        if host.status.as_deref() == Some("unreachable") {
            output::err_line(&format!(
                "host {} is unreachable since {}: {} (its jobs show their last known state)",
                output::visible(host.name.as_deref().unwrap_or_default()),
                host.since.as_deref().unwrap_or("?"),
                output::visible(host.message.as_deref().unwrap_or_default()),
            ));
        } else if host.late == Some(true) {
            output::err_line(&format!(
                "host {} did not answer in time: its jobs show their last known state",
                output::visible(host.name.as_deref().unwrap_or_default()),
            ));
        }
    }
}

/// One row's cells: the fixed columns, then the command and the last line, which
/// are cut to the room left.
type Cells = (Vec<String>, String, String);

/// `list`'s answer, as far as `ps` reads it: the rows are read one by one.
#[derive(Debug, Deserialize)]
struct Answer<'a> {
    #[serde(borrow)]
    processes: Vec<&'a RawValue>,
    #[serde(default)]
    older: Option<u64>,
    #[serde(default)]
    hosts: Option<Vec<Host>>,
}

/// A far host of `list`'s answer, as far as `ps` reads it.
#[derive(Debug, Deserialize)]
struct Host {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    late: Option<bool>,
}

/// A `list` row's fields the table shows.
#[derive(Debug, Deserialize)]
struct Row<'a> {
    #[serde(default, borrow)]
    session_id: Cow<'a, str>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, borrow)]
    status: Cow<'a, str>,
    #[serde(default)]
    completion_reason: Option<String>,
    #[serde(default)]
    pid: Option<i64>,
    #[serde(default)]
    duration_seconds: Option<f64>,
    #[serde(default)]
    uptime_seconds: Option<f64>,
    #[serde(default, borrow)]
    owner_task_id: Cow<'a, str>,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    stale: Option<bool>,
    #[serde(default, borrow)]
    command: Cow<'a, str>,
    #[serde(default, borrow)]
    output_preview: Cow<'a, str>,
}

/// The cells of one `list` row.
fn row_cells(raw: &RawValue, by_owner: bool, by_host: bool) -> anyhow::Result<Cells> {
    let row: Row<'_> = serde_json::from_str(raw.get()).map_err(|err| {
        anyhow::anyhow!("a `list` row does not read as the protocol says ({err})")
    })?;
    let state = match (row.status.as_ref(), row.completion_reason.as_deref()) {
        ("running", _) | (_, None) => output::visible(if row.status.is_empty() {
            "?"
        } else {
            &row.status
        })
        .into_owned(),
        // `exited 0`, `killed (SIGTERM)`, `died of SIGSEGV`, `lost …`: a finished
        // row is read whole for its ending.
        _ => {
            let whole: ListRow = serde_json::from_str(raw.get()).map_err(|err| {
                anyhow::anyhow!("a `list` row does not read as the protocol says ({err})")
            })?;
            ending(&whole)
                .split_once(' ')
                .map(|(_, how)| how.to_owned())
                .unwrap_or_default()
        }
    };
    let id = output::visible(&row.session_id).into_owned();
    let mut fixed = vec![
        match &row.name {
            Some(name) => format!("{id} {}", output::visible(name)),
            None => id,
        },
        state,
        row.pid
            .filter(|&p| p > 0)
            .map(|p| p.to_string())
            .unwrap_or_default(),
        // A finished session's age stops: how long it ran.
        age(row
            .duration_seconds
            .or(row.uptime_seconds)
            .unwrap_or_default()),
    ];
    if by_owner {
        fixed.insert(1, output::visible(&row.owner_task_id).into_owned());
    }
    if by_host {
        let host = output::visible(row.host.as_deref().unwrap_or("local")).into_owned();
        fixed.insert(
            1,
            if row.stale == Some(true) {
                format!("{host} (stale)")
            } else {
                host
            },
        );
    }
    Ok((
        fixed,
        row.command.into_owned(),
        last_line(&row.output_preview).to_owned(),
    ))
}

/// The rows as a terminal of `width` columns shows them, with the widths of the
/// command and last-line columns ([`flexible_widths`]): where the last line would
/// not fit, ids are first cut to the shortest prefix that tells the rows apart (at
/// least 7 hex digits, which every command takes, B37).
fn layout(
    header: &[&str],
    cells: Vec<Cells>,
    width: Option<u16>,
) -> (Vec<Cells>, Option<usize>, Option<usize>) {
    let (command, line) = flexible_widths(header, &cells, width);
    if line.is_some() {
        return (cells, command, line);
    }
    let cells = short_ids(cells);
    let (command, line) = flexible_widths(header, &cells, width);
    if line.is_some() {
        return (cells, command, line);
    }
    let cells = squeezed(header, cells);
    let (command, line) = flexible_widths(header, &cells, width);
    (cells, command, line)
}

/// The longest name and owner shown when the row would not fit otherwise.
const SQUEEZED_NAME_CHARS: usize = 12;
/// See [`SQUEEZED_NAME_CHARS`].
const SQUEEZED_OWNER_CHARS: usize = 10;

/// The rows with their long cells cut, for a terminal too narrow for them: a
/// state's parenthesis left out (`killed (restarted, SIGTERM)` is `killed`), an
/// owner cut to [`SQUEEZED_OWNER_CHARS`] and a name to [`SQUEEZED_NAME_CHARS`]
/// (a cut cell ends in `…`).
fn squeezed(header: &[&str], mut cells: Vec<Cells>) -> Vec<Cells> {
    let column = |name: &str| header.iter().position(|h| *h == name);
    let (owner, state) = (column("OWNER"), column("STATE"));
    for (fixed, _, _) in &mut cells {
        if let Some(at) = state
            && let Some((short, _)) = fixed[at].split_once(" (")
        {
            fixed[at] = short.to_owned();
        }
        if let Some(at) = owner {
            fixed[at] = truncate(&fixed[at], SQUEEZED_OWNER_CHARS);
        }
        if let Some((id, name)) = fixed[0].split_once(' ') {
            fixed[0] = format!("{id} {}", truncate(name, SQUEEZED_NAME_CHARS));
        }
    }
    cells
}

/// The rows with each `proc_<12 hex>` id cut to the shortest prefix (at least 7
/// hex digits) no other row's id shares.
fn short_ids(mut cells: Vec<Cells>) -> Vec<Cells> {
    let ids: Vec<String> = cells
        .iter()
        .map(|(fixed, _, _)| fixed[0].split(' ').next().unwrap_or_default().to_owned())
        .collect();
    let keep = (12..=17)
        .find(|&n| {
            let mut seen = std::collections::HashSet::new();
            ids.iter().all(|id| seen.insert(id.get(..n).unwrap_or(id)))
        })
        .unwrap_or(17);
    for ((fixed, _, _), id) in cells.iter_mut().zip(&ids) {
        if id.starts_with("proc_")
            && let Some(short) = id.get(..keep)
        {
            fixed[0] = fixed[0].replacen(id.as_str(), short, 1);
        }
    }
    cells
}

/// The widths the command and last-line columns get: what a terminal of
/// `width` columns leaves after the fixed ones (55% and 45% of it, each at least
/// as wide as its header); 40 and 50 off a terminal. A narrow terminal loses the
/// last line first, then the command (`None`), so that no row wraps.
fn flexible_widths(
    header: &[&str],
    cells: &[Cells],
    width: Option<u16>,
) -> (Option<usize>, Option<usize>) {
    let Some(width) = width else {
        return (Some(40), Some(50));
    };
    let n_fixed = header.len() - 2;
    let fixed = fixed_width(header, cells);
    let (command_min, line_min) = (header[n_fixed].len(), header[n_fixed + 1].len());
    // One space of padding on each side of every column.
    let room = |n_columns: usize| usize::from(width).saturating_sub(fixed + 2 * n_columns);
    let both = room(n_fixed + 2);
    if both >= command_min + line_min {
        let command = (both * 55 / 100).max(command_min);
        let line = (both - command).max(line_min);
        return (Some(both - line), Some(line));
    }
    let alone = room(n_fixed + 1);
    if alone >= command_min {
        return (Some(alone), None);
    }
    (None, None)
}

/// The terminal columns the fixed columns take (the widest cell or header of
/// each), padding not counted.
fn fixed_width(header: &[&str], cells: &[Cells]) -> usize {
    (0..header.len() - 2)
        .map(|col| {
            cells
                .iter()
                .map(|(f, _, _)| unicode_width::UnicodeWidthStr::width(f[col].as_str()))
                .chain([header[col].len()])
                .max()
                .unwrap_or(0)
        })
        .sum()
}

/// `45s`, `18m5s`, `2h3m`, `3d4h`.
pub(super) fn age(seconds: f64) -> String {
    let s = seconds.max(0.0) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        3600..86400 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
    }
}

/// The last non-blank line of `text`, as a terminal shows it: of a line
/// redrawn with `\r` (a progress bar), its latest frame.
pub(super) fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .map(latest_frame)
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim_end()
}

/// The last non-blank `\r`-separated frame of `line`.
fn latest_frame(line: &str) -> &str {
    line.trim_end()
        .rsplit('\r')
        .find(|f| !f.trim().is_empty())
        .unwrap_or("")
}

mod pretty;
#[cfg(test)]
mod tests;
