//! Tests for the bench line protocol.

use super::*;

#[test]
fn a_figure_line_parses_and_other_lines_pass_through() {
    let line = r#"herd-bench {"name":"pty.scan","unit":"MB/s","value":800.0,"baseline":1600.0,"ratio":0.5,"target":">= 0.5"}"#;
    let fig = parse_line(line).expect("a figure").expect("valid");
    assert_eq!(fig.name, "pty.scan");
    assert_eq!(fig.ratio, Some(0.5));
    assert!(parse_line("Running benches/scan.rs").is_none());
}

#[test]
fn a_malformed_figure_is_an_error_naming_the_line() {
    let err = parse_line("herd-bench {not json")
        .expect("a figure line")
        .unwrap_err();
    assert!(format!("{err:#}").contains("herd-bench {not json"));
}

fn fig(name: &str, unit: &str, value: f64, ratio: Option<f64>) -> Figure {
    Figure {
        name: name.into(),
        unit: unit.into(),
        value,
        baseline: None,
        baseline_name: None,
        ratio,
        target: None,
        note: None,
    }
}

#[test]
fn a_comparison_judges_by_the_in_run_ratio_and_the_unit_direction() {
    let before = [
        fig("spawn", "ms", 4.0, Some(2.0)),
        fig("ingest", "MB/s", 1000.0, None),
        fig("rss", "MB", 80.0, None),
        fig("odd", "ratio", 1.0, None),
        fig("gone", "ms", 1.0, None),
    ];
    let after = [
        // The value doubled on a busy machine, but the in-run ratio held.
        fig("spawn", "ms", 8.0, Some(2.1)),
        fig("ingest", "MB/s", 800.0, None),
        fig("rss", "MB", 60.0, None),
        fig("odd", "ratio", 3.0, None),
        fig("new", "ms", 1.0, None),
    ];
    let rows = compare::rows(&before, &after);
    let verdicts: Vec<(&str, bool, &str)> = rows
        .iter()
        .map(|r| (r.name.as_str(), r.by_ratio, r.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("spawn", true, "same"),
            ("ingest", false, "WORSE"),
            ("rss", false, "better"),
            ("odd", false, "-"),
        ]
    );
}

#[test]
fn units_say_which_way_is_better() {
    use compare::{Better, better};
    assert_eq!(better("ms"), Better::Lower);
    assert_eq!(better("KiB"), Better::Lower);
    assert_eq!(better("jobs/s"), Better::Higher);
    assert_eq!(better("x"), Better::Unknown);
    // CPU seconds per wall second end in `/s` but are a cost, not a rate.
    assert_eq!(better("cpu s/s"), Better::Lower);
    assert_eq!(better("x faster"), Better::Higher);
}

#[test]
fn a_unit_without_a_direction_takes_it_from_the_target() {
    use compare::{Better, direction};
    let mut f = fig("shim.ingest", "ratio", 0.95, Some(0.95));
    f.target = Some(">= 0.9".into());
    assert_eq!(direction(&f), Better::Higher);
    f.target = Some("<= 2x".into());
    assert_eq!(direction(&f), Better::Lower);
    f.target = None;
    assert_eq!(direction(&f), Better::Unknown);
    let cpu = fig("notify.heartbeat", "cpu s/s", 0.02, None);
    assert_eq!(direction(&cpu), Better::Lower);
}

#[test]
fn several_runs_a_side_count_their_spread_as_noise() {
    let run = |p99: f64, median: f64, rate: f64| {
        vec![
            fig("kill.p99", "ms", p99 * 10.0, Some(p99)),
            fig("kill.median", "ms", median, None),
            fig("ingest", "MB/s", rate, None),
        ]
    };
    // The tail ratio swings from 5 to 9.5 between the two runs before; one run
    // after at 8.6 is inside that spread, so it is noise, not a regression.
    let before = [run(5.0, 40.0, 1000.0), run(9.5, 46.0, 1100.0)];
    let after = [run(8.6, 60.0, 700.0), run(10.1, 62.0, 800.0)];
    let rows = compare::rows_of_runs(&before, &after);
    let verdicts: Vec<(&str, &str)> = rows.iter().map(|r| (r.name.as_str(), r.verdict)).collect();
    assert_eq!(
        verdicts,
        [
            ("kill.p99", "same"),
            // Every run after is beyond every run before by more than the margin.
            ("kill.median", "WORSE"),
            ("ingest", "WORSE"),
        ]
    );
    assert_eq!(rows[0].before.low, 5.0);
    assert_eq!(rows[0].before.high, 9.5);
    assert_eq!(rows[0].after.runs, 2);
    // The same figures one run a side: the plain ±10% rule.
    let one = compare::rows(&before[0], &after[0]);
    assert_eq!(one[0].verdict, "WORSE");
}

#[test]
fn a_figure_is_compared_by_ratio_only_when_every_run_has_one() {
    let before = [
        vec![fig("spawn", "ms", 4.0, Some(2.0))],
        vec![fig("spawn", "ms", 4.2, None)],
    ];
    let after = [vec![fig("spawn", "ms", 4.1, Some(2.1))]];
    let rows = compare::rows_of_runs(&before, &after);
    assert!(!rows[0].by_ratio);
    assert_eq!((rows[0].before.low, rows[0].before.high), (4.0, 4.2));
    assert_eq!(rows[0].verdict, "same");
}
