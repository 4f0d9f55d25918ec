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
