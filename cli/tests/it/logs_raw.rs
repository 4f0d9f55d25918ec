//! `logs.raw`, the log read-out without JSON. `logs.dump` and
//! `logs.follow` with `"raw": true` send each piece of output as a `log.bytes`
//! frame (a header line naming its length, then the bytes as they are); without
//! it they send `log` notes as protocol 1 always did. Both carry the same text,
//! redacted the same way (B30), and `herd logs` prints that text.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::Env;

/// One raw protocol connection that can read `log.bytes` frames.
struct Raw {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Raw {
    fn open(env: &Env) -> (Raw, Value) {
        env.ok(&["ps"]);
        let stream = UnixStream::connect(env.socket()).expect("the daemon's socket accepts");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("a timeout can be set");
        let mut raw = Raw {
            reader: BufReader::new(stream.try_clone().expect("the stream clones")),
            writer: stream,
        };
        raw.send(
            1,
            "hello",
            json!({"protocol": 1, "client": "logs-raw-test"}),
        );
        let hello = raw.line();
        (raw, hello["result"].clone())
    }

    fn send(&mut self, id: u64, method: &str, params: Value) {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.writer
            .write_all(format!("{request}\n").as_bytes())
            .expect("the daemon reads");
    }

    fn line(&mut self) -> Value {
        let mut line = String::new();
        self.reader
            .read_line(&mut line)
            .expect("the daemon answers within 30 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
    }

    /// Runs the stream `method` with `params` to its answer: the output its
    /// notes and frames carried, how many of each, and the answer.
    fn stream(&mut self, id: u64, method: &str, params: Value) -> (String, usize, usize, Value) {
        self.send(id, method, params);
        let (mut output, mut notes, mut frames) = (Vec::new(), 0, 0);
        loop {
            let message = self.line();
            match message["method"].as_str() {
                Some("log") => {
                    notes += 1;
                    let text = message["params"]["output"].as_str().expect("output");
                    output.extend_from_slice(text.as_bytes());
                }
                Some("log.bytes") => {
                    frames += 1;
                    let len = message["params"]["len"].as_u64().expect("len");
                    let mut body = vec![0u8; usize::try_from(len).expect("len fits")];
                    self.reader
                        .read_exact(&mut body)
                        .expect("the frame's bytes");
                    output.extend_from_slice(&body);
                }
                _ => {
                    let text = String::from_utf8(output).expect("the output is text");
                    return (text, notes, frames, message);
                }
            }
        }
    }
}

/// A finished job whose 1.2 MiB of output needs JSON escapes on every line
/// (quotes, backslashes, tabs, an escape byte) and carries a token across the
/// first chunk's edge and one at the end.
#[test]
fn b30_raw_log_frames_carry_the_same_redacted_text_as_log_notes() {
    let env = Env::new();
    let token = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij";
    let command = format!(
        "for i in $(seq 1 20000); do printf 'line %05d \"q\" \\\\ \\t \\033[1m bold\\033[0m %s\\n' $i 0123456789abcdef0123456789; done; echo 'token {token} end'"
    );
    let id = env.start_json(&["--", &command]);
    let waited = env.json(&["wait", &id, "--timeout", "30", "--json"]);
    assert_eq!(waited["exit_code"], 0, "{waited}");

    // A stream uses its connection up: one connection each.
    let (mut raw, hello) = Raw::open(&env);
    let caps = hello["capabilities"].as_array().expect("capabilities");
    assert!(caps.iter().any(|c| c == "logs.raw"), "{hello}");
    let (framed, notes, frames, end) = raw.stream(
        2,
        "logs.dump",
        json!({"id": id, "from_byte": 0, "raw": true}),
    );
    assert_eq!(notes, 0, "a raw dump sends no log notes");
    assert!(frames >= 2, "1.2 MiB comes in several frames: {frames}");
    assert!(end["result"]["next_byte"].as_u64() > Some(1 << 20), "{end}");
    let (noted, notes, frames, end_json) =
        Raw::open(&env)
            .0
            .stream(3, "logs.dump", json!({"id": id, "from_byte": 0}));
    assert_eq!(frames, 0, "a protocol-1 dump sends no frames");
    assert!(notes >= 2, "{notes}");
    assert_eq!(end["result"], end_json["result"]);
    assert!(framed == noted, "raw and JSON dumps differ");
    assert_eq!(framed.lines().count(), 20001);
    assert!(framed.contains("\"q\" \\ \t"), "{}", &framed[..200]);
    assert!(!framed.contains(token), "the token is shown");
    let last = framed.lines().last().unwrap_or("");
    assert!(
        last.starts_with("token ") && last.ends_with(" end"),
        "{last}"
    );

    let (followed, notes, frames, _) =
        Raw::open(&env)
            .0
            .stream(4, "logs.follow", json!({"id": id, "raw": true}));
    assert_eq!((notes, followed == framed), (0, true), "{frames} frames");
    assert_eq!(
        env.ok(&["logs", &id]),
        framed,
        "herd logs prints the same text"
    );
}
