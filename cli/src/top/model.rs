//! What `herd top` shows: the session rows as `list` answers them, their tree CPU
//! and memory (the cgroup's accounting a row carries, else the `/proc` sample),
//! the sort and filter, the selection, and the output pane's terminal.
//!
//! Pure state: no IO, no clock of its own (the caller passes `now`), so the
//! rendering bench (`cli/benches/top.rs`) and the unit tests build it directly.
//! It names nothing under `crate::`, because the bench compiles this file and
//! `render.rs` on their own (`#[path]`).
//!
//! Invariant: `view` holds indices into `rows` of the rows that pass the filter,
//! in sort order; every change to the rows, the sort or the filter rebuilds it,
//! and the selection is kept by session id, so a redraw never reorders under the
//! cursor of a person who is reading.

use std::collections::HashMap;
use std::num::NonZeroU16;
use std::time::{Duration, Instant};

use serde::Deserialize;

/// One session as `list` answers it (the fields `top` uses).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Row {
    pub(crate) session_id: String,
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) command: String,
    #[serde(default)]
    pub(crate) pid: i32,
    /// `pty` or `pipe`; absent from a daemon older than the field.
    #[serde(default)]
    pub(crate) mode: Option<String>,
    #[serde(default)]
    pub(crate) owner_task_id: String,
    #[serde(default)]
    pub(crate) uptime_seconds: u64,
    /// `running` or `exited`.
    #[serde(default)]
    pub(crate) status: String,
    #[serde(default)]
    pub(crate) output_preview: String,
    #[serde(default)]
    pub(crate) exit_code: Option<i32>,
    #[serde(default)]
    pub(crate) signal: Option<i32>,
    #[serde(default)]
    pub(crate) duration_seconds: Option<u64>,
    #[serde(default)]
    pub(crate) completion_reason: Option<String>,
    /// CPU time and memory of its whole tree from its cgroup; absent without one.
    #[serde(default)]
    pub(crate) usage: Option<TreeUsage>,
}

/// A row's `usage`: its cgroup's accounting (`cpu.stat` `usage_usec`,
/// `memory.current`), which counts every process of the tree, a daemonised one too.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub(crate) struct TreeUsage {
    #[serde(default)]
    pub(crate) cpu_usec: Option<u64>,
    #[serde(default)]
    pub(crate) memory_bytes: Option<u64>,
}

/// The shortest time two listings' CPU counters are compared over: listings come
/// as often as every 100 ms on changes, too short a window for a steady figure.
const MIN_CPU_WINDOW: Duration = Duration::from_millis(500);

/// A session's cgroup figures across listings.
#[derive(Debug, Clone, Copy)]
struct Accounted {
    /// The CPU counter and when it was read, the base of the next figure.
    base: Option<(u64, Instant)>,
    /// Percent of one CPU between the last two bases.
    cpu_percent: Option<f64>,
    memory_bytes: Option<u64>,
}

impl Accounted {
    /// Takes a listing's figures read at `now`.
    fn update(&mut self, usage: TreeUsage, now: Instant) {
        self.memory_bytes = usage.memory_bytes;
        let Some(usec) = usage.cpu_usec else {
            self.base = None;
            self.cpu_percent = None;
            return;
        };
        match self.base {
            Some((was, at)) if usec >= was => {
                let window = now.saturating_duration_since(at);
                if window >= MIN_CPU_WINDOW {
                    let used = Duration::from_micros(usec - was);
                    self.cpu_percent = Some(used.as_secs_f64() / window.as_secs_f64() * 100.0);
                    self.base = Some((usec, now));
                }
            }
            // The first figure, or a counter that went back (a new cgroup).
            _ => self.base = Some((usec, now)),
        }
    }
}

/// What the CPU% and MEM columns show for a session: its cgroup's figures where
/// the daemon sends them, else the `/proc` sample of its tree.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Shown {
    pub(crate) cpu_percent: Option<f64>,
    pub(crate) memory_bytes: Option<u64>,
}

impl Row {
    /// Whether the session still runs.
    pub(crate) fn is_running(&self) -> bool {
        self.status == "running"
    }

    /// Whether it runs under a PTY.
    pub(crate) fn is_pty(&self) -> bool {
        self.mode.as_deref() == Some("pty")
    }

    /// `running`, `exited`, `failed` (a non-zero exit) or `killed`.
    pub(crate) fn state(&self) -> &'static str {
        if self.is_running() {
            "running"
        } else if self.signal.is_some()
            || matches!(
                self.completion_reason.as_deref(),
                Some("killed" | "signaled")
            )
        {
            "killed"
        } else if matches!(
            self.completion_reason.as_deref(),
            Some("lost" | "failed_start")
        ) {
            "lost"
        } else if self.exit_code.is_some_and(|c| c != 0) {
            "failed"
        } else {
            "exited"
        }
    }

    /// The exit code, or the signal's short name (`TERM`), or nothing.
    pub(crate) fn exit(&self) -> String {
        match (self.exit_code, self.signal) {
            (_, Some(signal)) => signal_name(signal),
            (Some(code), None) => code.to_string(),
            (None, None) => String::new(),
        }
    }

    /// The age of a running session `since` the list was taken, or how long a
    /// finished one ran.
    pub(crate) fn age(&self, since: Duration) -> Duration {
        match self.duration_seconds {
            Some(ran) if !self.is_running() => Duration::from_secs(ran),
            _ => Duration::from_secs(self.uptime_seconds) + since,
        }
    }

    /// The last line of its output with control characters and escape
    /// sequences removed (a progress bar's last state after its `\r`).
    pub(crate) fn last_line(&self) -> String {
        last_line(&self.output_preview)
    }

    /// The text `/` matches against.
    fn matches(&self, needle: &str) -> bool {
        let hay = |s: &str| s.to_lowercase().contains(needle);
        hay(&self.session_id)
            || self.name.as_deref().is_some_and(hay)
            || hay(&self.owner_task_id)
            || hay(&self.command)
            || hay(self.state())
    }
}

/// A signal's name without `SIG` (`TERM`), or its number.
fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal).map_or_else(
        |_| format!("sig{signal}"),
        |s| s.as_str().trim_start_matches("SIG").to_owned(),
    )
}

/// The last non-empty line of `text`, as a person would see it: what follows
/// the line's last `\r`, with escape sequences and control characters removed.
pub(crate) fn last_line(text: &str) -> String {
    let line = text
        .split('\n')
        .map(|l| l.trim_end_matches('\r'))
        .rfind(|l| !visible(l).trim().is_empty())
        .unwrap_or_default();
    let line = line.rsplit('\r').next().unwrap_or(line);
    visible(line).trim().to_owned()
}

/// `text` without escape sequences (CSI, OSC and two-byte ones) and control
/// characters, which would move the cursor or recolour the table.
pub(crate) fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => {
                    // Parameters and intermediates, then one final byte.
                    for c in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    // Up to BEL or ST.
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\t' => out.push(' '),
            c if c.is_control() => {}
            // Bidi overrides and zero-width characters would reorder or hide text.
            '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {}
            c => out.push(c),
        }
    }
    out
}

/// Tree CPU and memory of one session, from one `/proc` sample.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Usage {
    /// Percent of one CPU over the last interval (may pass 100 with threads).
    pub(crate) cpu_percent: f64,
    /// Resident memory of every process in the tree.
    pub(crate) rss_bytes: u64,
    /// How many processes the tree has.
    pub(crate) n_processes: usize,
}

/// What the rows are sorted by (`s` cycles, `S` reverses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SortKey {
    /// Running first, then the newest.
    State,
    /// The newest first.
    Age,
    /// The busiest tree first.
    Cpu,
    /// The largest tree first.
    Memory,
    /// By name (unnamed last), then id.
    Name,
    /// By owner, then the newest.
    Owner,
}

impl SortKey {
    /// The next key in the cycle.
    pub(crate) fn next(self) -> SortKey {
        match self {
            SortKey::State => SortKey::Age,
            SortKey::Age => SortKey::Cpu,
            SortKey::Cpu => SortKey::Memory,
            SortKey::Memory => SortKey::Name,
            SortKey::Name => SortKey::Owner,
            SortKey::Owner => SortKey::State,
        }
    }

    /// Its name in the title line.
    pub(crate) fn label(self) -> &'static str {
        match self {
            SortKey::State => "state",
            SortKey::Age => "age",
            SortKey::Cpu => "cpu",
            SortKey::Memory => "mem",
            SortKey::Name => "name",
            SortKey::Owner => "owner",
        }
    }
}

/// The sessions and how they are shown.
#[derive(Debug)]
pub(crate) struct Model {
    rows: Vec<Row>,
    /// When `rows` was listed (ages count on from it).
    listed_at: Instant,
    usage: HashMap<String, Usage>,
    /// The cgroup figures of the running sessions whose rows carry them.
    accounted: HashMap<String, Accounted>,
    sort: SortKey,
    reverse: bool,
    filter: String,
    show_finished: bool,
    /// Invariant: indices into `rows`, filtered and sorted (see the module doc).
    view: Vec<usize>,
    selected: Option<String>,
    /// The first row of `view` on screen.
    offset_idx: usize,
}

impl Model {
    /// An empty model listed at `now`.
    pub(crate) fn new(now: Instant) -> Model {
        Model {
            rows: Vec::new(),
            listed_at: now,
            usage: HashMap::new(),
            accounted: HashMap::new(),
            sort: SortKey::State,
            reverse: false,
            filter: String::new(),
            show_finished: true,
            view: Vec::new(),
            selected: None,
            offset_idx: 0,
        }
    }

    /// Replaces the rows with a new listing taken at `now`.
    pub(crate) fn set_rows(&mut self, rows: Vec<Row>, now: Instant) {
        // The selection's place is read against the rows the view indexes, before
        // they go: the new listing may be shorter (the daemon lists a bounded
        // number of finished sessions, so old ones drop out as others finish).
        let before = self.selected_idx();
        self.rows = rows;
        self.view.clear();
        self.listed_at = now;
        self.account(now);
        self.rebuild_from(before);
    }

    /// Takes the cgroup figures of the running rows, listed at `now`; forgets
    /// those of sessions no longer running.
    fn account(&mut self, now: Instant) {
        let mut kept = HashMap::with_capacity(self.accounted.len());
        for row in self.rows.iter().filter(|r| r.is_running()) {
            let Some(usage) = row.usage else { continue };
            let mut figures = self.accounted.remove(&row.session_id).unwrap_or(Accounted {
                base: None,
                cpu_percent: None,
                memory_bytes: None,
            });
            figures.update(usage, now);
            kept.insert(row.session_id.clone(), figures);
        }
        self.accounted = kept;
    }

    /// Replaces the CPU and memory figures.
    pub(crate) fn set_usage(&mut self, usage: HashMap<String, Usage>) {
        self.usage = usage;
        if matches!(self.sort, SortKey::Cpu | SortKey::Memory) {
            self.rebuild();
        }
    }

    /// Every row, as listed.
    pub(crate) fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// When the rows were listed.
    pub(crate) fn listed_at(&self) -> Instant {
        self.listed_at
    }

    /// The usage of session `id`, once sampled: its cgroup's figures where the
    /// daemon sends them, each else the `/proc` sample's.
    pub(crate) fn usage(&self, id: &str) -> Shown {
        let sampled = self.usage.get(id);
        let accounted = self.accounted.get(id);
        Shown {
            cpu_percent: accounted
                .and_then(|a| a.cpu_percent)
                .or(sampled.map(|u| u.cpu_percent)),
            memory_bytes: accounted
                .and_then(|a| a.memory_bytes)
                .or(sampled.map(|u| u.rss_bytes)),
        }
    }

    /// The rows shown, in order.
    pub(crate) fn view(&self) -> impl ExactSizeIterator<Item = &Row> {
        self.view.iter().map(|&i| &self.rows[i])
    }

    /// How many rows are shown.
    pub(crate) fn n_shown(&self) -> usize {
        self.view.len()
    }

    /// How many sessions run.
    pub(crate) fn n_running(&self) -> usize {
        self.rows.iter().filter(|r| r.is_running()).count()
    }

    /// The sort key and whether it is reversed.
    pub(crate) fn sort(&self) -> (SortKey, bool) {
        (self.sort, self.reverse)
    }

    /// Moves to the next sort key.
    pub(crate) fn cycle_sort(&mut self) {
        self.sort = self.sort.next();
        self.rebuild();
    }

    /// Reverses the order.
    pub(crate) fn reverse_sort(&mut self) {
        self.reverse = !self.reverse;
        self.rebuild();
    }

    /// The filter text.
    pub(crate) fn filter(&self) -> &str {
        &self.filter
    }

    /// Shows only the rows whose id, name, owner, command or state contains
    /// `text` (case-insensitive); empty shows all.
    pub(crate) fn set_filter(&mut self, text: &str) {
        self.filter = text.to_owned();
        self.rebuild();
    }

    /// Whether finished sessions are shown.
    pub(crate) fn shows_finished(&self) -> bool {
        self.show_finished
    }

    /// Shows or hides finished sessions.
    pub(crate) fn toggle_finished(&mut self) {
        self.show_finished = !self.show_finished;
        self.rebuild();
    }

    /// The selected row, if any row is shown.
    pub(crate) fn selected(&self) -> Option<&Row> {
        self.selected_idx().map(|i| &self.rows[self.view[i]])
    }

    /// The selected row's place in the view.
    pub(crate) fn selected_idx(&self) -> Option<usize> {
        let id = self.selected.as_deref()?;
        self.view
            .iter()
            .position(|&i| self.rows.get(i).is_some_and(|r| r.session_id == id))
    }

    /// Moves the selection by `delta` rows, clamped to the view.
    pub(crate) fn move_selection(&mut self, delta: isize) {
        if self.view.is_empty() {
            self.selected = None;
            return;
        }
        let last = self.view.len() - 1;
        let at = self.selected_idx().unwrap_or(0);
        let to = at.saturating_add_signed(delta).min(last);
        self.selected = Some(self.rows[self.view[to]].session_id.clone());
    }

    /// Selects the first or the last row.
    pub(crate) fn select_edge(&mut self, last: bool) {
        let to = if last {
            self.view.len().saturating_sub(1)
        } else {
            0
        };
        self.selected = self.view.get(to).map(|&i| self.rows[i].session_id.clone());
    }

    /// The first view row to draw in a table `height` rows high, so the
    /// selection stays on screen; remembered, so the table scrolls only when
    /// the selection would leave it.
    pub(crate) fn scroll_for(&mut self, height: usize) -> usize {
        let height = height.max(1);
        let at = self.selected_idx().unwrap_or(0);
        if at < self.offset_idx {
            self.offset_idx = at;
        } else if at >= self.offset_idx + height {
            self.offset_idx = at + 1 - height;
        }
        self.offset_idx = self.offset_idx.min(self.view.len().saturating_sub(height));
        self.offset_idx
    }

    /// Rebuilds `view` and keeps the selection on its session (or on the row
    /// at its place, when that session is no longer shown).
    fn rebuild(&mut self) {
        let before = self.selected_idx();
        self.rebuild_from(before);
    }

    /// [`Model::rebuild`], the selection having been at view row `before`.
    fn rebuild_from(&mut self, before: Option<usize>) {
        let needle = self.filter.to_lowercase();
        let mut view: Vec<usize> = (0..self.rows.len())
            .filter(|&i| {
                let r = &self.rows[i];
                (self.show_finished || r.is_running()) && (needle.is_empty() || r.matches(&needle))
            })
            .collect();
        let rows = &self.rows;
        let cpu = |r: &Row| self.usage(&r.session_id).cpu_percent.unwrap_or(-1.0);
        let mem = |r: &Row| self.usage(&r.session_id).memory_bytes.unwrap_or(0);
        // `list` answers oldest first: a later index started later.
        view.sort_by(|&a, &b| {
            let (ra, rb) = (&rows[a], &rows[b]);
            let order = match self.sort {
                SortKey::State => rb.is_running().cmp(&ra.is_running()).then(b.cmp(&a)),
                SortKey::Age => b.cmp(&a),
                SortKey::Cpu => cpu(rb).total_cmp(&cpu(ra)).then(b.cmp(&a)),
                SortKey::Memory => mem(rb).cmp(&mem(ra)).then(b.cmp(&a)),
                SortKey::Name => match (&ra.name, &rb.name) {
                    (Some(x), Some(y)) => x.cmp(y),
                    (Some(_), None) => std::cmp::Ordering::Less,
                    (None, Some(_)) => std::cmp::Ordering::Greater,
                    (None, None) => std::cmp::Ordering::Equal,
                }
                .then_with(|| ra.session_id.cmp(&rb.session_id)),
                SortKey::Owner => ra.owner_task_id.cmp(&rb.owner_task_id).then(b.cmp(&a)),
            };
            if self.reverse { order.reverse() } else { order }
        });
        self.view = view;
        if self.selected_idx().is_none() {
            let to = before.unwrap_or(0).min(self.view.len().saturating_sub(1));
            self.selected = self.view.get(to).map(|&i| self.rows[i].session_id.clone());
        }
    }
}

/// The size of a PTY session's terminal: what the daemon spawns (`spawn` in
/// `daemon/methods/spawn.rs`), so the job's cursor addressing lands where it meant.
pub(crate) const PTY_ROWS: u16 = 30;
/// See [`PTY_ROWS`].
pub(crate) const PTY_COLS: u16 = 120;
/// A pipe session's screen: tall enough for any pane, wide enough that a long
/// line is cut at the pane's edge rather than wrapped.
const PIPE_ROWS: u16 = 200;
/// See [`PIPE_ROWS`].
const PIPE_COLS: u16 = 400;

/// The output pane: the followed session's output interpreted as a terminal
/// (`vt100`), so a PTY job's colours, cursor moves and `\r` progress bars look
/// as they would on a terminal.
pub(crate) struct Pane {
    session_id: String,
    is_pty: bool,
    parser: vt100::Parser,
    /// Whether the stream ended (the session finished and all was read).
    pub(crate) is_ended: bool,
}

impl std::fmt::Debug for Pane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pane")
            .field("session_id", &self.session_id)
            .field("is_pty", &self.is_pty)
            .field("is_ended", &self.is_ended)
            .finish_non_exhaustive()
    }
}

impl Pane {
    /// An empty pane for session `session_id`.
    pub(crate) fn new(session_id: &str, is_pty: bool) -> Pane {
        let (rows, cols) = if is_pty {
            (PTY_ROWS, PTY_COLS)
        } else {
            (PIPE_ROWS, PIPE_COLS)
        };
        let size = |n: u16| NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN);
        Pane {
            session_id: session_id.to_owned(),
            is_pty,
            parser: vt100::Parser::new(size(rows), size(cols), 0),
            is_ended: false,
        }
    }

    /// The session followed.
    pub(crate) fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Whether the session runs under a PTY.
    pub(crate) fn is_pty(&self) -> bool {
        self.is_pty
    }

    /// Feeds output. A pipe's `\n` is a terminal's `\r\n` (a PTY's line
    /// discipline does that translation for a PTY job).
    pub(crate) fn feed(&mut self, text: &str) {
        if self.is_pty {
            self.parser.process(text.as_bytes());
        } else {
            for (i, part) in text.split('\n').enumerate() {
                if i > 0 {
                    self.parser.process(b"\r\n");
                }
                self.parser.process(part.as_bytes());
            }
        }
    }

    /// The terminal screen.
    pub(crate) fn screen(&self) -> &vt100::Screen {
        self.parser.screen()
    }

    /// The first screen row to show in `height` rows: the rows up to the cursor
    /// or the last written row, whichever is lower, so the newest output shows.
    pub(crate) fn first_row(&self, height: u16) -> u16 {
        let screen = self.parser.screen();
        let (rows, cols) = screen.size();
        let (cursor_row, cursor_col) = screen.cursor_position();
        let last_written = (0..rows.get())
            .rev()
            .find(|&r| (0..cols.get()).any(|c| screen.cell(r, c).is_some_and(|c| c.has_contents())))
            .unwrap_or(0);
        // A cursor at the start of an empty line after the output is not a row to show.
        let cursor_row = if cursor_col == 0 && cursor_row > last_written {
            last_written
        } else {
            cursor_row
        };
        let bottom = cursor_row.max(last_written);
        (bottom + 1).saturating_sub(height.max(1))
    }
}
