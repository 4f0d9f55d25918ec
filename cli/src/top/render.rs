//! Drawing `herd top` into a ratatui frame: the title line, the session table,
//! the output pane and the key or prompt line.
//!
//! Only the rows on screen are built, so a redraw costs the same with 10 sessions
//! or 10,000 (`cargo xtask bench` measures 1,000 into ratatui's `TestBackend`).
//! Every cell is cut at its column's width and every line at the screen's edge:
//! nothing wraps, so a row is always one line, at 80 columns too. Text a job
//! controls (its command, its last line) is shown through `visible`, so it
//! cannot move the cursor or recolour the table; the pane is the one place its
//! escapes act, inside the pane's own terminal (`vt100`).
//!
//! Like `model.rs`, this file names nothing under `crate::` (the bench compiles it
//! on its own).

use std::time::{Duration, Instant};

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row as TableRow, Table};

use super::model::{Model, Pane, Row, visible};

/// What is drawn besides the sessions.
#[derive(Debug)]
pub(crate) struct Chrome<'a> {
    /// The followed session's output, if one is selected.
    pub(crate) pane: Option<&'a Pane>,
    /// The pane takes the whole screen (`f`).
    pub(crate) zoomed: bool,
    /// The last thing an action said (empty: the key help shows).
    pub(crate) status: &'a str,
    /// An input line being typed: its label and text.
    pub(crate) prompt: Option<(&'a str, &'a str)>,
    /// A standing note on the title line (e.g. an old daemon's fallback).
    pub(crate) note: &'a str,
    /// Now, for ages.
    pub(crate) now: Instant,
}

/// The key help on the last line.
const HELP: &str = "q quit  ↑↓ select  / filter  s sort  S reverse  a finished  f follow  \
                    k kill  r restart  h hand off  l log";

/// Draws everything.
pub(crate) fn draw(frame: &mut Frame<'_>, model: &mut Model, chrome: &Chrome<'_>) {
    let area = frame.area();
    let [title, body, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_title(frame.buffer_mut(), title, model, chrome);
    match chrome.pane {
        Some(pane) if chrome.zoomed => draw_pane(frame.buffer_mut(), body, pane, model),
        Some(pane) if body.height >= 12 => {
            let pane_height = (body.height * 2 / 5).max(5);
            let [table, pane_area] =
                Layout::vertical([Constraint::Min(3), Constraint::Length(pane_height)]).areas(body);
            draw_table(frame, table, model, chrome.now);
            draw_pane(frame.buffer_mut(), pane_area, pane, model);
        }
        _ => draw_table(frame, body, model, chrome.now),
    }
    draw_bottom(frame.buffer_mut(), bottom, chrome);
}

fn draw_title(buf: &mut Buffer, area: Rect, model: &Model, chrome: &Chrome<'_>) {
    let (sort, reverse) = model.sort();
    let mut text = format!(
        " herd top · {} sessions, {} running · sort {}{}",
        model.rows().len(),
        model.n_running(),
        sort.label(),
        if reverse { " (reversed)" } else { "" },
    );
    if !model.filter().is_empty() {
        text.push_str(&format!(
            " · filter \"{}\" ({} shown)",
            visible(model.filter()),
            model.n_shown()
        ));
    }
    if !model.shows_finished() {
        text.push_str(" · running only");
    }
    if !chrome.note.is_empty() {
        text.push_str(" · ");
        text.push_str(chrome.note);
    }
    let style = Style::default().add_modifier(Modifier::REVERSED);
    buf.set_style(area, style);
    buf.set_stringn(area.x, area.y, text, usize::from(area.width), style);
}

/// The columns, by terminal width: (title, width); `None` width fills.
fn columns(width: u16) -> Vec<(&'static str, Option<u16>)> {
    let wide = width >= 120;
    let mut columns = vec![
        ("ID", Some(if width >= 100 { 17 } else { 12 })),
        ("NAME", Some(if wide { 12 } else { 10 })),
        ("OWNER", Some(if wide { 10 } else { 8 })),
        ("STATE", Some(7)),
        ("EXIT", Some(5)),
        ("AGE", Some(6)),
        ("CPU%", Some(5)),
        ("MEM", Some(6)),
    ];
    if wide {
        columns.push(("COMMAND", Some(22)));
    }
    columns.push(("LAST LINE", None));
    columns
}

fn draw_table(frame: &mut Frame<'_>, area: Rect, model: &mut Model, now: Instant) {
    let columns = columns(area.width);
    let height = usize::from(area.height.saturating_sub(1));
    let first = model.scroll_for(height);
    let selected = model.selected_idx();
    let since = now.saturating_duration_since(model.listed_at());
    let rows: Vec<TableRow<'_>> = model
        .view()
        .enumerate()
        .skip(first)
        .take(height)
        .map(|(i, row)| {
            let usage = model.usage(&row.session_id);
            let cells = columns
                .iter()
                .map(|(title, _)| cell(title, row, usage, since));
            let style = if Some(i) == selected {
                Style::default().add_modifier(Modifier::REVERSED)
            } else {
                Style::default()
            };
            TableRow::new(cells).style(style)
        })
        .collect();
    let widths = columns
        .iter()
        .map(|(_, w)| w.map_or(Constraint::Fill(1), Constraint::Length));
    let header = TableRow::new(columns.iter().map(|(title, _)| Cell::from(*title)))
        .style(Style::default().add_modifier(Modifier::BOLD));
    let table = Table::new(rows, widths).header(header).column_spacing(1);
    frame.render_widget(table, area);
    if model.n_shown() == 0 && area.height > 2 {
        let text = if model.rows().is_empty() {
            "no sessions in this home yet; `herd run -- CMD` starts one"
        } else {
            "no session matches; `/` then Esc clears the filter"
        };
        frame.buffer_mut().set_stringn(
            area.x + 1,
            area.y + 2,
            text,
            usize::from(area.width.saturating_sub(1)),
            Style::default().add_modifier(Modifier::DIM),
        );
    }
}

/// One cell of a row.
fn cell(title: &str, row: &Row, usage: super::model::Shown, since: Duration) -> Cell<'static> {
    match title {
        "ID" => Cell::from(row.session_id.clone()),
        "NAME" => Cell::from(row.name.as_deref().map(visible).unwrap_or_default()),
        "OWNER" => Cell::from(visible(&row.owner_task_id)),
        "STATE" => {
            let state = row.state();
            let color = match state {
                "running" => Color::Green,
                "failed" | "lost" => Color::Red,
                "killed" => Color::Yellow,
                _ => Color::Reset,
            };
            Cell::from(state).style(Style::default().fg(color))
        }
        "EXIT" => Cell::from(row.exit()),
        "AGE" => Cell::from(age(row.age(since))),
        "CPU%" => Cell::from(match usage.cpu_percent {
            Some(cpu) if row.is_running() => format!("{cpu:.1}"),
            _ if row.is_running() => "-".to_owned(),
            _ => String::new(),
        }),
        "MEM" => Cell::from(match usage.memory_bytes {
            Some(memory) if row.is_running() => bytes(memory),
            _ if row.is_running() => "-".to_owned(),
            _ => String::new(),
        }),
        "COMMAND" => Cell::from(visible(&row.command)),
        _ => Cell::from(row.last_line()),
    }
}

/// `42s`, `12m05s`, `3h04m`, `2d03h`.
pub(crate) fn age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3_600 => format!("{}m{:02}s", s / 60, s % 60),
        3_600..86_400 => format!("{}h{:02}m", s / 3_600, s % 3_600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3_600),
    }
}

/// `980K`, `12.3M`, `1.2G`.
pub(crate) fn bytes(n: u64) -> String {
    const K: u64 = 1 << 10;
    const M: u64 = 1 << 20;
    const G: u64 = 1 << 30;
    // Display only: the precision lost in the casts does not show at one decimal.
    let f = |unit: u64| n as f64 / unit as f64;
    match n {
        0..K => format!("{n}B"),
        K..M => format!("{}K", n / K),
        M..G => format!("{:.1}M", f(M)),
        _ => format!("{:.1}G", f(G)),
    }
}

fn draw_pane(buf: &mut Buffer, area: Rect, pane: &Pane, model: &Model) {
    let row = model
        .rows()
        .iter()
        .find(|r| r.session_id == pane.session_id());
    let name = row
        .and_then(|r| r.name.as_deref())
        .map(|n| format!(" {}", visible(n)))
        .unwrap_or_default();
    let state = row.map_or("", Row::state);
    let title = format!(
        " {}{name} · {} · {state}{} ",
        pane.session_id(),
        if pane.is_pty() { "pty" } else { "pipe" },
        if pane.is_ended {
            " · end of output"
        } else {
            ""
        },
    );
    let block = Block::default().borders(Borders::TOP).title(title);
    let inner = block.inner(area);
    ratatui::widgets::Widget::render(block, area, buf);
    let screen = pane.screen();
    let first = pane.first_row(inner.height);
    for y in 0..inner.height {
        let screen_row = first + y;
        for x in 0..inner.width {
            let Some(cell) = screen.cell(screen_row, x) else {
                break;
            };
            if cell.is_wide_continuation() {
                continue;
            }
            let mut style = Style::default()
                .fg(color(cell.fgcolor()))
                .bg(color(cell.bgcolor()));
            for (on, modifier) in [
                (cell.bold(), Modifier::BOLD),
                (cell.dim(), Modifier::DIM),
                (cell.italic(), Modifier::ITALIC),
                (cell.underline(), Modifier::UNDERLINED),
                (cell.inverse(), Modifier::REVERSED),
            ] {
                if on {
                    style = style.add_modifier(modifier);
                }
            }
            let symbol = if cell.has_contents() {
                cell.contents()
            } else {
                " "
            };
            if let Some(target) = buf.cell_mut((inner.x + x, inner.y + y)) {
                target.set_symbol(symbol).set_style(style);
            }
        }
    }
}

/// A vt100 colour as ratatui's.
fn color(c: vt100::Color) -> Color {
    match c {
        vt100::Color::Default => Color::Reset,
        vt100::Color::Idx(i) => Color::Indexed(i),
        vt100::Color::Rgb(r, g, b) => Color::Rgb(r, g, b),
    }
}

fn draw_bottom(buf: &mut Buffer, area: Rect, chrome: &Chrome<'_>) {
    let line = match chrome.prompt {
        Some((label, input)) => Line::from(vec![
            Span::styled(
                label.to_owned(),
                Style::default().add_modifier(Modifier::BOLD),
            ),
            Span::raw(visible(input)),
            Span::styled("█", Style::default()),
        ]),
        None if !chrome.status.is_empty() => Line::from(visible(chrome.status)),
        None => Line::from(Span::styled(
            HELP,
            Style::default().add_modifier(Modifier::DIM),
        )),
    };
    ratatui::widgets::Widget::render(Paragraph::new(line), area, buf);
}
