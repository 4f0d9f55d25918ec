//! `logs.frames`: a log stream's output as binary frames after the answer
//! (`{"frames": 1}`, then 4-byte little-endian lengths and bytes, a zero length,
//! then the stream's end as a second answer). The daemon reads the log out on
//! every core first; the text is the one the `log` notes of protocol 1 carry,
//! redacted the same way (B30): tokens, private-key blocks across the read-out's
//! block edges, a start inside a line.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Env, wait_until};

/// One raw protocol connection that reads notes and binary frames.
struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

/// What one stream sent: its output, how many `log` notes and binary frames
/// carried it, its first answer and its end.
struct Streamed {
    output: String,
    notes: usize,
    frames: usize,
    first: Value,
    end: Value,
}

impl Conn {
    fn open(env: &Env) -> (Conn, Value) {
        env.ok(&["ps"]);
        let stream = UnixStream::connect(env.socket()).expect("the daemon's socket accepts");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("a timeout can be set");
        let mut conn = Conn {
            reader: BufReader::new(stream.try_clone().expect("the stream clones")),
            writer: stream,
        };
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "hello",
            "params": {"protocol": 1, "client": "logs-frames-test"}});
        conn.writer
            .write_all(format!("{request}\n").as_bytes())
            .expect("the daemon reads");
        let hello = conn.line();
        (conn, hello["result"].clone())
    }

    fn line(&mut self) -> Value {
        let mut line = String::new();
        self.reader
            .read_line(&mut line)
            .expect("the daemon answers within 30 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
    }

    /// Runs the stream `method` with `params` (request id 2) to its end.
    fn stream(mut self, method: &str, params: Value) -> Streamed {
        let request = json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params});
        self.writer
            .write_all(format!("{request}\n").as_bytes())
            .expect("the daemon reads");
        let mut output = Vec::new();
        let (mut notes, mut frames) = (0, 0);
        let mut first = Value::Null;
        loop {
            let message = self.line();
            if message["method"] == "log" {
                notes += 1;
                let text = message["params"]["output"].as_str().expect("output");
                output.extend_from_slice(text.as_bytes());
                continue;
            }
            assert_eq!(message["id"], 2, "{message}");
            if first.is_null() && message["result"]["frames"] == 1 {
                first = message;
                loop {
                    let mut head = [0u8; 4];
                    self.reader.read_exact(&mut head).expect("a frame header");
                    let len = u32::from_le_bytes(head) as usize;
                    if len == 0 {
                        break;
                    }
                    frames += 1;
                    let mut body = vec![0u8; len];
                    self.reader
                        .read_exact(&mut body)
                        .expect("the frame's bytes");
                    output.extend_from_slice(&body);
                }
                continue;
            }
            let output = String::from_utf8(output).expect("the output is text");
            return Streamed {
                output,
                notes,
                frames,
                first,
                end: message,
            };
        }
    }
}

/// The offset of a line start deep inside the finished job's key block: the
/// 1,501st body line (`MI…`).
fn key_body_line_start(log: &[u8]) -> u64 {
    log.windows(3)
        .enumerate()
        .filter(|(_, w)| *w == b"\nMI")
        .nth(1500)
        .map(|(at, _)| at as u64 + 1)
        .expect("key body lines")
}

/// A finished job's ~1.1 MiB log (more than one JSON chunk): lines with a token now and then, and private-key
/// blocks of 3,000 body lines (about 180 KiB: each crosses the read-out's 64 KiB
/// blocks), one left open at the end.
fn finished_job(env: &Env) -> String {
    let command = "for i in $(seq 1 20000); do echo \"line $i status=ok\"; \
        if [ $((i % 5000)) = 0 ]; then echo \"tok ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef$i x\"; \
        echo '-----BEGIN RSA PRIVATE KEY-----'; \
        for j in $(seq 1 3000); do echo MIIEpAIBAAKCAQEA0123456789abcdefghijklmnopqrstuvwxyzAB; done; \
        [ $i = 20000 ] || echo '-----END RSA PRIVATE KEY-----'; fi; done";
    let id = env.start_json(&["--", command]);
    let waited = env.json(&["wait", &id, "--timeout", "60", "--json"]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    id
}

#[test]
fn b30_binary_log_frames_carry_the_same_redacted_text_as_log_notes() {
    let env = Env::new();
    let id = finished_job(&env);
    let (conn, hello) = Conn::open(&env);
    let caps = hello["capabilities"].as_array().expect("capabilities");
    assert!(caps.iter().any(|c| c == "logs.frames"), "{hello}");
    let framed = conn.stream("logs.dump", json!({"id": id, "frames": true}));
    let noted = Conn::open(&env).0.stream("logs.dump", json!({"id": id}));
    assert_eq!((framed.notes, noted.frames), (0, 0));
    assert!(
        framed.frames >= 1 && noted.notes >= 2,
        "{} {}",
        framed.frames,
        noted.notes
    );
    assert_eq!(framed.first["result"], json!({"frames": 1}));
    assert_eq!(framed.end["result"], noted.end["result"]);
    assert!(
        framed.output == noted.output,
        "framed and JSON dumps differ"
    );
    assert!(
        !framed.output.contains("ghp_ABCDEFGHIJ"),
        "a token is shown"
    );
    assert!(!framed.output.contains("MIIEpAIB"), "key body is shown");
    assert_eq!(
        framed.output.matches("[REDACTED PRIVATE KEY]").count(),
        4 * 3000 + 7
    );

    // From a line start inside a key block (the key state there is asked), and
    // from inside a line (the chunked route alone), as the JSON route shows them.
    let body = noted.end["result"]["next_byte"]
        .as_u64()
        .expect("next_byte");
    let log = std::fs::read(env.home().join("logs/sessions").join(format!("{id}.log")))
        .expect("the session log");
    assert_eq!(log.len() as u64, body);
    let inside_key = key_body_line_start(&log);
    for from_byte in [inside_key, inside_key + 7] {
        let framed = Conn::open(&env).0.stream(
            "logs.follow",
            json!({"id": id, "from_byte": from_byte, "frames": true, "result": true}),
        );
        let noted = Conn::open(&env).0.stream(
            "logs.follow",
            json!({"id": id, "from_byte": from_byte, "result": true}),
        );
        assert!(
            framed.output == noted.output,
            "from {from_byte}: framed and JSON follows differ"
        );
        assert!(
            !framed.output.contains("MIIEpAIB"),
            "from {from_byte}: key body is shown"
        );
        assert_eq!(
            framed.end["result"]["result"]["exit_code"], 0,
            "{}",
            framed.end
        );
    }
    assert_eq!(env.ok(&["logs", &id]), noted.output, "herd logs prints it");
    assert_eq!(
        env.ok(&["logs", "-f", &id]),
        noted.output,
        "herd logs -f prints it"
    );
}

#[test]
fn b30_an_unknown_session_is_a_plain_error_without_frames() {
    let env = Env::new();
    let got = Conn::open(&env).0.stream(
        "logs.dump",
        json!({"id": "proc_000000000000", "frames": true}),
    );
    assert_eq!(got.frames, 0);
    assert!(
        got.first.is_null() && got.end["error"].is_object(),
        "{}",
        got.end
    );
}

/// How many read-outs the daemon's log says were shown from a memo
/// (`herd::readout` at debug).
fn memo_readouts(env: &Env) -> usize {
    std::fs::read_to_string(env.home().join("logs/daemon.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("herd::readout") && l.contains("read out from its memo"))
        .count()
}

/// A home whose daemon logs its read-outs (`herd::readout` at debug), with
/// [`finished_job`] done: the job's id, and the start of a key body line deep in
/// its log.
fn memo_logged_job() -> (Env, String, u64) {
    let mut env = Env::new();
    env.vars
        .push(("HERD_LOG".to_owned(), "info,herd::readout=debug".to_owned()));
    let id = finished_job(&env);
    let log = std::fs::read(env.home().join("logs/sessions").join(format!("{id}.log")))
        .expect("the session log");
    let inside_key = key_body_line_start(&log);
    (env, id, inside_key)
}

/// A `logs.follow` of `id` from `from_byte` to its end, in frames or notes.
fn follow_from(env: &Env, id: &str, from_byte: u64, frames: bool) -> Streamed {
    Conn::open(env).0.stream(
        "logs.follow",
        json!({"id": id, "from_byte": from_byte, "frames": frames, "result": true}),
    )
}

#[test]
fn b30_a_finished_log_read_out_again_from_its_memo_shows_the_same_redacted_text() {
    let (env, id, inside_key) = memo_logged_job();
    let noted = Conn::open(&env).0.stream("logs.dump", json!({"id": id}));
    let log_path = env.home().join("logs/sessions").join(format!("{id}.log"));
    let from_key = |env: &Env, frames: bool| follow_from(env, &id, inside_key, frames);
    let noted_from_key = from_key(&env, false);
    assert_eq!(memo_readouts(&env), 0);
    // The first framed read-out of each offset makes the memo, the next ones
    // show from it: the same text each time.
    for round in 0..3 {
        let framed = Conn::open(&env)
            .0
            .stream("logs.dump", json!({"id": id, "frames": true}));
        assert!(framed.output == noted.output, "round {round}: dumps differ");
        assert_eq!(framed.end["result"], noted.end["result"], "round {round}");
        let framed = from_key(&env, true);
        assert!(
            framed.output == noted_from_key.output,
            "round {round}: follows from inside a key block differ"
        );
        assert!(!framed.output.contains("MIIEpAIB"), "key body is shown");
    }
    assert_eq!(env.ok(&["logs", &id]), noted.output, "herd logs prints it");
    // Two offsets read out again twice each, and herd logs (the daemon's log is
    // written a little after the stream ends).
    let logged = wait_until(Duration::from_secs(20), || memo_readouts(&env) >= 5);
    assert!(
        logged.is_ok(),
        "{} memo read-outs logged",
        memo_readouts(&env)
    );
    assert_eq!(memo_readouts(&env), 5);

    // The log file changed (its open key block closed, a token and another key
    // block appended): its memo is not used, and the new text is shown redacted.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&log_path)
        .expect("the log opens");
    file.write_all(
        b"-----END RSA PRIVATE KEY-----\nlate ghp_ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvuts9 x\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAlate\n-----END RSA PRIVATE KEY-----\n",
    )
    .expect("the log is written");
    drop(file);
    let before = memo_readouts(&env);
    let noted = Conn::open(&env).0.stream("logs.dump", json!({"id": id}));
    let framed = Conn::open(&env)
        .0
        .stream("logs.dump", json!({"id": id, "frames": true}));
    assert_eq!(memo_readouts(&env), before, "a changed log is read again");
    assert!(
        framed.output == noted.output,
        "dumps of the changed log differ"
    );
    assert!(framed.output.contains("\nlate "), "the late line is shown");
    assert!(
        !framed.output.contains("ghp_ZYXWVU"),
        "a late token is shown"
    );
    assert!(
        !framed.output.contains("MIIEpAIBAAKCAQEAlate"),
        "a late key is shown"
    );
}

#[test]
fn b38_a_log_finished_before_a_restart_reads_out_from_its_receipt_as_it_did_before() {
    let (env, id, inside_key) = memo_logged_job();
    let from_key = |env: &Env, frames: bool| follow_from(env, &id, inside_key, frames);
    // What the JSON route shows while the session is in the table.
    let noted = Conn::open(&env).0.stream("logs.dump", json!({"id": id}));
    let noted_from_key = from_key(&env, false);
    assert!(
        !noted_from_key.output.contains("MIIEpAIB"),
        "key body is shown"
    );
    env.crash_daemon();
    env.ok(&["ps"]);
    assert_eq!(memo_readouts(&env), 0);
    // The JSON route shows the same text from the receipt.
    let noted_again = Conn::open(&env).0.stream("logs.dump", json!({"id": id}));
    assert!(noted_again.output == noted.output, "JSON dumps differ");
    // After the restart the session is a receipt: the read-out serves it (its first
    // read makes a memo, the next ones show from it), the same text each time,
    // and a start inside a key block still masks the block (no key index now: the
    // log's look-back decides).
    for round in 0..2 {
        let framed = Conn::open(&env)
            .0
            .stream("logs.dump", json!({"id": id, "frames": true}));
        assert!(framed.output == noted.output, "round {round}: dumps differ");
        let framed = from_key(&env, true);
        assert!(
            framed.output == noted_from_key.output,
            "round {round}: follows from inside a key block differ"
        );
    }
    assert!(
        env.ok(&["logs", &id[..10]]) == noted.output,
        "herd logs by prefix prints it"
    );
    let logged = wait_until(Duration::from_secs(20), || memo_readouts(&env) >= 3);
    assert!(
        logged.is_ok(),
        "{} memo read-outs logged after the restart",
        memo_readouts(&env)
    );
}
