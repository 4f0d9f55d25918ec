//! Output an agent can afford. The CLI keeps B8's and B39's sizes; the
//! MCP server's answers fit an agent's budget:
//!
//! - output carried by a result (a foreground run's exit, `wait`) keeps the head and
//!   the tail of the log within [`OUTPUT_BUDGET_CHARS`], whole lines, with one line
//!   saying how many lines were left out (`lines a–b`) and the calls that read them;
//! - a `log` page is at most [`PAGE_MAX_CHARS`] whatever `limit` asked, and says so;
//! - `search` reads the whole (redacted) log through the daemon's pages and answers
//!   the matching lines with context, within the same budget.

use super::log_page;
use herd_protocol::answers::{LogAnswer, WaitAnswer};
use herd_protocol::methods as m;
use regex::Regex;
use serde_json::Value;

use super::Server;
use super::results::{self, Common, ProcessResult, set_field};

/// Characters of output a result carries (head and tail together).
pub(super) const OUTPUT_BUDGET_CHARS: usize = 8_000;

/// Of which the head.
const HEAD_CHARS: usize = 2_000;

/// The most characters one `log` page carries.
pub(super) const PAGE_MAX_CHARS: usize = 40_000;

/// Lines fetched for the head, and for the tail, of a long output.
const HEAD_LINES: u64 = 60;
const TAIL_LINES: u64 = 600;

/// Lines one daemon page of a search reads.
const SEARCH_PAGE_LINES: u64 = 5_000;

/// The most log lines a search reads, and matches it lists.
const SEARCH_MAX_LINES: usize = 2_000_000;
const SEARCH_MAX_MATCHES: usize = 100;

/// Context lines a search shows by default, and at most.
pub(super) const CONTEXT_DEFAULT: u64 = 2;
pub(super) const CONTEXT_MAX: u64 = 20;

/// A cut line keeps this many characters.
const LINE_KEEP_CHARS: usize = 1_000;

fn chars(text: &str) -> usize {
    text.chars().count()
}

/// `line` within [`LINE_KEEP_CHARS`].
fn short_line(line: &str) -> String {
    if chars(line) <= LINE_KEEP_CHARS {
        return line.to_owned();
    }
    let kept: String = line.chars().take(LINE_KEEP_CHARS).collect();
    format!("{kept} [… line cut: {} characters]", chars(line))
}

/// The head and tail of a log: `head` from its line 0, `tail` from `tail_start`,
/// of `total` lines. The text within the budget and, when lines were left out, how
/// many and which (0-based, end exclusive).
pub(super) fn compose(
    head: &[&str],
    tail: &[&str],
    tail_start: usize,
    total: usize,
    session_id: &str,
) -> (String, Option<(usize, usize)>) {
    compose_from(0, head, tail, tail_start, total, session_id)
}

/// [`compose`] of the lines from `base` on (indices relative to it, the omitted
/// range said in the log's own line numbers).
pub(super) fn compose_from(
    base: usize,
    head: &[&str],
    tail: &[&str],
    tail_start: usize,
    total: usize,
    session_id: &str,
) -> (String, Option<(usize, usize)>) {
    let mut kept_head: Vec<String> = Vec::new();
    let mut used = 0;
    for (index, line) in head.iter().enumerate() {
        let line = short_line(line);
        if index >= tail_start || used + chars(&line) + 1 > HEAD_CHARS {
            break;
        }
        used += chars(&line) + 1;
        kept_head.push(line);
    }
    let tail_budget = OUTPUT_BUDGET_CHARS - used - 400;
    let mut kept_tail: Vec<String> = Vec::new();
    let mut used_tail = 0;
    for (back, line) in tail.iter().rev().enumerate() {
        let index = tail_start + tail.len() - 1 - back;
        let line = short_line(line);
        if index < kept_head.len() || used_tail + chars(&line) + 1 > tail_budget {
            break;
        }
        used_tail += chars(&line) + 1;
        kept_tail.push(line);
    }
    kept_tail.reverse();
    let first_tail = total.saturating_sub(kept_tail.len());
    let gap = (kept_head.len() < first_tail).then_some((kept_head.len(), first_tail));
    let mut out = kept_head.join("\n");
    if let Some((from, to)) = gap {
        let n = to - from;
        if !out.is_empty() {
            out.push('\n');
        }
        let (from, to) = (from + base, to + base);
        out.push_str(&format!(
            "[… {n} lines omitted (lines {}–{to}); read them with process(action=\"log\", session_id=\"{session_id}\", offset={from}, limit=…), or find what matters with process(action=\"search\", session_id=\"{session_id}\", pattern=\"error\") …]",
            from + 1
        ));
    }
    if !kept_tail.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&kept_tail.join("\n"));
    }
    (out, gap)
}

/// Cuts a `log` page to [`PAGE_MAX_CHARS`], whole lines: the first lines of a page
/// asked from an `offset`, the last ones of a tail page. Says so in `note`. `page`
/// is the answer as the daemon wrote it (passed on), `log` the same read as
/// herd-protocol's type.
pub(super) fn cap_page(page: &mut Value, log: &LogAnswer, from_offset: bool) {
    let text = log.output.as_str();
    if chars(text) <= PAGE_MAX_CHARS {
        return;
    }
    let lines: Vec<String> = text.lines().map(short_line).collect();
    let mut used = 0;
    let mut kept = 0;
    let order: Box<dyn Iterator<Item = &String>> = if from_offset {
        Box::new(lines.iter())
    } else {
        Box::new(lines.iter().rev())
    };
    for line in order {
        if used + chars(line) + 1 > PAGE_MAX_CHARS {
            break;
        }
        used += chars(line) + 1;
        kept += 1;
    }
    let offset = log.offset;
    let (shown, first) = if from_offset {
        (lines[..kept].join("\n"), offset)
    } else {
        (
            lines[lines.len() - kept..].join("\n"),
            offset + lines.len() - kept,
        )
    };
    let next = if from_offset {
        format!("the next page is offset={}", first + kept)
    } else {
        format!("the lines before are offset={}", first.saturating_sub(kept))
    };
    set_field(page, "output", shown);
    set_field(page, "offset", first);
    set_field(page, "showing", format!("{kept} lines"));
    set_field(page, "page_cut", true);
    let cut_note = format!(
        "page cut to {PAGE_MAX_CHARS} characters whatever limit was asked: lines {}–{} of {} shown; {next}",
        first + 1,
        first + kept,
        log.total_lines
    );
    set_field(
        page,
        "note",
        match &log.note {
            Some(old) => format!("{old}; {cut_note}"),
            None => cut_note,
        },
    );
}

/// An exit's output within the budget: the head and tail of the whole log, and
/// what was left out ([`Server::budget_output`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Budgeted {
    /// The head and tail, with a line naming the lines left out.
    pub(super) output: String,
    /// Lines of the whole log.
    pub(super) total_lines: u64,
    /// How many lines were left out, when any were.
    pub(super) omitted_lines: Option<u64>,
}

impl Budgeted {
    /// Writes it into an exit answer passed on as the daemon wrote it (its
    /// `output_cut` goes: the output is no longer cut short, only composed).
    pub(super) fn write_into(self, answer: &mut Value) {
        set_field(answer, "output", self.output);
        set_field(answer, "total_lines", self.total_lines);
        if let Some(omitted) = self.omitted_lines {
            set_field(answer, "omitted_lines", omitted);
        }
        if let Value::Object(map) = answer {
            map.remove("output_cut");
        }
    }
}

/// A search's pattern: a regex, or the text itself when `literal`.
pub(super) fn pattern(text: &str, literal: bool) -> Result<Regex, String> {
    let source = if literal {
        regex::escape(text)
    } else {
        text.to_owned()
    };
    regex::RegexBuilder::new(&source)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| format!("pattern is not a valid regex ({e}); pass literal=true to search for the text as written"))
}

/// The lines of `lines` (numbered from `first`) that match, with `context` lines
/// around: `N: line` for a match, `N- line` for context, `--` between groups.
pub(super) fn matches(lines: &[String], re: &Regex, context: usize) -> (String, usize, bool) {
    let hits: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| re.is_match(l))
        .map(|(i, _)| i)
        .collect();
    let mut out = String::new();
    let mut shown_until = 0usize;
    let mut cut = false;
    for (listed, &hit) in hits.iter().enumerate() {
        if listed == SEARCH_MAX_MATCHES {
            cut = true;
            break;
        }
        let from = hit.saturating_sub(context).max(shown_until);
        let to = (hit + context + 1).min(lines.len());
        let mut group = String::new();
        if from > shown_until && !out.is_empty() {
            group.push_str("--\n");
        }
        for (index, line) in lines.iter().enumerate().take(to).skip(from) {
            let mark = if re.is_match(line) { ':' } else { '-' };
            group.push_str(&format!("{}{mark} {}\n", index + 1, short_line(line)));
        }
        if chars(&out) + chars(&group) > OUTPUT_BUDGET_CHARS {
            cut = true;
            break;
        }
        out.push_str(&group);
        shown_until = to;
    }
    (out.trim_end().to_owned(), hits.len(), cut)
}

impl Server {
    /// The output of `waited`, an exit, within the budget when it is long or was
    /// cut: the head and tail of the whole log, with what was left out. `None` when
    /// it fits as it is, or when the log cannot be read (the output stays as cut).
    pub(super) async fn budget_output(&self, waited: &WaitAnswer) -> Option<Budgeted> {
        let session_id = waited.session_id.as_str();
        if !waited.output_cut && chars(&waited.output) <= OUTPUT_BUDGET_CHARS {
            return None;
        }
        let head = self
            .ask_for::<m::Log>(&log_page(session_id, Some(0), HEAD_LINES))
            .await;
        let tail = self
            .ask_for::<m::Log>(&log_page(session_id, None, TAIL_LINES))
            .await;
        let (Ok(head), Ok(tail)) = (head, tail) else {
            return None;
        };
        let head_lines: Vec<&str> = head.output.lines().collect();
        let tail_lines: Vec<&str> = tail.output.lines().collect();
        let (total, tail_start) = (tail.total_lines, tail.offset);
        let (output, gap) = compose(&head_lines, &tail_lines, tail_start, total, session_id);
        Some(Budgeted {
            output,
            total_lines: total as u64,
            omitted_lines: gap.map(|(from, to)| (to - from) as u64),
        })
    }

    /// `search`: the lines of the whole log matching `re`, with context; the error
    /// answer when a page of the log cannot be read.
    pub(super) async fn search(
        &self,
        session_id: &str,
        re: &Regex,
        context: usize,
    ) -> Result<Value, Value> {
        let mut lines: Vec<String> = Vec::new();
        let mut note = None;
        loop {
            let page = match self
                .ask_for::<m::Log>(&log_page(session_id, Some(lines.len()), SEARCH_PAGE_LINES))
                .await
            {
                Ok(page) => page,
                Err(failed) => return Err(failed),
            };
            let before = lines.len();
            lines.extend(page.output.lines().map(str::to_owned));
            let total = page.total_lines;
            if lines.len() >= total || lines.len() == before {
                break;
            }
            if lines.len() >= SEARCH_MAX_LINES {
                note = Some(format!(
                    "searched the first {} of {total} lines",
                    lines.len()
                ));
                break;
            }
        }
        let (output, found, cut) = matches(&lines, re, context);
        let cut_note = cut.then(|| format!(
            "{found} matching lines; the first ones within {OUTPUT_BUDGET_CHARS} characters are shown: narrow the pattern or read around a line with process(action=\"log\", offset=N)"
        ));
        // `action` is the caller's to set (`process` names the action answered).
        Ok(results::to_value(&ProcessResult {
            output: Some(output),
            common: Common {
                status: Some("ok".to_owned()),
                session_id: Some(session_id.to_owned()),
                total_lines: Some(lines.len() as u64),
                note: note.or(cut_note),
                ..Common::default()
            },
            matches: Some(found as u64),
            ..ProcessResult::default()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_long_log_keeps_head_and_tail_whole_lines_and_names_the_gap() {
        let all: Vec<String> = (0..10_000)
            .map(|i| format!("line {i} of the build"))
            .collect();
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        let (text, gap) = compose(&refs[..60], &refs[9_400..], 9_400, 10_000, "proc_x");
        assert!(chars(&text) <= OUTPUT_BUDGET_CHARS, "{}", chars(&text));
        let (from, to) = gap.expect("lines are left out");
        assert!(text.starts_with("line 0 of the build\n"));
        assert!(text.ends_with("line 9999 of the build"));
        assert!(text.contains(&format!(
            "{} lines omitted (lines {}–{to})",
            to - from,
            from + 1
        )));
        assert!(text.contains(&format!("offset={from}")));
        for line in text.lines() {
            assert!(
                line.starts_with("line ") || line.starts_with("[… "),
                "{line}"
            );
        }
    }

    #[test]
    fn a_short_log_is_whole() {
        let refs = ["a", "b", "c"];
        let (text, gap) = compose(&refs, &refs, 0, 3, "proc_x");
        assert_eq!((text.as_str(), gap), ("a\nb\nc", None));
    }

    #[test]
    fn a_page_is_capped_and_says_so() {
        let text: Vec<String> = (0..5_000).map(|i| format!("{i:>20}")).collect();
        let mut page = json!({
            "session_id": "proc_x",
            "status": "running",
            "output": text.join("\n"),
            "offset": 0,
            "total_lines": 5_000,
        });
        let log: LogAnswer = serde_json::from_value(page.clone()).expect("a log answer");
        cap_page(&mut page, &log, true);
        assert!(chars(page["output"].as_str().unwrap_or_default()) <= PAGE_MAX_CHARS);
        assert_eq!(page["page_cut"], json!(true));
        assert!(
            page["note"]
                .as_str()
                .unwrap_or_default()
                .contains("next page is offset=")
        );
    }

    #[test]
    fn search_shows_matches_with_context() {
        let lines: Vec<String> = (0..100)
            .map(|i| {
                if i == 50 {
                    "error: boom".into()
                } else {
                    format!("ok {i}")
                }
            })
            .collect();
        let re = pattern("error:", true).expect("valid");
        let (out, found, cut) = matches(&lines, &re, 1);
        assert_eq!((found, cut), (1, false));
        assert_eq!(out, "50- ok 49\n51: error: boom\n52- ok 51");
    }
}
