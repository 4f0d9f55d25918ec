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
