//! Unit tests of `herd top`'s model, renderer, keys and `/proc` parsing; the
//! whole program runs under tmux in `cli/tests/it/top.rs`.

use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;

use super::keys::{self, Command, Edit, Key};
use super::model::{Model, Pane, Row, SortKey, Usage, last_line};
use super::render;

fn row(i: usize, name: Option<&str>, owner: &str, running: bool) -> Row {
    serde_json::from_value(json!({
        "session_id": format!("proc_{i:012x}"),
        "name": name,
        "command": format!("job number {i}"),
        "pid": 1000 + i,
        "mode": "pipe",
        "owner_task_id": owner,
        "uptime_seconds": 10 * i,
        "status": if running { "running" } else { "exited" },
        "output_preview": format!("line {i}\n"),
        "exit_code": (!running).then_some(1),
        "duration_seconds": (!running).then_some(3),
        "completion_reason": (!running).then_some("exited"),
    }))
    .expect("a list row")
}

fn ids(model: &Model) -> Vec<String> {
    model.view().map(|r| r.session_id.clone()).collect()
}

fn model_of(rows: Vec<Row>) -> Model {
    let mut m = Model::new(Instant::now());
    m.set_rows(rows, Instant::now());
    m
}

#[test]
fn state_sort_puts_running_first_then_the_newest() {
    let m = model_of(vec![
        row(0, None, "a", true),
        row(1, None, "a", false),
        row(2, None, "a", true),
    ]);
    assert_eq!(
        ids(&m),
        [
            "proc_000000000002",
            "proc_000000000000",
            "proc_000000000001"
        ]
    );
    assert_eq!(
        m.selected().map(|r| r.session_id.as_str()),
        Some("proc_000000000002")
    );
}

#[test]
fn sorting_cycles_and_keeps_the_selection_on_its_session() {
    let mut m = model_of(vec![
        row(0, Some("zeta"), "b", true),
        row(1, Some("alpha"), "a", true),
        row(2, None, "c", true),
    ]);
    m.move_selection(2);
    let chosen = m.selected().map(|r| r.session_id.clone());
    let mut seen = vec![m.sort().0];
    for _ in 0..5 {
        m.cycle_sort();
        seen.push(m.sort().0);
        assert_eq!(
            m.selected().map(|r| r.session_id.clone()),
            chosen,
            "after {:?}",
            m.sort()
        );
    }
    assert_eq!(
        seen,
        [
            SortKey::State,
            SortKey::Age,
            SortKey::Cpu,
            SortKey::Memory,
            SortKey::Name,
            SortKey::Owner
        ]
    );
    m.cycle_sort();
    assert_eq!(m.sort().0, SortKey::State, "the cycle wraps");
    while m.sort().0 != SortKey::Name {
        m.cycle_sort();
    }
    assert_eq!(
        ids(&m),
        [
            "proc_000000000001",
            "proc_000000000000",
            "proc_000000000002"
        ],
        "by name, unnamed last"
    );
    m.reverse_sort();
    assert_eq!(
        ids(&m),
        [
            "proc_000000000002",
            "proc_000000000000",
            "proc_000000000001"
        ]
    );
}

// A listing shorter than the last one (finished sessions past the
// daemon's bound drop out) with the selection far down the old view: no index
// past the rows, and the selection lands on a row that is there.
#[test]
fn a_shorter_listing_keeps_every_index_inside_the_rows() {
    let mut m = model_of((0..100).map(|i| row(i, None, "a", i % 2 == 0)).collect());
    m.select_edge(true);
    assert_eq!(m.selected_idx(), Some(99));
    for sort in 0..6 {
        let n = 64 - sort * 10;
        m.set_rows(
            (0..n).map(|i| row(i, None, "a", i % 3 == 0)).collect(),
            Instant::now(),
        );
        assert_eq!(m.n_shown(), n, "after {:?}", m.sort());
        assert_eq!(m.selected_idx(), Some(n - 1), "after {:?}", m.sort());
        m.cycle_sort();
        m.select_edge(true);
    }
    m.set_rows(Vec::new(), Instant::now());
    assert!(m.selected().is_none());
    m.move_selection(3);
    assert!(m.selected().is_none());
}

#[test]
fn cpu_and_memory_sorts_use_the_sample() {
    let mut m = model_of(vec![row(0, None, "a", true), row(1, None, "a", true)]);
    let usage = |cpu, rss| Usage {
        cpu_percent: cpu,
        rss_bytes: rss,
        n_processes: 1,
    };
    m.set_usage(
        [
            ("proc_000000000000".to_owned(), usage(90.0, 1)),
            ("proc_000000000001".to_owned(), usage(1.0, 1 << 30)),
        ]
        .into(),
    );
    m.cycle_sort();
    m.cycle_sort();
    assert_eq!(m.sort().0, SortKey::Cpu);
    assert_eq!(ids(&m)[0], "proc_000000000000");
    m.cycle_sort();
    assert_eq!(ids(&m)[0], "proc_000000000001");
}

// CPU% and MEM come from the cgroup figures a row carries (`usage`):
// the CPU counter's growth over the time between two listings at least 500 ms
// apart, the memory as it is; a session without them shows the `/proc` sample.
#[test]
fn cpu_and_memory_come_from_the_rows_cgroup_usage() {
    let with_usage = |i, cpu_usec: u64, memory: u64| {
        let mut r = row(i, None, "a", true);
        r.usage = serde_json::from_value(json!({"cpu_usec": cpu_usec, "memory_bytes": memory}))
            .expect("a usage");
        r
    };
    let t0 = Instant::now();
    let mut m = Model::new(t0);
    m.set_rows(
        vec![with_usage(0, 1_000, 4096), row(1, None, "a", true)],
        t0,
    );
    m.set_usage(
        [(
            "proc_000000000001".to_owned(),
            Usage {
                cpu_percent: 7.0,
                rss_bytes: 99,
                n_processes: 1,
            },
        )]
        .into(),
    );
    let first = m.usage("proc_000000000000");
    assert_eq!(first.memory_bytes, Some(4096));
    assert_eq!(
        first.cpu_percent, None,
        "one counter reading is no figure yet"
    );
    // A listing 100 ms on is too soon to compare; one a second on gives 25%.
    let t1 = t0 + Duration::from_millis(100);
    m.set_rows(
        vec![with_usage(0, 90_000, 8192), row(1, None, "a", true)],
        t1,
    );
    assert_eq!(m.usage("proc_000000000000").cpu_percent, None);
    let t2 = t0 + Duration::from_secs(1);
    m.set_rows(
        vec![with_usage(0, 251_000, 8192), row(1, None, "a", true)],
        t2,
    );
    let shown = m.usage("proc_000000000000");
    assert!(
        shown.cpu_percent.is_some_and(|p| (p - 25.0).abs() < 0.01),
        "{shown:?}"
    );
    assert_eq!(shown.memory_bytes, Some(8192));
    assert_eq!(
        m.usage("proc_000000000001"),
        super::model::Shown {
            cpu_percent: Some(7.0),
            memory_bytes: Some(99)
        },
        "no cgroup: the /proc sample"
    );
    while m.sort().0 != SortKey::Cpu {
        m.cycle_sort();
    }
    assert_eq!(ids(&m)[0], "proc_000000000000", "25% before 7%");
    let mut done = with_usage(0, 300_000, 8192);
    done.status = "exited".to_owned();
    m.set_rows(vec![done], t2 + Duration::from_secs(1));
    assert_eq!(m.usage("proc_000000000000"), super::model::Shown::default());
}

#[test]
fn the_filter_matches_id_name_owner_command_and_state() {
    let mut m = model_of(vec![
        row(0, Some("web"), "alice", true),
        row(1, Some("db"), "bob", false),
    ]);
    for (needle, expect) in [
        ("WEB", vec!["proc_000000000000"]),
        ("bob", vec!["proc_000000000001"]),
        ("failed", vec!["proc_000000000001"]),
        ("number 0", vec!["proc_000000000000"]),
        ("0000000001", vec!["proc_000000000001"]),
        ("nothing", vec![]),
        ("", vec!["proc_000000000000", "proc_000000000001"]),
    ] {
        m.set_filter(needle);
        assert_eq!(ids(&m), expect, "filter {needle:?}");
    }
    m.set_filter("db");
    assert_eq!(
        m.selected().map(|r| r.session_id.as_str()),
        Some("proc_000000000001"),
        "the selection moves onto a shown row"
    );
    m.set_filter("");
    m.toggle_finished();
    assert_eq!(ids(&m), ["proc_000000000000"], "finished rows hidden");
}

#[test]
fn a_finished_row_says_how_it_ended_and_how_long_it_ran() {
    let failed = row(1, None, "a", false);
    assert_eq!(failed.state(), "failed");
    assert_eq!(failed.exit(), "1");
    assert_eq!(failed.age(Duration::from_secs(100)), Duration::from_secs(3));
    let killed: Row = serde_json::from_value(json!({
        "session_id": "proc_1", "status": "exited", "signal": 15,
        "completion_reason": "killed",
    }))
    .expect("a list row");
    assert_eq!((killed.state(), killed.exit().as_str()), ("killed", "TERM"));
    let running = row(2, None, "a", true);
    assert_eq!(running.age(Duration::from_secs(5)), Duration::from_secs(25));
}

#[test]
fn the_last_line_is_what_a_terminal_shows() {
    for (text, expect) in [
        ("one\ntwo\n", "two"),
        ("done\n\n\n", "done"),
        ("\rprogress 10%\rprogress 90%", "progress 90%"),
        ("\u{1b}[31mred\u{1b}[0m text\r\n", "red text"),
        ("\u{1b}]0;title\u{7}after", "after"),
        ("tab\there", "tab here"),
        ("bidi \u{202e}txet", "bidi txet"),
        ("", ""),
    ] {
        assert_eq!(last_line(text), expect, "{text:?}");
    }
}

#[test]
fn a_pty_pane_shows_colours_and_the_progress_bars_last_state() {
    let mut pane = Pane::new("proc_1", true);
    pane.feed("\u{1b}[31mRED\u{1b}[0m\r\n");
    pane.feed("\rprogress 50%\rprogress 99%\r\n");
    let screen = pane.screen();
    assert_eq!(
        screen.cell(0, 0).map(|c| c.fgcolor()),
        Some(vt100::Color::Idx(1))
    );
    assert!(screen.contents().contains("progress 99%"));
    assert!(!screen.contents().contains("progress 50%"));
    assert_eq!(pane.first_row(10), 0, "two rows fit");
    for i in 0..20 {
        pane.feed(&format!("row {i}\r\n"));
    }
    // 22 rows written: the last 5 show in a pane 5 rows high.
    assert_eq!(pane.first_row(5), 17);
}

#[test]
fn a_pipe_pane_starts_each_line_at_the_left_edge() {
    let mut pane = Pane::new("proc_1", false);
    pane.feed("first\nsecond\n");
    let text = pane.screen().contents();
    assert!(text.starts_with("first\nsecond"), "{text:?}");
}

#[test]
fn at_80_columns_every_row_is_one_line_cut_at_the_edge() {
    let mut rows: Vec<Row> = (0..30)
        .map(|i| {
            row(
                i,
                Some("a-rather-long-name"),
                "owner-with-long-name",
                i % 2 == 0,
            )
        })
        .collect();
    rows[0].output_preview = format!("START{}END\n", "x".repeat(200));
    let mut m = model_of(rows);
    let mut pane = Pane::new("proc_000000000000", false);
    pane.feed(&format!("START{}END\n", "y".repeat(200)));
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).expect("a test backend");
    let chrome = render::Chrome {
        pane: Some(&pane),
        zoomed: false,
        status: "",
        prompt: None,
        note: "",
        now: Instant::now(),
    };
    terminal
        .draw(|frame| render::draw(frame, &mut m, &chrome))
        .expect("draws");
    let buffer = terminal.backend().buffer().clone();
    let lines: Vec<String> = (0..24)
        .map(|y| {
            (0..80)
                .map(|x| buffer[(x, y)].symbol().to_owned())
                .collect()
        })
        .collect();
    let text = lines.join("\n");
    assert!(lines[1].starts_with("ID"), "{text}");
    // 24 lines: title, header, 13 rows, the pane's title and 7 rows, the key line.
    let shown: Vec<&String> = lines.iter().filter(|l| l.starts_with("proc_")).collect();
    assert_eq!(shown.len(), 13, "{text}");
    assert!(
        shown
            .iter()
            .all(|l| l.contains("running") || l.contains("failed")),
        "{text}"
    );
    assert!(!text.contains("END"), "long text is cut:\n{text}");
    assert!(text.contains("START"), "{text}");
    assert!(lines[23].starts_with("q quit"), "{text}");
}

#[test]
fn the_selection_scrolls_the_table() {
    let mut m = model_of((0..50).map(|i| row(i, None, "a", true)).collect());
    assert_eq!(m.scroll_for(10), 0);
    m.move_selection(15);
    assert_eq!(m.scroll_for(10), 6, "the selection is the last row drawn");
    m.move_selection(-15);
    assert_eq!(m.scroll_for(10), 0);
    m.select_edge(true);
    assert_eq!(m.selected_idx(), Some(49));
    assert_eq!(m.scroll_for(10), 40);
}

#[test]
fn keys_map_to_commands_and_input_lines_edit() {
    assert_eq!(keys::command(Key::Char('q')), Some(Command::Quit));
    assert_eq!(keys::command(Key::Interrupt), Some(Command::Quit));
    assert_eq!(keys::command(Key::Char('k')), Some(Command::Kill));
    assert_eq!(keys::command(Key::Char('/')), Some(Command::Filter));
    assert_eq!(keys::command(Key::Char('x')), None);
    let mut text = String::new();
    assert_eq!(keys::edit(&mut text, Key::Char('a')), Edit::Typing);
    assert_eq!(keys::edit(&mut text, Key::Char('b')), Edit::Typing);
    assert_eq!(keys::edit(&mut text, Key::Backspace), Edit::Typing);
    assert_eq!(text, "a");
    assert_eq!(keys::edit(&mut text, Key::Enter), Edit::Submit);
    assert_eq!(keys::edit(&mut text, Key::Esc), Edit::Cancel);
    let mut long = String::new();
    for _ in 0..keys::MAX_INPUT_CHARS + 10 {
        keys::edit(&mut long, Key::Char('z'));
    }
    assert_eq!(
        long.chars().count(),
        keys::MAX_INPUT_CHARS,
        "an input line is bounded"
    );
}

#[test]
fn the_sampler_sees_this_process_tree() {
    let mut sampler = super::sampler::Sampler::new();
    let me = i32::try_from(std::process::id()).expect("a pid fits i32");
    let targets = vec![("me".to_owned(), me), ("gone".to_owned(), i32::MAX)];
    let first = sampler.sample(&targets, Instant::now());
    let usage = first.get("me").expect("this process is sampled");
    assert!(usage.rss_bytes > 0 && usage.n_processes >= 1, "{usage:?}");
    assert!(
        !first.contains_key("gone"),
        "a pid that does not exist has no figure"
    );
    // Burn some CPU, then the second sample shows it.
    let start = Instant::now();
    let mut x = 0u64;
    while start.elapsed() < Duration::from_millis(300) {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
    }
    let second = sampler.sample(&targets, Instant::now());
    assert!(second["me"].cpu_percent > 10.0, "{:?}", second["me"]);
}

#[test]
fn bytes_and_ages_read_short() {
    assert_eq!(render::bytes(512), "512B");
    assert_eq!(render::bytes(3 << 10), "3K");
    assert_eq!(render::bytes(5 << 20), "5.0M");
    assert_eq!(render::age(Duration::from_secs(42)), "42s");
    assert_eq!(render::age(Duration::from_secs(725)), "12m05s");
    assert_eq!(render::age(Duration::from_secs(3 * 3600 + 240)), "3h04m");
    assert_eq!(
        render::age(Duration::from_secs(2 * 86_400 + 3 * 3600)),
        "2d03h"
    );
}
