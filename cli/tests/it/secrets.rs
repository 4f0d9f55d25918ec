//! B30 end to end: no secret leaves herd, whatever shape it comes in.
//!
//! A corpus of shapes, each printed by a real job that runs `bash <script>` (so no
//! secret is ever on a command line): a 4 KB private key longer than every window,
//! the same key printed line by line, a key whose END never comes while its job
//! runs, tokens inside colour codes, hyperlinks, zero-width and bidi characters,
//! tokens placed so that a window starts inside them, and tokens across the 1 MiB
//! log-chunk and the 200,000-byte page edges. Each shape is read through every
//! route, in pipe and PTY mode: the CLI (`wait`, `poll`, `logs` whole, paged and
//! followed, `ps`, `events`, `kill`), the socket (`log_chunk` cut at every offset
//! of a secret), the MCP server, the completion ledger and result receipts on
//! disk, and a restarted daemon that answers from its receipts.
//!
//! The assertion is the same for every output ([`Proof::text`]): once escape
//! sequences and invisible characters are removed (and the visible rendering of
//! the human forms is undone), no output holds 10 consecutive characters of a
//! secret. The mask keeps a token's first 6 and last 4 characters and turns each
//! line of a key block into `[REDACTED PRIVATE KEY]`, so it never shows 10 in a
//! row. Every leak of a test is collected before the test fails, so one run names
//! every route and shape that leaks, with an excerpt.
// MCP logging is deprecated by SEP-2577, but herd's completion notices still ride
// it, so the MCP test reads them (as mcp.rs does).
#![allow(deprecated)]

use std::collections::HashMap;
use std::io::Read;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult, LoggingMessageNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::support::{Conn, Env, HERD, alive, stderr, stdout, wait_until};

/// What each line of a private-key block becomes.
const KEY_MASK: &str = "[REDACTED PRIVATE KEY]";

/// A leak is this many consecutive characters of a secret.
const LEAK_CHARS: usize = 10;

/// The windows routes cut (core's `POLL_PREVIEW_CHARS`, `completion_output_chars`,
/// `LIST_PREVIEW_CHARS`, `LOG_PAGE_MAX_BYTES`, the daemon's `CHUNK_BYTES`).
const POLL_CHARS: usize = 1_000;
const COMPLETION_CHARS: usize = 2_000;
const LIST_CHARS: usize = 200;
const PAGE_BYTES: usize = 200_000;
const CHUNK_BYTES: usize = 1 << 20;

/// How a job is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Pipe,
    Pty,
}

impl Mode {
    const BOTH: [Mode; 2] = [Mode::Pipe, Mode::Pty];

    fn name(self) -> &'static str {
        match self {
            Mode::Pipe => "pipe",
            Mode::Pty => "pty",
        }
    }

    /// Characters a newline the job prints becomes in its output (the PTY's
    /// line discipline turns `\n` into `\r\n`).
    fn newline_chars(self) -> usize {
        match self {
            Mode::Pipe => 1,
            Mode::Pty => 2,
        }
    }
}

/// A deterministic generator, so a failure names the same secrets on every run.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn pick(&mut self, alphabet: &[u8], n: usize) -> String {
        (0..n)
            .map(|_| {
                let idx = usize::try_from(self.next() % alphabet.len() as u64)
                    .expect("an index below the alphabet's length fits usize");
                char::from(alphabet[idx])
            })
            .collect()
    }

    fn alnum(&mut self, n: usize) -> String {
        self.pick(
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
            n,
        )
    }
}

/// One secret: what a person would read, and what to call it in a report.
#[derive(Debug, Clone)]
struct Secret {
    name: String,
    text: String,
}

fn secret(name: &str, text: &str) -> Secret {
    Secret {
        name: name.to_owned(),
        text: text.to_owned(),
    }
}

/// A 4 KB RSA-like PEM key: its text and its body lines (the secrets).
#[derive(Debug, Clone)]
struct Key {
    pem: String,
    body: Vec<String>,
}

impl Key {
    fn new(rng: &mut Rng) -> Key {
        const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut body: Vec<String> = (0..61).map(|_| rng.pick(BASE64, 64)).collect();
        body.push(format!("{}==", rng.pick(BASE64, 42)));
        let mut pem = String::from("-----BEGIN RSA PRIVATE KEY-----\n");
        for line in &body {
            pem.push_str(line);
            pem.push('\n');
        }
        pem.push_str("-----END RSA PRIVATE KEY-----\n");
        Key { pem, body }
    }

    fn secrets(&self) -> Vec<Secret> {
        self.body
            .iter()
            .enumerate()
            .map(|(idx, line)| secret(&format!("key body line {idx}"), line))
            .collect()
    }

    /// Lines of the block: BEGIN, body, END.
    fn n_lines(&self) -> usize {
        self.body.len() + 2
    }
}

/// `n` characters of harmless filler that no token can glue to: a space, then
/// lines of dots, ending with a newline; each newline counts `newline_chars`.
fn filler(n: usize, newline_chars: usize) -> String {
    assert!(n > newline_chars, "filler of {n} has no room");
    let mut out = String::from(" ");
    let mut left = n - 1;
    while left > 0 {
        if left <= newline_chars {
            out.push('\n');
            break;
        }
        let run = (left - newline_chars).min(70);
        out.extend(std::iter::repeat_n('.', run));
        left -= run;
        if left >= newline_chars {
            out.push('\n');
            left -= newline_chars;
        }
    }
    out
}

/// The text a person would see in `text`: the visible rendering of the human forms
/// (`\e`, `^X`, `<U+XXXX>`) undone, then escape sequences, C0/C1 controls but
/// newline and tab, and zero-width and bidi characters removed.
fn seen(text: &str) -> String {
    let is_plain = text
        .bytes()
        .all(|b| matches!(b, b' '..=b'~' | b'\n' | b'\t') && !matches!(b, b'\\' | b'^' | b'<'));
    if is_plain {
        return text.to_owned();
    }
    let chars: Vec<char> = unrender(text).chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut idx = 0;
    while idx < chars.len() {
        let c = chars[idx];
        idx += 1;
        match c {
            '\u{1b}' => idx = skip_escape(&chars, idx),
            '\u{9b}' => idx = skip_csi(&chars, idx),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => idx = skip_string(&chars, idx),
            '\n' | '\t' => out.push(c),
            // Overstrike, as `col -b` resolves it: the later character is seen,
            // and the letter of an underline (`_\bc`, `c\b_`).
            '\u{8}' => match out.chars().next_back() {
                Some(prev) if prev != '\n' => {
                    if chars.get(idx) == Some(&'_') && prev != '_' {
                        idx += 1;
                    } else {
                        out.pop();
                    }
                }
                _ => {}
            },
            c if c < ' ' || ('\u{7f}'..='\u{9f}').contains(&c) || is_invisible(c) => {}
            c => out.push(c),
        }
    }
    out
}

/// Undoes the rendering `herd ps`/`poll`/`wait` use for controls.
fn unrender(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("\\e") {
            out.push('\u{1b}');
            rest = after;
            continue;
        }
        if let Some(after) = rest.strip_prefix('^')
            && let Some(x) = after.chars().next()
            && (('@'..='_').contains(&x) || x == '?')
        {
            out.push(if x == '?' {
                '\u{7f}'
            } else {
                char::from(x as u8 - b'@')
            });
            rest = &after[1..];
            continue;
        }
        if let Some(after) = rest.strip_prefix("<U+")
            && let Some(end) = after.find('>')
            && let Ok(code) = u32::from_str_radix(&after[..end], 16)
            && let Some(ch) = char::from_u32(code)
        {
            out.push(ch);
            rest = &after[end + 1..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Past an escape sequence whose ESC came just before `idx`.
fn skip_escape(chars: &[char], idx: usize) -> usize {
    match chars.get(idx) {
        None => idx,
        Some('[') => skip_csi(chars, idx + 1),
        Some(']' | 'P' | 'X' | '^' | '_') => skip_string(chars, idx + 1),
        Some('(' | ')' | '*' | '+' | '-' | '.' | '/' | '#' | '%' | ' ') => {
            (idx + 2).min(chars.len())
        }
        Some(_) => idx + 1,
    }
}

/// Past a CSI's parameters and final byte.
fn skip_csi(chars: &[char], mut idx: usize) -> usize {
    while let Some(&c) = chars.get(idx) {
        idx += 1;
        if ('\u{40}'..='\u{7e}').contains(&c) {
            break;
        }
    }
    idx
}

/// Past a string (OSC, DCS, ...) and its BEL or ST.
fn skip_string(chars: &[char], mut idx: usize) -> usize {
    while let Some(&c) = chars.get(idx) {
        idx += 1;
        match c {
            '\u{7}' | '\u{9c}' => break,
            '\u{1b}' if chars.get(idx) == Some(&'\\') => return idx + 1,
            _ => {}
        }
    }
    idx
}

fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{61c}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// The evidence of one test: every output read, every leak and every broken line
/// structure found in them. [`Proof::finish`] fails the test with all of them.
#[derive(Debug)]
struct Proof {
    secrets: Vec<Secret>,
    /// Each `LEAK_CHARS`-long run of a secret, to the secret's index.
    runs: HashMap<Vec<u8>, usize>,
    /// Whether a byte can start such a run (a fast pre-filter).
    starts: [bool; 256],
    leaks: Vec<String>,
    broken: Vec<String>,
    n_reads: usize,
}

impl Proof {
    fn new(secrets: Vec<Secret>) -> Proof {
        let mut runs = HashMap::new();
        let mut starts = [false; 256];
        for (idx, s) in secrets.iter().enumerate() {
            assert!(
                s.text.is_ascii() && s.text.len() >= LEAK_CHARS,
                "{} is an ASCII secret of at least {LEAK_CHARS} characters",
                s.name
            );
            for run in s.text.as_bytes().windows(LEAK_CHARS) {
                runs.insert(run.to_vec(), idx);
                starts[usize::from(run[0])] = true;
            }
        }
        Proof {
            secrets,
            runs,
            starts,
            leaks: Vec::new(),
            broken: Vec::new(),
            n_reads: 0,
        }
    }

    /// Checks one output of `route`.
    fn text(&mut self, route: &str, output: &str) {
        self.n_reads += 1;
        let visible = seen(output);
        let bytes = visible.as_bytes();
        let mut reported = vec![false; self.secrets.len()];
        for at in 0..bytes.len().saturating_sub(LEAK_CHARS - 1) {
            if !self.starts[usize::from(bytes[at])] {
                continue;
            }
            let Some(&idx) = self.runs.get(&bytes[at..at + LEAK_CHARS]) else {
                continue;
            };
            if std::mem::replace(&mut reported[idx], true) {
                continue;
            }
            let mut from = at.saturating_sub(60);
            while !visible.is_char_boundary(from) {
                from -= 1;
            }
            let mut to = (at + LEAK_CHARS + 60).min(bytes.len());
            while !visible.is_char_boundary(to) {
                to += 1;
            }
            self.leaks.push(format!(
                "{route}: {} leaks: {:?}",
                self.secrets[idx].name,
                &visible[from..to]
            ));
        }
    }

    /// Checks every string (and key) inside a JSON answer of `route`.
    fn json(&mut self, route: &str, value: &Value) {
        let mut all = String::new();
        collect_strings(value, &mut all);
        self.text(route, &all);
    }

    /// Checks that `output` (carriage returns removed) has exactly `expected` lines.
    fn lines(&mut self, route: &str, output: &str, expected: &[String]) {
        self.lines_where(route, output, expected, |got, want| got == want);
    }

    fn lines_where(
        &mut self,
        route: &str,
        output: &str,
        expected: &[String],
        same: impl Fn(&str, &str) -> bool,
    ) {
        let got: Vec<&str> = output.lines().map(|l| l.trim_end_matches('\r')).collect();
        let is_same =
            got.len() == expected.len() && got.iter().zip(expected).all(|(g, e)| same(g, e));
        if !is_same {
            let first = got
                .iter()
                .zip(expected)
                .position(|(g, e)| !same(g, e))
                .unwrap_or(got.len().min(expected.len()));
            self.broken.push(format!(
                "{route}: {} lines where {} were expected; first difference at line {first}: got {:?}, expected {:?}",
                got.len(),
                expected.len(),
                got.get(first),
                expected.get(first),
            ));
        }
    }

    /// Records a route that did not answer as it should.
    fn broken(&mut self, what: String) {
        self.broken.push(what);
    }

    /// Fails with every leak and broken structure found.
    fn finish(self, what: &str, min_reads: usize) {
        assert!(
            self.leaks.is_empty() && self.broken.is_empty(),
            "{what}: {} leaks and {} broken answers in {} outputs read\nleaks:\n  {}\nbroken:\n  {}",
            self.leaks.len(),
            self.broken.len(),
            self.n_reads,
            self.leaks.join("\n  "),
            self.broken.join("\n  "),
        );
        assert!(
            self.n_reads >= min_reads,
            "{what}: only {} outputs were read, expected at least {min_reads}",
            self.n_reads
        );
    }
}

fn collect_strings(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push_str(k);
                out.push('\n');
                collect_strings(v, out);
            }
        }
        _ => {}
    }
}

/// Writes `script` (bash) into the scratch dir and returns the command that runs
/// it: the command line names a file, never a secret.
fn script(env: &Env, name: &str, script: &str) -> String {
    let path = env.scratch().join(format!("{name}.sh"));
    std::fs::write(&path, script).expect("the scratch dir is writable");
    format!("bash {}", path.display())
}

/// Writes `data` into the scratch dir and returns its path, shell-quoted.
fn data(env: &Env, name: &str, data: &str) -> String {
    let path = env.scratch().join(name);
    std::fs::write(&path, data).expect("the scratch dir is writable");
    format!("'{}'", path.display())
}

/// `herd run --json [--pty] extra… -- command`: the session id.
fn start(env: &Env, mode: Mode, extra: &[&str], command: &str) -> String {
    let mut args = vec!["run", "--json"];
    if mode == Mode::Pty {
        args.push("--pty");
    }
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", command]);
    let info = env.json(&args);
    info["session_id"]
        .as_str()
        .expect("run --json names the session")
        .to_owned()
}

/// The session's raw log on disk (not an output route: what the job printed).
fn raw_log(env: &Env, id: &str) -> Vec<u8> {
    std::fs::read(
        env.home()
            .join("logs")
            .join("sessions")
            .join(format!("{id}.log")),
    )
    .unwrap_or_default()
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Waits until the job's raw log holds `needle`.
fn await_raw(env: &Env, id: &str, needle: &str) {
    let found = wait_until(Duration::from_secs(15), || {
        find(&raw_log(env, id), needle.as_bytes()).is_some()
    });
    assert!(
        found.is_ok(),
        "the log of {id} never held {needle:?} within 15 s; it holds {:?}",
        String::from_utf8_lossy(&raw_log(env, id))
    );
}

/// Runs `herd args…` and parses stdout as JSON whatever the exit code.
fn json_any(env: &Env, args: &[&str]) -> Value {
    let out = env.run(args);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "herd {args:?} printed invalid JSON ({e}): {}\nstderr: {}",
            stdout(&out),
            stderr(&out)
        )
    })
}

/// `herd logs ID --follow`, read on a thread.
struct Follow {
    child: Child,
    got: Arc<Mutex<Vec<u8>>>,
    done: mpsc::Receiver<()>,
}

impl Follow {
    fn start(env: &Env, id: &str) -> Follow {
        Follow::with_args(env, &["logs", id, "--follow"])
    }

    /// `herd args…`, a follow with other options (`-n N` starts it at the end).
    fn with_args(env: &Env, args: &[&str]) -> Follow {
        let mut child = env
            .cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("herd runs");
        let mut out = child.stdout.take().expect("piped stdout");
        let got = Arc::new(Mutex::new(Vec::new()));
        let (tx, done) = mpsc::channel();
        let sink = Arc::clone(&got);
        std::thread::spawn(move || {
            let mut buf = [0u8; 64 * 1024];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .expect("not poisoned")
                    .extend_from_slice(&buf[..n]);
            }
            let _ = tx.send(());
        });
        Follow { child, got, done }
    }

    fn so_far(&self) -> String {
        String::from_utf8_lossy(&self.got.lock().expect("not poisoned")).into_owned()
    }

    /// Waits until the follow has printed something `cond` accepts.
    fn await_output(&self, what: &str, cond: impl Fn(&str) -> bool) {
        let found = wait_until(Duration::from_secs(15), || cond(&self.so_far()));
        assert!(
            found.is_ok(),
            "logs --follow never printed {what} within 15 s; it printed {:?}",
            self.so_far()
        );
    }

    /// Waits for the follow to end (its job exited) and returns what it printed.
    fn finish(mut self) -> String {
        let ended = self.done.recv_timeout(Duration::from_secs(20)).is_ok();
        if !ended {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        assert!(
            ended,
            "logs --follow did not end within 20 s of its job; it printed {:?}",
            self.so_far()
        );
        self.so_far()
    }
}

/// How many lines session `id`'s log holds, as `logs --json` counts them.
fn log_lines(env: &Env, id: &str) -> usize {
    env.json(&["logs", id, "--limit", "1", "--json"])["total_lines"]
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .expect("a log answer counts its lines")
}

/// Every route that answers for a finished session, through the CLI.
fn read_finished(env: &Env, id: &str, label: &str, proof: &mut Proof) {
    let r = |what: &str| format!("{label}: {what}");
    proof.json(
        &r("wait --json"),
        &json_any(env, &["wait", id, "--timeout", "20", "--json"]),
    );
    proof.text(
        &r("wait"),
        &stdout(&env.run(&["wait", id, "--timeout", "20"])),
    );
    proof.json(&r("poll --json"), &env.json(&["poll", id, "--json"]));
    proof.text(&r("poll"), &env.ok(&["poll", id]));
    proof.text(&r("logs"), &env.ok(&["logs", id]));
    for limit in ["1", "40"] {
        proof.text(
            &r(&format!("logs --limit {limit}")),
            &env.ok(&["logs", id, "--limit", limit]),
        );
    }
    proof.json(
        &r("logs --limit 200 --json"),
        &env.json(&["logs", id, "--limit", "200", "--json"]),
    );
    proof.json(&r("ps --all --json"), &env.json(&["ps", "--all", "--json"]));
    proof.text(&r("ps --all"), &env.ok(&["ps", "--all"]));
    proof.text(
        &r("logs --follow (finished)"),
        &Follow::start(env, id).finish(),
    );
}

/// `herd logs ID --offset o --limit l` for each page, checked for leaks and, when
/// `expected` is given, for the exact lines (line counts and masks included).
fn read_pages(
    env: &Env,
    id: &str,
    label: &str,
    pages: &[(usize, usize)],
    expected: Option<&[String]>,
    proof: &mut Proof,
) {
    for &(offset, limit) in pages {
        let (o, l) = (offset.to_string(), limit.to_string());
        let route = format!("{label}: logs --offset {o} --limit {l}");
        let page = env.ok(&["logs", id, "--offset", &o, "--limit", &l]);
        proof.text(&route, &page);
        let answer = env.json(&["logs", id, "--offset", &o, "--limit", &l, "--json"]);
        proof.json(&format!("{route} --json"), &answer);
        if let Some(expected) = expected {
            let want = &expected[offset.min(expected.len())..(offset + limit).min(expected.len())];
            proof.lines(&route, &page, want);
            if answer["total_lines"] != expected.len() {
                proof.broken(format!(
                    "{route} --json: total_lines {} where the job printed {} lines",
                    answer["total_lines"],
                    expected.len()
                ));
            }
        }
    }
}

/// The durable routes of finished notify sessions: receipts and ledger rows on
/// disk, the drained completions, then a restarted daemon's answers (from
/// receipts and log files).
fn read_durable(env: &Env, ids: &[(String, String)], proof: &mut Proof) {
    let home = herd_persistence::Home::new(env.home());
    let store = herd_persistence::ReceiptStore::new(&home);
    for (id, label) in ids {
        let mut found = None;
        let stored = wait_until(Duration::from_secs(10), || {
            found = store.load(id).ok().flatten();
            found.is_some()
        });
        assert!(stored.is_ok(), "{label}: no receipt of {id} in state.db");
        let value = serde_json::to_value(found).expect("a receipt is JSON");
        proof.json(&format!("{label}: receipt of {id} in state.db"), &value);
    }
    let mut rows = Vec::new();
    let committed = wait_until(Duration::from_secs(10), || {
        rows = match herd_persistence::Ledger::open(&home) {
            Ok(Some(ledger)) => ledger.undelivered().expect("the ledger is readable"),
            Ok(None) => Vec::new(),
            Err(e) => panic!("the ledger cannot be opened: {e}"),
        };
        ids.iter()
            .all(|(id, _)| rows.iter().any(|r| &r.session_id == id))
    });
    assert!(
        committed.is_ok(),
        "the ledger never held a completion for each of {ids:?}; it holds {:?}",
        rows.iter().map(|r| &r.session_id).collect::<Vec<_>>()
    );
    for row in &rows {
        let label = ids
            .iter()
            .find(|(id, _)| *id == row.session_id)
            .map_or("another session", |(_, l)| l.as_str());
        proof.json(&format!("{label}: ledger row (state.db)"), &row.event);
    }
    let mut events = Vec::new();
    let drained = wait_until(Duration::from_secs(10), || {
        events.extend(
            env.ok(&["events"])
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).expect("events prints JSON lines")),
        );
        ids.iter().all(|(id, _)| {
            events
                .iter()
                .any(|e| e["type"] == "completion" && e["session_id"] == id.as_str())
        })
    });
    assert!(
        drained.is_ok(),
        "not every completion was drained: {events:?}"
    );
    for event in &events {
        proof.json(&format!("events: {}", event["session_id"]), event);
    }

    restart(env);
    for (id, label) in ids {
        let label = format!("{label}, after a restart");
        proof.json(
            &format!("{label}: poll --json"),
            &env.json(&["poll", id, "--json"]),
        );
        proof.text(&format!("{label}: poll"), &env.ok(&["poll", id]));
        proof.json(
            &format!("{label}: wait --json"),
            &json_any(env, &["wait", id, "--timeout", "5", "--json"]),
        );
        proof.text(&format!("{label}: logs"), &env.ok(&["logs", id]));
        proof.text(
            &format!("{label}: logs --limit 40"),
            &env.ok(&["logs", id, "--limit", "40"]),
        );
    }
    proof.json(
        "after a restart: ps --all --json",
        &env.json(&["ps", "--all", "--json"]),
    );
}

/// Stops the home's daemon; the next command starts a new one.
fn restart(env: &Env) {
    let pid = env.daemon_pid().expect("a daemon serves the home");
    env.ok(&["shutdown", "--yes"]);
    let gone = wait_until(Duration::from_secs(10), || !alive(pid));
    assert!(gone.is_ok(), "daemon {pid} did not stop on shutdown");
}

/// The lines a job printing `before`, the key and `after` shows: each key line masked.
fn masked_lines(before: &[&str], key: &Key, after: &[&str]) -> Vec<String> {
    before
        .iter()
        .map(|l| (*l).to_owned())
        .chain(std::iter::repeat_n(KEY_MASK.to_owned(), key.n_lines()))
        .chain(after.iter().map(|l| (*l).to_owned()))
        .collect()
}

#[test]
fn b30_a_private_key_longer_than_every_window_is_masked_on_every_cli_route() {
    let env = Env::new();
    let key = Key::new(&mut Rng(0x5eed_0001));
    assert!(
        key.pem.len() > COMPLETION_CHARS * 2,
        "the key outgrows every window"
    );
    let key_file = data(&env, "key.txt", &key.pem);
    let at_once = script(
        &env,
        "key-at-once",
        &format!("echo start\ncat {key_file}\necho done\n"),
    );
    let by_line = script(
        &env,
        "key-by-line",
        &format!(
            "echo start\nwhile IFS= read -r l; do printf '%s\\n' \"$l\"; sleep 0.01; done < {key_file}\necho done\n"
        ),
    );
    let expected = masked_lines(&["start"], &key, &["done"]);
    let n = expected.len();
    // Pages at the start, across BEGIN, inside the body (BEGIN before the page),
    // across END and at the end; the last three are tail pages.
    let pages = [
        (0, 1),
        (1, 1),
        (2, 5),
        (10, 20),
        (30, 200),
        (n - 4, 3),
        (n - 2, 2),
        (n - 1, 1),
    ];
    let mut proof = Proof::new(key.secrets());
    let mut ids = Vec::new();
    for mode in Mode::BOTH {
        for (shape, command) in [("key at once", &at_once), ("key line by line", &by_line)] {
            let label = format!("{shape}, {}", mode.name());
            let id = start(&env, mode, &["--notify"], command);
            // Follow from the start: the line-by-line key arrives over many writes.
            let follow = Follow::start(&env, &id);
            let followed = follow.finish();
            proof.text(&format!("{label}: logs --follow"), &followed);
            proof.lines(&format!("{label}: logs --follow"), &followed, &expected);
            read_finished(&env, &id, &label, &mut proof);
            proof.lines(
                &format!("{label}: logs"),
                &env.ok(&["logs", &id]),
                &expected,
            );
            read_pages(&env, &id, &label, &pages, Some(&expected), &mut proof);
            ids.push((id, label));
        }
    }
    read_durable(&env, &ids, &mut proof);
    for (id, label) in &ids {
        read_pages(
            &env,
            id,
            &format!("{label}, after a restart"),
            &pages[2..4],
            Some(&expected),
            &mut proof,
        );
    }
    proof.finish("a 4 KB private key", 100);
}

#[test]
fn b30_an_unfinished_private_key_and_a_token_split_across_writes_are_masked_while_running() {
    let env = Env::new();
    std::fs::write(
        env.home().join("config.toml"),
        "heartbeat_floor_seconds = 1\n",
    )
    .expect("the home is writable");
    let mut rng = Rng(0x5eed_0002);
    let key = Key::new(&mut rng);
    // BEGIN and the body, never END; then the job waits on stdin.
    let unfinished: String =
        key.pem
            .lines()
            .take(key.n_lines() - 1)
            .fold(String::new(), |mut acc, l| {
                acc.push_str(l);
                acc.push('\n');
                acc
            });
    let key_file = data(&env, "unfinished.txt", &unfinished);
    let key_job = script(
        &env,
        "key-unfinished",
        &format!(
            "echo start\nwhile IFS= read -r l; do printf '%s\\n' \"$l\"; sleep 0.005; done < {key_file}\nread _\n"
        ),
    );
    // A token whose first half is printed, and whose second half comes after a
    // heartbeat (and after any follow's idle release).
    let head = rng.alnum(18);
    let rest = rng.alnum(18);
    let token = format!("ghp_{head}{rest}");
    let token_job = script(
        &env,
        "token-split",
        &format!(
            "echo start\nprintf 'token ghp_{head}'\nsleep 1.3\nprintf '{rest} end\\n'\necho written\nread _\n"
        ),
    );
    let mut secrets = key.secrets();
    secrets.push(secret("token split across writes", &token));
    let mut proof = Proof::new(secrets);
    let last_body = key.body.last().expect("the key has a body").clone();
    for mode in Mode::BOTH {
        let m = mode.name();
        // A heartbeat turns notify on, and notify turns watch patterns off: the
        // watched copy of the key job is a session of its own.
        let key_id = start(&env, mode, &["--heartbeat", "1"], &key_job);
        let watch_id = start(&env, mode, &["--watch", "PRIVATE"], &key_job);
        let key_follow = Follow::start(&env, &key_id);
        let token_id = start(&env, mode, &["--heartbeat", "1"], &token_job);
        let token_follow = Follow::start(&env, &token_id);
        await_raw(&env, &key_id, &last_body);
        key_follow.await_output("every line of the key", |t| {
            t.lines().count() >= key.n_lines()
        });
        let label = format!("unfinished key, {m}, running");
        for (what, text) in [
            ("poll", env.ok(&["poll", &key_id])),
            ("ps", env.ok(&["ps"])),
            ("logs", env.ok(&["logs", &key_id])),
            ("logs --limit 3", env.ok(&["logs", &key_id, "--limit", "3"])),
        ] {
            proof.text(&format!("{label}: {what}"), &text);
        }
        for (what, value) in [
            ("poll --json", env.json(&["poll", &key_id, "--json"])),
            ("ps --json", env.json(&["ps", "--json"])),
            ("logs --json", env.json(&["logs", &key_id, "--json"])),
            (
                "wait --timeout 0.3 --json",
                json_any(&env, &["wait", &key_id, "--timeout", "0.3", "--json"]),
            ),
        ] {
            proof.json(&format!("{label}: {what}"), &value);
        }
        let shown = masked_lines(&["start"], &key, &[]);
        let shown = &shown[..shown.len() - 1];
        proof.lines(
            &format!("{label}: logs"),
            &env.ok(&["logs", &key_id]),
            shown,
        );
        read_pages(
            &env,
            &key_id,
            &label,
            &[(0, 2), (2, 5), (20, 200), (shown.len() - 1, 1)],
            Some(shown),
            &mut proof,
        );
        proof.lines(
            &format!("{label}: logs --follow"),
            &key_follow.so_far(),
            shown,
        );

        await_raw(&env, &token_id, "written");
        // Heartbeats for both, one of the token's after its second half arrived.
        let tail = &token[token.len() - 4..];
        let mut events: Vec<Value> = Vec::new();
        let beats = wait_until(Duration::from_secs(15), || {
            events.extend(
                env.ok(&["events"])
                    .lines()
                    .map(|l| serde_json::from_str::<Value>(l).expect("JSON lines")),
            );
            let beat = |id: &str, want: &str| {
                events.iter().any(|e| {
                    e["type"] == "heartbeat"
                        && e["session_id"] == id
                        && e["output"].as_str().is_some_and(|o| o.contains(want))
                })
            };
            let watched = events
                .iter()
                .any(|e| e["type"] == "watch_match" && e["session_id"] == watch_id.as_str());
            beat(&key_id, KEY_MASK) && beat(&token_id, tail) && watched
        });
        let kinds: Vec<String> = events
            .iter()
            .map(|e| format!("{} {}", e["type"], e["session_id"]))
            .collect();
        if beats.is_err() {
            proof.broken(format!(
                "{m}: no heartbeat of each job with its new output (and no watch match) within 15 s; saw {kinds:?}"
            ));
        }
        if !events
            .iter()
            .any(|e| e["type"] == "watch_match" && e["session_id"] == watch_id.as_str())
        {
            proof.broken(format!(
                "{m}: no watch match for `PRIVATE` in the key's lines; saw {kinds:?}"
            ));
        }
        for e in &events {
            proof.json(
                &format!("{m}: events: {} {}", e["type"], e["session_id"]),
                e,
            );
        }
        token_follow.await_output("the token's second half", |t| t.contains(" end"));
        let label_token = format!("token split across writes, {m}, running");
        proof.text(
            &format!("{label_token}: logs --follow"),
            &token_follow.so_far(),
        );
        proof.text(
            &format!("{label_token}: poll"),
            &env.ok(&["poll", &token_id]),
        );
        proof.text(
            &format!("{label_token}: logs"),
            &env.ok(&["logs", &token_id]),
        );

        let label_watch = format!("watched unfinished key, {m}, running");
        for (id, label) in [
            (&key_id, &label),
            (&watch_id, &label_watch),
            (&token_id, &label_token),
        ] {
            proof.json(
                &format!("{label}: kill --json"),
                &env.json(&["kill", id, "--json"]),
            );
            proof.json(
                &format!("{label}: wait --json after kill"),
                &json_any(&env, &["wait", id, "--timeout", "10", "--json"]),
            );
        }
        proof.text(&format!("{label}: logs --follow"), &key_follow.finish());
        proof.text(
            &format!("{label_token}: logs --follow"),
            &token_follow.finish(),
        );
        proof.json(
            &format!("{m}: ps --all --json after kill"),
            &env.json(&["ps", "--all", "--json"]),
        );
    }
    proof.finish("an unfinished key and a split token", 40);
}

/// The escape shapes: lines of a script and the secrets a person reads in them.
fn escape_shapes(env: &Env, rng: &mut Rng) -> (String, Vec<Secret>) {
    let grep_token = format!("ghp_{}", rng.alnum(36));
    let (sgr_a, sgr_b) = (rng.alnum(20), rng.alnum(20));
    let sgr_token = format!("sk-proj-{sgr_a}{sgr_b}");
    let aws = format!("AKIA{}", rng.pick(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16));
    let (zw_a, zw_b) = (rng.alnum(18), rng.alnum(18));
    let zw_token = format!("ghp_{zw_a}{zw_b}");
    let (bidi_a, bidi_b) = (rng.alnum(12), rng.alnum(20));
    let bidi_token = format!("xoxb-{bidi_a}{bidi_b}");
    let pat = format!("github_pat_{}_{}", rng.alnum(22), rng.alnum(40));
    let pat_file = data(env, "pat.txt", &format!("pat {pat} here\n"));
    let command = script(
        env,
        "escapes",
        &[
            "echo start".to_owned(),
            // grep --color's shape around a whole token.
            format!("printf '\\033[01;31m\\033[K%s\\033[m\\033[K\\n' '{grep_token}'"),
            // A colour change inside a token.
            format!("printf 'key: sk-proj-{sgr_a}\\033[1m{sgr_b}\\033[0m done\\n'"),
            // An OSC 8 hyperlink around an AWS key id.
            format!(
                "printf 'see \\033]8;;https://example.invalid/k\\033\\\\{aws}\\033]8;;\\033\\\\ here\\n'"
            ),
            // A zero-width space, and a right-to-left override, inside a token.
            format!("printf 'zw ghp_{zw_a}\\342\\200\\213{zw_b} end\\n'"),
            format!("printf 'bidi xoxb-{bidi_a}\\342\\200\\256{bidi_b} end\\n'"),
            // A real grep colouring only the token's prefix.
            format!("grep --color=always github_pat_ {pat_file}"),
            "echo done".to_owned(),
            String::new(),
        ]
        .join("\n"),
    );
    let secrets = vec![
        secret("token in grep colours", &grep_token),
        secret("token with SGR inside", &sgr_token),
        secret("AWS key in an OSC 8 link", &aws),
        secret("token with a zero-width space", &zw_token),
        secret("token with a bidi override", &bidi_token),
        secret("token with a grep-coloured prefix", &pat),
    ];
    (command, secrets)
}

#[test]
fn b30_tokens_inside_terminal_escapes_are_masked_on_every_cli_route() {
    let env = Env::new();
    let (command, secrets) = escape_shapes(&env, &mut Rng(0x5eed_0003));
    let mut proof = Proof::new(secrets.clone());
    let mut ids = Vec::new();
    for mode in Mode::BOTH {
        let label = format!("escapes, {}", mode.name());
        let id = start(&env, mode, &["--notify"], &command);
        read_finished(&env, &id, &label, &mut proof);
        read_pages(
            &env,
            &id,
            &label,
            &[
                (0, 3),
                (1, 1),
                (2, 1),
                (3, 1),
                (4, 1),
                (5, 1),
                (6, 1),
                (3, 200),
            ],
            None,
            &mut proof,
        );
        ids.push((id, label));
    }
    // The socket: chunks of the log that end, and that start, at every byte of
    // every token (the tokens' bytes located in the raw log).
    let mut conn = Conn::open(&env, "secrets-test");
    for (id, label) in &ids {
        let raw = raw_log(&env, id);
        for s in &secrets {
            // The raw bytes hold the token's last 8 characters contiguously.
            let tail = &s.text.as_bytes()[s.text.len() - 8..];
            let Some(end) = find(&raw, tail).map(|at| at + 8) else {
                proof.broken(format!("{label}: the raw log lacks {}", s.name));
                continue;
            };
            let begin = end.saturating_sub(s.text.len() + 40);
            for cut in begin..=end {
                for (from, max) in [
                    (begin.saturating_sub(30), cut - begin.saturating_sub(30)),
                    (cut, 200),
                ] {
                    if max == 0 {
                        continue;
                    }
                    let chunk = conn.result(
                        "log_chunk",
                        json!({"id": id, "from_byte": from, "max_bytes": max}),
                    );
                    proof.json(
                        &format!(
                            "{label}: socket log_chunk from {from} max {max} ({})",
                            s.name
                        ),
                        &chunk,
                    );
                }
            }
        }
    }
    read_durable(&env, &ids, &mut proof);
    proof.finish("tokens inside escapes", 500);
}

#[test]
fn b30_windows_that_start_inside_a_token_show_it_masked() {
    let env = Env::new();
    let mut rng = Rng(0x5eed_0004);
    let tokens = [
        format!("ghp_{}", rng.alnum(36)),
        format!("glpat-{}", rng.alnum(34)),
        format!("sk-{}", rng.alnum(37)),
    ];
    let secrets: Vec<Secret> = ["completion window", "poll window", "list window"]
        .iter()
        .zip(&tokens)
        .map(|(w, t)| secret(&format!("token where the {w} starts"), t))
        .collect();
    let mut proof = Proof::new(secrets);
    let mut ids = Vec::new();
    for mode in Mode::BOTH {
        // Each token's 20th character is exactly where the last 2,000 / 1,000 /
        // 200 characters of the output begin.
        let nl = mode.newline_chars();
        let s3 = LIST_CHARS - 20;
        let s2 = POLL_CHARS - 20 - 40 - s3;
        let s1 = COMPLETION_CHARS - 20 - 40 - s2 - 40 - s3;
        let text = format!(
            "intro\n{}{}{}{}{}{}",
            tokens[0],
            filler(s1, nl),
            tokens[1],
            filler(s2, nl),
            tokens[2],
            filler(s3, nl)
        );
        let file = data(&env, &format!("windows-{}.txt", mode.name()), &text);
        let command = script(
            &env,
            &format!("windows-{}", mode.name()),
            &format!("cat {file}\n"),
        );
        let label = format!("window starts inside a token, {}", mode.name());
        let id = start(&env, mode, &["--notify"], &command);
        read_finished(&env, &id, &label, &mut proof);
        read_pages(
            &env,
            &id,
            &label,
            &[(0, 2), (1, 5), (10, 3)],
            None,
            &mut proof,
        );
        ids.push((id, label));
    }
    read_durable(&env, &ids, &mut proof);
    proof.finish("windows inside tokens", 50);
}

/// A single 1.25 MiB line with tokens across the offset page's cut (200,000 bytes
/// from its start), the 1 MiB chunk edge (`edge_offset` of its 40 characters
/// before it) and the tail page's cut (200,000 bytes from the log's end, which is
/// also where the 200,000-byte in-memory tail, and so the result receipt, starts).
fn long_line(
    rng: &mut Rng,
    newline_bytes: usize,
    edge_offset: usize,
) -> (String, Vec<(usize, Secret)>) {
    let total = CHUNK_BYTES + 250_000;
    let tail_cut = total + newline_bytes - PAGE_BYTES;
    let edge = format!("1 MiB chunk edge, {edge_offset} characters before it");
    let places = [
        (PAGE_BYTES - 20, "offset page cut"),
        (CHUNK_BYTES - edge_offset, edge.as_str()),
        (tail_cut - 20, "tail page cut and the kept tail's start"),
    ];
    let mut line = String::with_capacity(total + 1);
    let mut placed = Vec::new();
    for (at, what) in places {
        let token = format!("ghp_{}", rng.alnum(36));
        while line.len() < at {
            line.push(if line.len().is_multiple_of(80) {
                ' '
            } else {
                '.'
            });
        }
        line.replace_range(at - 1..at, " ");
        line.push_str(&token);
        line.push(' ');
        placed.push((at, secret(&format!("token across the {what}"), &token)));
    }
    while line.len() < total {
        line.push('.');
    }
    line.push('\n');
    (line, placed)
}

#[test]
fn b30_a_token_across_a_log_chunk_or_page_edge_is_masked() {
    let env = Env::new();
    let mut rng = Rng(0x5eed_0005);
    let mut secrets = Vec::new();
    let mut jobs = Vec::new();
    for mode in Mode::BOTH {
        let (text, placed) = long_line(
            &mut rng,
            mode.newline_chars(),
            if mode == Mode::Pipe { 1 } else { 39 },
        );
        let file = data(&env, &format!("long-line-{}.txt", mode.name()), &text);
        let command = script(
            &env,
            &format!("long-line-{}", mode.name()),
            &format!("cat {file}\n"),
        );
        jobs.push((mode, command, "one 1.25 MiB line", placed.clone()));
        secrets.extend(placed.into_iter().map(|(_, s)| s));
        // The same edge in a log of short lines: the token line begins 20 bytes
        // before the 1 MiB edge. Chunks end at a line end, so this one is read in
        // pipe mode only (the PTY's `\r\n` moves no chunk edge into a line).
        if mode == Mode::Pty {
            continue;
        }
        let token = format!("ghp_{}", rng.alnum(36));
        let lines = filler(CHUNK_BYTES - 20 - 1, mode.newline_chars());
        let text = format!(
            ".{lines}{token} and more\n{}",
            filler(50_000, mode.newline_chars())
        );
        let file = data(&env, &format!("short-lines-{}.txt", mode.name()), &text);
        let command = script(
            &env,
            &format!("short-lines-{}", mode.name()),
            &format!("cat {file}\n"),
        );
        let s = secret("token on the line at the 1 MiB edge", &token);
        jobs.push((
            mode,
            command,
            "1.05 MiB of short lines",
            vec![(CHUNK_BYTES - 20, s.clone())],
        ));
        secrets.push(s);
    }
    let mut proof = Proof::new(secrets);
    let mut ids = Vec::new();
    let started: Vec<String> = jobs
        .iter()
        .map(|(mode, command, _, _)| start(&env, *mode, &["--notify"], command))
        .collect();
    for ((mode, _, shape, placed), id) in jobs.iter().zip(started) {
        let label = format!("{shape}, {}", mode.name());
        env.ok(&["wait", &id, "--timeout", "30"]);
        // Where the job put each token is where the log holds it.
        let raw = raw_log(&env, &id);
        for (at, s) in placed {
            if raw.get(*at..*at + s.text.len()) != Some(s.text.as_bytes()) {
                proof.broken(format!(
                    "{label}: {} is not at byte {at} of the log",
                    s.name
                ));
            }
        }
        read_finished(&env, &id, &label, &mut proof);
        read_pages(
            &env,
            &id,
            &label,
            &[(0, 1), (0, 2), (1, 50)],
            None,
            &mut proof,
        );
        // The socket: chunks that end, and that start, at bytes across each token
        // (every byte is swept on a small log in the escapes test).
        let mut conn = Conn::open(&env, "secrets-test");
        for (at, s) in placed {
            for cut in [1, 6, 20, 34, 39].map(|k| at + k) {
                for (from, max) in [(at - 64, cut - (at - 64)), (cut, 64)] {
                    let chunk = conn.result(
                        "log_chunk",
                        json!({"id": id, "from_byte": from, "max_bytes": max}),
                    );
                    proof.json(
                        &format!(
                            "{label}: socket log_chunk from {from} max {max} ({})",
                            s.name
                        ),
                        &chunk,
                    );
                }
            }
        }
        ids.push((id, label));
    }
    read_durable(&env, &ids, &mut proof);
    proof.finish("tokens across chunk and page edges", 120);
}

#[test]
fn b30_a_receipt_whose_kept_tail_starts_inside_a_key_masks_it() {
    // The in-memory tail keeps the last 200,000 bytes; a key followed by almost
    // that much output starts the tail (and so the receipt) inside its body.
    let env = Env::new();
    let key = Key::new(&mut Rng(0x5eed_0006));
    let key_file = data(&env, "key.txt", &key.pem);
    let after = data(&env, "after.txt", &filler(PAGE_BYTES - 3_000, 1));
    let command = script(
        &env,
        "key-then-output",
        &format!("echo start\ncat {key_file} {after}\n"),
    );
    let mut proof = Proof::new(key.secrets());
    let id = start(&env, Mode::Pipe, &["--notify"], &command);
    let label = "key 197 KB before the end, pipe".to_owned();
    read_finished(&env, &id, &label, &mut proof);
    read_pages(&env, &id, &label, &[(0, 10), (20, 30)], None, &mut proof);
    read_durable(&env, &[(id, label)], &mut proof);
    proof.finish("a key at the start of the kept tail", 20);
}

/// A client that records the log notifications the server sends.
#[derive(Debug, Clone, Default)]
struct Catcher {
    logs: Arc<Mutex<Vec<Value>>>,
}

impl ClientHandler for Catcher {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logs.lock().expect("not poisoned").push(params.data);
    }
}

type Mcp = RunningService<RoleClient, Catcher>;

async fn connect(env: &Env) -> Mcp {
    let mut cmd = tokio::process::Command::new(HERD);
    cmd.arg("mcp")
        .arg("--owner")
        .arg("agent-1")
        .current_dir(env.scratch())
        .env_remove("HERD_PARENT_OWNER")
        .env_remove("INVOCATION_ID")
        .env("HERD_HOME", env.home())
        .env("HERD_LOG", "warn");
    let transport = TokioChildProcess::new(cmd).expect("herd mcp starts");
    Catcher::default()
        .serve(transport)
        .await
        .expect("the MCP handshake succeeds")
}

/// Calls `tool` and checks every text block of its result (the answer and the
/// notices riding it).
/// Each `process` action of `actions` on session `id` (its arguments merged in),
/// every answer read into `proof` under `label`.
async fn process_actions(
    client: &Mcp,
    proof: &mut Proof,
    label: &str,
    id: &str,
    actions: &[(&str, Value)],
) {
    for (action, extra) in actions {
        let mut args = json!({"action": action, "session_id": id});
        for (k, v) in extra.as_object().expect("an object") {
            args[k] = v.clone();
        }
        call(
            client,
            proof,
            &format!("{label}: process {action} {extra}"),
            "process",
            args,
        )
        .await;
    }
}

/// `c\bc` for each character: bold as `man` prints it.
fn bold(text: &str) -> String {
    text.chars().map(|c| format!("{c}\u{8}{c}")).collect()
}

/// Runs `command` once per mode (pipe and PTY) with `--notify`, reads it back
/// on every finished route and on the pages `pages` picks from its log's line
/// count, and returns the sessions with their labels (for `read_durable`).
fn read_each_mode(
    env: &Env,
    name: &str,
    command: &str,
    proof: &mut Proof,
    pages: impl Fn(usize) -> Vec<(usize, usize)>,
) -> Vec<(String, String)> {
    let mut ids = Vec::new();
    for mode in Mode::BOTH {
        let label = format!("{name}, {}", mode.name());
        let id = start(env, mode, &["--notify"], command);
        read_finished(env, &id, &label, proof);
        let total = log_lines(env, &id);
        read_pages(env, &id, &label, &pages(total), None, proof);
        ids.push((id, label));
    }
    ids
}

async fn call(
    client: &Mcp,
    proof: &mut Proof,
    route: &str,
    tool: &'static str,
    args: Value,
) -> Value {
    let params = CallToolRequestParams::new(tool)
        .with_arguments(args.as_object().cloned().expect("object args"));
    let result: CallToolResult = client
        .call_tool(params)
        .await
        .expect("the tool call is answered");
    let texts: Vec<String> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    let answer: Value = serde_json::from_str(texts.first().expect("a first text block"))
        .expect("the first block is JSON");
    proof.json(&format!("mcp {route}"), &answer);
    for notice in &texts[1..] {
        proof.text(&format!("mcp {route}: notice"), notice);
    }
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b30_mcp_tools_mask_every_shape() {
    let env = Env::new();
    let mut rng = Rng(0x5eed_0007);
    let key = Key::new(&mut rng);
    let key_file = data(&env, "key.txt", &key.pem);
    let unfinished_file = data(
        &env,
        "unfinished.txt",
        &key.pem[..key.pem.find("-----END").expect("the key ends")],
    );
    let (escapes, mut secrets) = escape_shapes(&env, &mut rng);
    secrets.extend(key.secrets());
    let window_token = format!("ghp_{}", rng.alnum(36));
    let window_file = data(
        &env,
        "window.txt",
        &format!("intro\n{window_token}{}", filler(COMPLETION_CHARS - 20, 1)),
    );
    secrets.push(secret(
        "token where the completion window starts",
        &window_token,
    ));
    let shapes = [
        (
            "key at once",
            script(
                &env,
                "key",
                &format!("echo start\ncat {key_file}\necho done\n"),
            ),
        ),
        (
            "key line by line",
            script(
                &env,
                "key-by-line",
                &format!(
                    "echo start\nwhile IFS= read -r l; do printf '%s\\n' \"$l\"; sleep 0.005; done < {key_file}\necho done\n"
                ),
            ),
        ),
        ("escapes", escapes),
        (
            "window inside a token",
            script(&env, "window", &format!("cat {window_file}\n")),
        ),
    ];
    let unfinished = script(
        &env,
        "unfinished",
        &format!("echo start\ncat {unfinished_file}\nread _\n"),
    );
    let mut proof = Proof::new(secrets);
    let client = connect(&env).await;
    for mode in Mode::BOTH {
        let pty = mode == Mode::Pty;
        let m = mode.name();
        for (shape, command) in &shapes {
            let label = format!("{shape}, {m}");
            call(
                &client,
                &mut proof,
                &format!("{label}: terminal (foreground)"),
                "terminal",
                json!({"command": command, "pty": pty, "timeout": 30}),
            )
            .await;
            let started = call(
                &client,
                &mut proof,
                &format!("{label}: terminal (background)"),
                "terminal",
                json!({"command": command, "pty": pty, "background": true, "notify": true}),
            )
            .await;
            let id = started["session_id"]
                .as_str()
                .expect("a session id")
                .to_owned();
            process_actions(
                &client,
                &mut proof,
                &label,
                &id,
                &[
                    ("wait", json!({"timeout": 20})),
                    ("poll", json!({})),
                    ("log", json!({})),
                    ("log", json!({"limit": 3})),
                    ("log", json!({"offset": 0, "limit": 2})),
                    ("log", json!({"offset": 5, "limit": 10})),
                    ("log", json!({"offset": 30, "limit": 200})),
                ],
            )
            .await;
        }
        call(
            &client,
            &mut proof,
            &format!("{m}: process list"),
            "process",
            json!({"action": "list"}),
        )
        .await;
        let label = format!("unfinished key, {m}, running");
        let started = call(
            &client,
            &mut proof,
            &format!("{label}: terminal (background)"),
            "terminal",
            json!({"command": unfinished, "pty": pty, "background": true}),
        )
        .await;
        let id = started["session_id"]
            .as_str()
            .expect("a session id")
            .to_owned();
        let last_body = key.body.last().expect("a body").clone();
        tokio::task::block_in_place(|| await_raw(&env, &id, &last_body));
        process_actions(
            &client,
            &mut proof,
            &label,
            &id,
            &[
                ("poll", json!({})),
                ("log", json!({})),
                ("log", json!({"offset": 10, "limit": 5})),
                ("wait", json!({"timeout": 0.3})),
                ("kill", json!({})),
            ],
        )
        .await;
    }
    // Completions still queued ride a later call; then the log notifications.
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let before = proof.n_reads;
        call(
            &client,
            &mut proof,
            "process list (late notices)",
            "process",
            json!({"action": "list"}),
        )
        .await;
        if proof.n_reads == before + 1 {
            break;
        }
    }
    let logged = client.service().logs.lock().expect("not poisoned").clone();
    for entry in &logged {
        proof.json("mcp log notification", entry);
    }
    client.cancel().await.expect("the client closes");
    proof.finish("the MCP tools", 80);
}

mod audit;
mod echoed;
mod files;
mod listings;
mod ppk;
mod shapes;
