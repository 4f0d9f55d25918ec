//! Unit tests for log-file pages: every page of real files is compared with the same
//! page cut from `str::lines` over the whole content.

use std::io::Write;

use super::*;
use herd_hooks::Shown;

/// A real file holding `content`.
fn file_with(content: &[u8]) -> (tempfile::NamedTempFile, File) {
    let mut tmp = tempfile::NamedTempFile::new().expect("a temp file can be created");
    tmp.write_all(content).expect("the temp file is writable");
    let file = tmp.reopen().expect("the temp file reopens");
    (tmp, file)
}

/// The page `str::lines` gives: (first line idx, the lines joined, total lines).
fn expected(content: &str, offset: Option<usize>, limit: usize) -> (usize, String, usize) {
    let lines: Vec<&str> = content.lines().collect();
    let total = lines.len();
    let start = offset
        .unwrap_or_else(|| total.saturating_sub(limit))
        .min(total);
    let end = start.saturating_add(limit).min(total);
    (start, lines[start..end].join("\n"), total)
}

/// Checks one page of `content` against `str::lines` with a budget that fits it.
fn check(content: &str, offset: Option<usize>, limit: usize) {
    let (_tmp, file) = file_with(content.as_bytes());
    let page = read_page(&file, offset, limit, usize::MAX / 2).expect("the file reads");
    let (start, text, total) = expected(content, offset, limit);
    let got = String::from_utf8(page.bytes.clone()).expect("ascii in, ascii out");
    let got: Vec<&str> = got.lines().collect();
    assert_eq!(
        (page.first_line_idx, got.join("\n"), page.n_total_lines),
        (start, text, total),
        "content {:?} offset {offset:?} limit {limit}",
        &content[..content.len().min(60)]
    );
    assert_eq!(page.n_lines, got.len(), "{offset:?} {limit}");
    assert!(!page.is_head_cut && !page.is_tail_cut && !page.is_byte_limited);
}

#[test]
fn b39_pages_match_str_lines_on_small_files() {
    let contents = [
        "",
        "\n",
        "\n\n\n",
        "a",
        "a\n",
        "a\nb",
        "a\nb\n",
        "one\n\nthree\n",
        "x\r\ny\r\n",
        "1\n2\n3\n4\n5\n6\n7\n8\n9\n10",
    ];
    for content in contents {
        for limit in 0..6 {
            check(content, None, limit);
            for offset in 0..12 {
                check(content, Some(offset), limit);
            }
        }
    }
}

#[test]
fn b39_pages_cross_block_boundaries_from_both_ends() {
    // Lines of varying length so newlines fall on and around 64 KiB block edges.
    let mut content = String::new();
    for i in 0..60_000 {
        content.push_str(&"x".repeat(i % 7));
        content.push_str(&format!("{i}\n"));
    }
    content.push_str("partial");
    let total = content.lines().count();
    for offset in [
        0,
        1,
        9_361,
        29_999,
        30_000,
        30_001,
        45_000,
        total - 1,
        total,
    ] {
        check(&content, Some(offset), 3);
    }
    check(&content, None, 200);
    check(&content, None, total + 5);
}

#[test]
fn b39_random_files_page_like_str_lines() {
    let mut rng = fastrand::Rng::with_seed(39);
    for _ in 0..40 {
        let n = rng.usize(0..200_000);
        let content: String = (0..n)
            .map(|_| if rng.u8(..) < 20 { '\n' } else { 'a' })
            .collect();
        let total = content.lines().count();
        let offset = rng.usize(0..=total + 1);
        let limit = rng.usize(0..300);
        check(&content, Some(offset), limit);
        check(&content, None, limit);
    }
}

#[test]
fn b39_pages_keep_to_the_byte_budget_and_cut_only_a_line_longer_than_it() {
    let mut content = b"first\n".to_vec();
    content.extend(std::iter::repeat_n(b'z', 5_000_000));
    content.extend(b"\nlast\n");
    let (_tmp, file) = file_with(&content);

    // Whole lines that do not fit are left for another page.
    let tail = read_page(&file, None, 200, 1000).expect("the file reads");
    assert_eq!(tail.bytes, b"last\n");
    assert_eq!(
        (tail.n_total_lines, tail.first_line_idx, tail.n_lines),
        (3, 2, 1)
    );
    assert!(tail.is_byte_limited && !tail.is_head_cut);
    let head = read_page(&file, Some(0), 200, 1000).expect("the file reads");
    assert_eq!(head.bytes, b"first\n");
    assert_eq!((head.first_line_idx, head.n_lines), (0, 1));
    assert!(head.is_byte_limited && !head.is_tail_cut);

    // A page at an offset keeps the start of a line longer than the budget.
    let long = read_page(&file, Some(1), 200, 1000).expect("the file reads");
    assert_eq!(long.bytes, vec![b'z'; 1000]);
    assert_eq!((long.first_line_idx, long.n_lines), (1, 1));
    assert!(long.is_tail_cut && !long.reaches_end);

    // The default page is anchored at the end: it keeps the end of such a line.
    content.truncate(content.len() - b"last\n".len());
    let (_tmp, file) = file_with(&content);
    let tail = read_page(&file, None, 200, 1000).expect("the file reads");
    assert_eq!(tail.bytes.len(), 1000);
    assert!(tail.bytes.ends_with(b"zzz\n"));
    assert_eq!(
        (tail.n_total_lines, tail.first_line_idx, tail.n_lines),
        (2, 1, 1)
    );
    assert!(tail.is_head_cut && tail.reaches_end);

    // Lines that fit the budget exactly are not cut.
    let last = read_page(&file, None, 1, 5_000_001).expect("the file reads");
    assert!(!last.is_head_cut && !last.is_byte_limited);
    assert_eq!(last.bytes.len(), 5_000_001);
}

#[test]
fn b39_text_pages_carry_their_context_and_strip_ansi() {
    let mut content = b"\x1b[31mred\x1b[0m\r\n".to_vec();
    content.extend(b"word ");
    content.extend(std::iter::repeat_n(b'k', 3000));
    content.extend(b" tail\r\n");
    let (tmp, _file) = file_with(&content);
    let first = TextPage::of_file(tmp.path(), Some(0), 1, 100, false, &|_| None)
        .expect("the file reads")
        .expect("the file exists");
    assert_eq!(first.text(), "red\r");
    let head = TextPage::of_file(tmp.path(), Some(1), 10, 100, false, &|_| None)
        .expect("the file reads")
        .expect("the file exists");
    // The page is cut where the budget ends; the rest of the line is context, so
    // the pipeline sees a token the cut goes through whole (B30).
    assert_eq!(head.text().len(), 100);
    assert!(head.text().starts_with("word k"));
    assert!(head.source.ends_with(" tail\r\n"));
    assert!(head.source.starts_with("red\r\n"));
    assert!(head.is_tail_cut);
    let tail = TextPage::of_file(tmp.path(), None, 10, 100, false, &|_| None)
        .expect("the file reads")
        .expect("the file exists");
    assert!(tail.text().ends_with("kkk tail\r"));
    assert!(tail.source.starts_with("red\r\nword k"));
    assert!(tail.is_head_cut);
    assert_eq!((tail.first_line_idx, tail.n_total_lines), (1, 2));
    let (marked, note) = tail.marked(Shown::herd_text("tail\r"), 100);
    assert_eq!(marked.as_str(), format!("{LINE_CUT_MARKER}tail"));
    assert!(note.is_some_and(|n| n.contains("100 bytes")));
    let missing = TextPage::of_file(
        &tmp.path().with_extension("gone"),
        None,
        10,
        100,
        false,
        &|_| None,
    )
    .expect("a missing file is no error");
    assert_eq!(missing, None);
}

#[test]
fn b39_a_running_sessions_unfinished_character_is_held() {
    let (tmp, _file) = file_with("a\nb€".as_bytes().split_at(5).0);
    let running = TextPage::of_file(tmp.path(), None, 10, 100, true, &|_| None)
        .expect("the file reads")
        .expect("the file exists");
    assert_eq!(running.text(), "a\nb");
    let finished = TextPage::of_file(tmp.path(), None, 10, 100, false, &|_| None)
        .expect("the file reads")
        .expect("the file exists");
    assert_eq!(finished.text(), "a\nb\u{fffd}");
}

#[test]
fn b39_small_budgets_keep_pages_bounded_and_aligned_to_lines() {
    let mut rng = fastrand::Rng::with_seed(8);
    for _ in 0..300 {
        let n = rng.usize(0..5_000);
        let content: String = (0..n)
            .map(|_| if rng.u8(..) < 10 { '\n' } else { 'b' })
            .collect();
        let lines: Vec<&str> = content.lines().collect();
        let (_tmp, file) = file_with(content.as_bytes());
        let max_bytes = rng.usize(1..400);
        let limit = rng.usize(1..50);
        let offset = rng.usize(0..=lines.len());
        for asked in [None, Some(offset)] {
            let page = read_page(&file, asked, limit, max_bytes).expect("the file reads");
            assert!(page.bytes.len() <= max_bytes, "{asked:?}");
            assert!(page.n_lines <= limit);
            assert_eq!(page.n_total_lines, lines.len());
            match asked {
                None => assert_eq!(page.first_line_idx + page.n_lines, lines.len()),
                Some(offset) => assert_eq!(page.first_line_idx, offset),
            }
            if page.is_head_cut || page.is_tail_cut {
                assert_eq!(page.n_lines, 1);
                continue;
            }
            let text = String::from_utf8(page.bytes).expect("ascii in, ascii out");
            let want = &lines[page.first_line_idx..page.first_line_idx + page.n_lines];
            assert_eq!(text.lines().collect::<Vec<_>>(), want, "{asked:?}");
            let asked_from = asked.unwrap_or(lines.len().saturating_sub(limit));
            let all_fit = page.n_lines == limit.min(lines.len() - asked_from);
            assert_eq!(page.is_byte_limited, !all_fit, "{asked:?}");
        }
    }
}

/// A page of the log `content` at line `offset`, as the log route shows it.
fn shown_page(content: &str, offset: usize, limit: usize) -> String {
    let (tmp, _file) = file_with(content.as_bytes());
    let page = TextPage::of_file(tmp.path(), Some(offset), limit, 64 * 1024, false, &|_| None)
        .expect("the file reads")
        .expect("the file exists");
    let ctx = herd_hooks::OutputContext {
        route: herd_hooks::Route::Log,
        command: "job",
        return_code: Some(0),
        owner_task_id: "o",
        session_id: "s",
        backend: "local",
        partial: false,
    };
    herd_hooks::Pipeline::redaction_only()
        .show(&ctx, page.window())
        .as_str()
        .to_owned()
}

#[test]
fn b30_a_page_deep_in_seq_output_is_not_masked_and_one_deep_in_a_key_is() {
    // `seq 1 3000000`: 20 MB of lines that could each be key body, no BEGIN.
    let mut seq = String::new();
    for i in 1..=3_000_000u32 {
        seq.push_str(&i.to_string());
        seq.push('\n');
    }
    assert!(seq.len() > 16 * 1024 * 1024);
    assert_eq!(shown_page(&seq, 2_999_000, 3), "2999001\n2999002\n2999003");
    // A key whose BEGIN lies megabytes before the page: only masks.
    let body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n";
    let key = format!(
        "start\n-----BEGIN RSA PRIVATE KEY-----\n{}",
        body.repeat(100_000)
    );
    let shown = shown_page(&key, 90_000, 3);
    assert_eq!(
        shown,
        "[REDACTED PRIVATE KEY]\n[REDACTED PRIVATE KEY]\n[REDACTED PRIVATE KEY]"
    );
}

#[test]
fn b39_a_page_says_when_it_ends_with_a_running_sessions_unfinished_line() {
    let page = |content: &str, offset: Option<usize>, running: bool| {
        let (tmp, _file) = file_with(content.as_bytes());
        let from_file = TextPage::of_file(tmp.path(), offset, 10, 100, running, &|_| None)
            .expect("the file reads")
            .expect("the file exists")
            .ends_unfinished();
        let from_text = TextPage::of_text(content, offset, 10)
            .live(false, running)
            .ends_unfinished();
        assert_eq!(from_file, from_text, "{content:?} {offset:?} {running}");
        from_file
    };
    assert!(
        page("a whole line\n>", None, true),
        "a prompt is unfinished"
    );
    assert!(
        page("a\n>", Some(1), true),
        "a page at an offset up to the end"
    );
    assert!(
        !page("a whole line\n>", None, false),
        "a finished session's last line is done"
    );
    assert!(
        !page("a whole line\n", None, true),
        "a line end finishes it"
    );
    assert!(!page("a\r\nb\r\n", None, true), "so does a CRLF");
    let (tmp, _file) = file_with(b"a\nb\n>");
    let before_the_end = TextPage::of_file(tmp.path(), Some(0), 1, 100, true, &|_| None)
        .expect("the file reads")
        .expect("the file exists");
    assert!(
        !before_the_end.ends_unfinished(),
        "a page that stops before the end"
    );
}
