//! `run --wait` in one write. `hello` and a `spawn` with `follow`
//! (capability `spawn.follow`) written together, before `hello`'s answer: the
//! spawn runs once the handshake succeeded, its answer comes as a `spawned` note,
//! then the job's output and, in the stream's answer, how it ended. Behind a
//! refused `hello` the spawn is refused too, and nothing runs. A plain `run`
//! writes its spawn behind `hello` too, with `follow: false`, and gets a plain
//! answer.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Env, stdout, wait_until};

/// A connection with `lines` written in one write.
fn pipelined(env: &Env, lines: &[Value]) -> BufReader<UnixStream> {
    env.ok(&["ps"]);
    let mut stream = UnixStream::connect(env.socket()).expect("the daemon's socket accepts");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a timeout can be set");
    let mut all = String::new();
    for line in lines {
        all.push_str(&format!("{line}\n"));
    }
    stream.write_all(all.as_bytes()).expect("the daemon reads");
    BufReader::new(stream)
}

fn next(reader: &mut BufReader<UnixStream>) -> Value {
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .expect("the daemon answers within 30 s");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// `hello` and a following spawn of `echo one; echo two; exit 3` with `extra`
/// params, written together; the connection once hello's answer (announcing
/// `capability`) and the `spawned` note were read, and that note.
fn following_spawn(env: &Env, extra: Value, capability: &str) -> (BufReader<UnixStream>, Value) {
    let mut params = json!({"command": "echo one; echo two; exit 3", "owner": "cli",
                            "follow": true});
    if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
        params.extend(extra.clone());
    }
    let mut reader = pipelined(
        env,
        &[
            request(
                1,
                "hello",
                json!({"protocol": 1, "client": "pipelined-test"}),
            ),
            request(2, "spawn", params),
        ],
    );
    let hello = next(&mut reader);
    assert_eq!(hello["id"], 1, "{hello}");
    let caps = hello["result"]["capabilities"]
        .as_array()
        .expect("capabilities");
    assert!(caps.iter().any(|c| c == capability), "{hello}");
    let spawned = next(&mut reader);
    assert_eq!(spawned["method"], "spawned", "{spawned}");
    (reader, spawned)
}

#[test]
fn b23_a_spawn_that_follows_behind_hello_streams_the_job_and_its_ending() {
    let env = Env::new();
    let (mut reader, spawned) = following_spawn(&env, json!({"raw": true}), "spawn.follow");
    let id = spawned["params"]["session_id"]
        .as_str()
        .expect("the spawn's answer names the session")
        .to_owned();
    assert!(spawned["params"]["pid"].as_i64() > Some(1), "{spawned}");
    let mut output = Vec::new();
    let end = loop {
        let message = next(&mut reader);
        match message["method"].as_str() {
            Some("log.bytes") => {
                let len = message["params"]["len"].as_u64().expect("len");
                let mut body = vec![0u8; usize::try_from(len).expect("len fits")];
                reader.read_exact(&mut body).expect("the frame's bytes");
                output.extend_from_slice(&body);
            }
            Some("log") => panic!("a raw stream sends frames, not notes: {message}"),
            _ => break message,
        }
    };
    assert_eq!(end["id"], 2, "{end}");
    assert_eq!(String::from_utf8_lossy(&output), "one\ntwo\n");
    assert_eq!(end["result"]["result"]["session_id"], id.as_str(), "{end}");
    assert_eq!(end["result"]["result"]["exit_code"], 3, "{end}");
}

#[test]
fn b23_behind_a_refused_hello_a_following_spawn_runs_nothing() {
    let env = Env::new();
    let marker = env.home().join("ran");
    let mut reader = pipelined(
        &env,
        &[
            request(
                1,
                "hello",
                json!({"protocol": 99, "client": "pipelined-test"}),
            ),
            request(
                2,
                "spawn",
                json!({"command": format!("touch {}", marker.display()), "owner": "cli",
                       "follow": true}),
            ),
        ],
    );
    let hello = next(&mut reader);
    assert!(hello["error"]["code"].is_i64(), "{hello}");
    let spawn = next(&mut reader);
    assert_eq!(spawn["id"], 2, "{spawn}");
    assert_eq!(spawn["error"]["code"], -32013, "hello required: {spawn}");
    let listed = env.json(&["ps", "--all", "--json"]);
    assert_eq!(listed["processes"], json!([]), "{listed}");
    assert!(!marker.exists(), "the refused spawn ran");
}

#[test]
fn b23_run_wait_pipelined_prints_the_output_and_exits_with_the_job() {
    let env = Env::new();
    let out = env.run(&[
        "run",
        "--wait",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 4",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "out\nerr\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "a job that failed fails run --wait"
    );
    let ok = env.run(&["run", "--wait", "--", "true"]);
    assert_eq!(ok.status.code(), Some(0));
}

/// Everything one `read` gets from `stream` (at most 1 MiB).
fn one_read(stream: &mut UnixStream) -> String {
    let mut buf = vec![0u8; 1 << 20];
    let n = stream
        .read(&mut buf)
        .expect("the daemon writes within 30 s");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn b23_behind_hello_a_following_spawn_s_first_write_carries_hello_s_answer_and_the_note() {
    let env = Env::new();
    let reader = pipelined(
        &env,
        &[
            request(
                1,
                "hello",
                json!({"protocol": 1, "client": "pipelined-test"}),
            ),
            request(
                2,
                "spawn",
                json!({"command": "true", "owner": "cli", "follow": true, "raw": true}),
            ),
        ],
    );
    let mut stream = reader.into_inner();
    let first = one_read(&mut stream);
    let mut lines = first.lines();
    let hello: Value = serde_json::from_str(lines.next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("hello's answer first ({e}): {first:?}"));
    assert_eq!(hello["id"], 1, "{first}");
    let spawned: Value = serde_json::from_str(lines.next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the note in the same write ({e}): {first:?}"));
    assert_eq!(spawned["method"], "spawned", "{first}");
    // The rest (the answer, in this write or a later one) ends the stream.
    let mut rest = first.clone();
    while !rest.contains(r#""id":2"#) {
        let more = one_read(&mut stream);
        assert!(!more.is_empty(), "the stream ended unanswered: {rest:?}");
        rest.push_str(&more);
    }
    assert!(rest.contains(r#""exit_code":0"#), "{rest}");
}

#[test]
fn b23_behind_hello_a_request_that_waits_does_not_hold_hello_s_answer() {
    let env = Env::new();
    let id = env.ok(&["run", "--", "sleep", "60"]).trim().to_owned();
    let mut reader = pipelined(
        &env,
        &[
            request(
                1,
                "hello",
                json!({"protocol": 1, "client": "pipelined-test"}),
            ),
            request(2, "wait", json!({"id": id, "timeout_seconds": 120})),
        ],
    );
    // Answered while the wait still waits: the read's 30 s deadline is well under
    // the job's 60 s and the wait's 120 s.
    let hello = next(&mut reader);
    assert_eq!(hello["id"], 1, "{hello}");
    assert!(hello["result"]["capabilities"].is_array(), "{hello}");
    env.ok(&["kill", &id]);
    let waited = next(&mut reader);
    assert_eq!(waited["id"], 2, "{waited}");
}

#[test]
fn b1_a_plain_spawn_behind_hello_with_follow_false_is_answered_plainly() {
    // What a plain `herd run` writes: the spawn behind `hello`, `follow: false`
    // written out so that only a daemon serving `spawn.follow` takes it.
    let env = Env::new();
    let mut reader = pipelined(
        &env,
        &[
            request(
                1,
                "hello",
                json!({"protocol": 1, "client": "pipelined-test"}),
            ),
            request(
                2,
                "spawn",
                json!({"command": "echo plain", "owner": "cli", "follow": false,
                       "caller_env": {"PATH": "/usr/bin:/bin"}}),
            ),
        ],
    );
    let hello = next(&mut reader);
    assert_eq!(hello["id"], 1, "{hello}");
    let spawned = next(&mut reader);
    assert_eq!(spawned["id"], 2, "a plain answer, not a note: {spawned}");
    assert!(spawned.get("method").is_none(), "{spawned}");
    let id = spawned["result"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("the spawn's answer names the session: {spawned}"))
        .to_owned();
    let waited = env.json(&["wait", "--json", &id]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    assert!(
        env.ok(&["logs", &id]).contains("plain"),
        "the job did not run its command"
    );
}

#[test]
fn b1_run_without_wait_prints_the_id_of_a_job_that_ran() {
    let env = Env::new();
    let marker = env.home().join("ran");
    let id = env
        .ok(&[
            "run",
            "--notify",
            "--",
            "touch",
            &marker.display().to_string(),
        ])
        .trim()
        .to_owned();
    assert!(id.starts_with("proc_"), "{id:?}");
    let waited = env.json(&["wait", "--json", &id]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    assert!(marker.exists(), "the job did not run");
    let events = env.ok(&["events"]);
    assert!(
        events.contains("\"completion\"") && events.contains(id.as_str()),
        "the notified completion is not queued: {events}"
    );
}

/// A file of about 14 MiB for a job to `cat` at memory speed, so its log grows
/// faster than a follower reads it: a long private key block first, then plain
/// lines, a token now and then, and key blocks of 3,000 body lines (each crosses
/// the read-out's 64 KiB blocks and a follower's reads). The token and a key body
/// line, to look for in the output.
fn chatty_file(env: &Env) -> (std::path::PathBuf, String, String) {
    let token = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123";
    let body = "MIIEpAIBAAKCAQEA0123456789abcdefghijklmnopqrstuvwxyzAB";
    // First a key block of about 2 MiB: a follow's first read (1 MiB) ends inside
    // it, so the read-out takes over inside a key.
    let mut text = String::from("-----BEGIN OPENSSH PRIVATE KEY-----\n");
    for _ in 0..40_000 {
        text.push_str(body);
        text.push('\n');
    }
    text.push_str("-----END OPENSSH PRIVATE KEY-----\n");
    for i in 0..200_000 {
        text.push_str(&format!(
            "INFO worker-3 processed batch {i} in 56 ms status=ok\n"
        ));
        if i % 40_000 == 39_999 {
            text.push_str(&format!("tok {token} x\n-----BEGIN RSA PRIVATE KEY-----\n"));
            for _ in 0..3_000 {
                text.push_str(body);
                text.push('\n');
            }
            text.push_str("-----END RSA PRIVATE KEY-----\n");
        }
    }
    let path = env.scratch().join("chatty.txt");
    std::fs::write(&path, text).expect("the scratch file");
    (path, token.to_owned(), body.to_owned())
}

// B23/B30: `spawn` with `follow` and `frames` (capability `spawn.frames`) answers
// the note, then `{"frames": 1}`, then the output as binary frames and the stream's
// end with the job's result, in that order.
#[test]
fn b23_a_following_spawn_with_frames_sends_the_note_then_frames_then_the_ending() {
    let env = Env::new();
    let (mut reader, spawned) =
        following_spawn(&env, json!({"raw": true, "frames": true}), "spawn.frames");
    let opened = next(&mut reader);
    assert_eq!(opened["id"], 2, "{opened}");
    assert_eq!(opened["result"]["frames"], 1, "{opened}");
    let mut output = Vec::new();
    loop {
        let mut head = [0u8; 4];
        reader.read_exact(&mut head).expect("a frame header");
        let len = u32::from_le_bytes(head) as usize;
        if len == 0 {
            break;
        }
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body).expect("the frame's bytes");
        output.extend_from_slice(&body);
    }
    assert_eq!(String::from_utf8_lossy(&output), "one\ntwo\n");
    let end = next(&mut reader);
    assert_eq!(end["id"], 2, "{end}");
    assert_eq!(end["result"]["result"]["exit_code"], 3, "{end}");
    assert_eq!(
        end["result"]["result"]["session_id"], spawned["params"]["session_id"],
        "{end}"
    );
}

// B23/B30: `run --wait` of a job whose log grows faster than its follow reads it
// prints what `herd logs` prints of the finished log, byte for byte, redacted the
// same way (a token, private-key blocks): the follow fell behind and handed over
// to the read-out on every core from a line's start, and the text is seamless.
#[test]
fn b23_b30_run_wait_behind_a_fast_log_hands_over_to_the_read_out_and_shows_the_same_text() {
    let mut env = Env::new();
    env.vars
        .push(("HERD_LOG".to_owned(), "info,herd::readout=debug".to_owned()));
    let (file, token, body) = chatty_file(&env);
    // The stream starts before the job prints: its follow reads the log from the
    // start, falls behind the burst, and hands over.
    let cat = format!("sleep 1; cat {}", file.display());
    let out = env.run(&["run", "--wait", "--name", "chatty", "--", &cat]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let followed = stdout(&out);
    assert!(
        followed.len() > 10 << 20,
        "all of it came: {}",
        followed.len()
    );
    // The first key block (its markers and 40,000 body lines) is masked line by
    // line, across the hand-over inside it.
    let masked = followed
        .lines()
        .take_while(|l| *l == "[REDACTED PRIVATE KEY]")
        .count();
    assert_eq!(masked, 40_002, "{:?}", &followed[..200]);
    assert!(!followed.contains(&token), "the token is masked");
    assert!(!followed.contains(&body), "the key bodies are masked");
    assert!(followed.contains("processed batch 199999 in"), "to the end");
    let logged = env.run(&["logs", "chatty"]);
    assert_eq!(logged.status.code(), Some(0));
    assert!(
        followed == stdout(&logged),
        "run --wait and logs show the same text ({} and {} bytes)",
        followed.len(),
        logged.stdout.len()
    );
    let handed_over = || {
        std::fs::read_to_string(env.home().join("logs/daemon.log"))
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("hands over to the read-out"))
    };
    assert!(
        wait_until(Duration::from_secs(10), handed_over).is_ok(),
        "the follow handed over to the read-out (daemon.log at herd::readout=debug)"
    );
}
