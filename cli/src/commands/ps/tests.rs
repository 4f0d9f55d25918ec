//! `herd ps` widths: rows fit the terminal; a narrow one loses the last line,
//! then the command, and never wraps a row.

use super::{Cells, fixed_width, flexible_widths, layout};

const HEADER: [&str; 7] = ["ID", "OWNER", "STATE", "PID", "AGE", "COMMAND", "LAST LINE"];

fn cells(id: &str, state: &str) -> Cells {
    (
        vec![
            id.to_owned(),
            "cli".to_owned(),
            state.to_owned(),
            "20550".to_owned(),
            "2s".to_owned(),
        ],
        "sh -c 'a long command line'".to_owned(),
        "the last line of its output".to_owned(),
    )
}

/// The width a row takes: every column padded by one space on each side.
fn row_width(fixed: usize, n_columns: usize, command: Option<usize>, line: Option<usize>) -> usize {
    fixed + 2 * n_columns + command.unwrap_or(0) + line.unwrap_or(0)
}

#[test]
fn ps_at_80_columns_with_names_and_owners_never_wraps() {
    // Seen: a named session, an OWNER column and `killed (SIGTERM)` left 14
    // columns, and both flexible columns still took at least 8 (plus a header of 9):
    // 83 columns at 80.
    let rows = vec![
        cells("proc_34e8e9d86ce5 build", "running"),
        cells("proc_a58bbef64541", "killed (SIGTERM)"),
        cells("proc_a58bbef7aaaa", "exited 0"),
    ];
    for width in [60u16, 70, 80, 100, 160] {
        let (shown, command, line) = layout(&HEADER, rows.clone(), Some(width));
        let fixed = fixed_width(&HEADER, &shown);
        let n = 5 + usize::from(command.is_some()) + usize::from(line.is_some());
        let used = row_width(fixed, n, command, line);
        assert!(
            used <= usize::from(width),
            "{width}: {used} ({command:?}, {line:?})"
        );
        // What is shown is at least as wide as its header.
        assert!(
            command.is_none_or(|c| c >= "COMMAND".len()),
            "{width}: {command:?}"
        );
        assert!(
            line.is_none_or(|l| l >= "LAST LINE".len()),
            "{width}: {line:?}"
        );
        if line.is_some() {
            assert!(command.is_some(), "the last line goes before the command");
        }
        // Ids stay apart: cut ones still tell every row from the others.
        let ids: std::collections::HashSet<&str> = shown
            .iter()
            .map(|(f, _, _)| f[0].split(' ').next().unwrap_or_default())
            .collect();
        assert_eq!(ids.len(), 3, "{width}: {shown:?}");
    }
    // Wide: both columns, 55/45, whole ids.
    let (shown, command, line) = layout(&HEADER, rows.clone(), Some(160));
    assert!(matches!((command, line), (Some(c), Some(l)) if c > l));
    assert_eq!(shown[0].0[0], "proc_34e8e9d86ce5 build");
    // At 80: ids cut to what tells them apart (the two proc_a58bbef… need 8 hex).
    let (shown, _, _) = layout(&HEADER, rows.clone(), Some(80));
    assert_eq!(shown[0].0[0], "proc_34e8e9d8 build");
    assert_eq!(shown[1].0[0], "proc_a58bbef6");
    // Off a terminal: whole ids and fixed widths.
    let (shown, command, line) = layout(&HEADER, rows, None);
    assert_eq!((command, line), (Some(40), Some(50)));
    assert_eq!(shown[1].0[0], "proc_a58bbef64541");
}

#[test]
fn flexible_columns_give_way_last_line_first() {
    let rows = vec![cells("proc_34e8e9d86ce5", "running")];
    assert!(matches!(
        flexible_widths(&HEADER, &rows, Some(160)),
        (Some(_), Some(_))
    ));
    assert!(matches!(
        flexible_widths(&HEADER, &rows, Some(66)),
        (Some(_), None)
    ));
    assert_eq!(flexible_widths(&HEADER, &rows, Some(50)), (None, None));
}

// At 80 columns a long name, an `mcp-<hex>` owner and a long state
// still fit: the state loses its parenthesis, the owner and the name are cut,
// and the command keeps a column.
#[test]
fn ps_at_80_columns_with_a_long_name_owner_and_state_fits() {
    let mut long = cells(
        "proc_34e8e9d86ce5 a-rather-long-service-name",
        "killed (restarted, SIGTERM)",
    );
    long.0[1] = "mcp-0123456789ab".to_owned();
    let rows = vec![long, cells("proc_a58bbef64541", "exited 0")];
    let (shown, command, line) = layout(&HEADER, rows, Some(80));
    let fixed = fixed_width(&HEADER, &shown);
    let n = 5 + usize::from(command.is_some()) + usize::from(line.is_some());
    let used = row_width(fixed, n, command, line);
    assert!(used <= 80, "{used} ({command:?}, {line:?}): {shown:?}");
    assert!(command.is_some(), "{shown:?}");
    assert_eq!(shown[0].0[2], "killed");
    assert!(shown[0].0[1].ends_with('…'), "{shown:?}");
    assert!(
        shown[0].0[0].starts_with("proc_34e8e9d a-rather"),
        "{shown:?}"
    );
    assert_eq!(shown[1].0[2], "exited 0");
}

// The last line of a `\r` progress bar is its latest frame.
#[test]
fn the_last_line_of_a_progress_bar_is_its_latest_frame() {
    assert_eq!(
        super::last_line("start\nprogress 25%\rprogress 50%\rprogress done!\n"),
        "progress done!"
    );
    assert_eq!(super::last_line("a\nb 10%\rb 20%\r"), "b 20%");
    assert_eq!(super::last_line("plain\n"), "plain");
}
