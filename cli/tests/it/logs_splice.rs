//! The read-out's zero-copy routes, against the JSON route's text (B30): the
//! daemon sends blocks it changed nothing in straight from the log file
//! (sendfile), `herd logs` moves frames to stdout by splice (into a pipe
//! directly, into a file through a pipe of its own, and by plain writes where a
//! file opened for appending takes no splice), a follow of a fast-growing log
//! reads it out on every core as it grows; and a fast pipe job's output reaches
//! its log whole after the noise line, within the log's cap.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Env, wait_until};

/// The output of a `logs.dump` of `id` without frames: `log` notes, JSON
/// escaped, the route of protocol 1.
fn noted_dump(env: &Env, id: &str) -> String {
    env.ok(&["ps"]);
    let stream = UnixStream::connect(env.socket()).expect("the daemon's socket accepts");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("a timeout can be set");
    let mut reader = BufReader::new(stream.try_clone().expect("the stream clones"));
    let mut writer = stream;
    let line = |reader: &mut BufReader<UnixStream>| -> Value {
        let mut text = String::new();
        reader.read_line(&mut text).expect("the daemon answers");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"))
    };
    for request in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "hello",
            "params": {"protocol": 1, "client": "logs-splice-test"}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "logs.dump", "params": {"id": id}}),
    ] {
        writer
            .write_all(format!("{request}\n").as_bytes())
            .expect("the daemon reads");
    }
    assert_eq!(line(&mut reader)["id"], 1);
    let mut output = String::new();
    loop {
        let message = line(&mut reader);
        if message["method"] == "log" {
            output.push_str(message["params"]["output"].as_str().expect("output"));
            continue;
        }
        assert!(message["result"]["next_byte"].is_u64(), "{message}");
        return output;
    }
}

/// A finished job's log of about 3 MiB: clean stretches (blocks sent as read),
/// tokens and private-key blocks (blocks redacted) now and then.
fn mixed_job(env: &Env) -> String {
    let command = "for i in $(seq 1 60); do yes \"INFO line $i status=ok\" | head -c 50000; \
        if [ $((i % 7)) = 0 ]; then echo \"tok ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef$i x\"; fi; \
        if [ $((i % 20)) = 0 ]; then echo '-----BEGIN RSA PRIVATE KEY-----'; \
        for j in $(seq 1 300); do echo MIIEpAIBAAKCAQEA0123456789abcdefghijklmnopqrstuvwxyzAB; done; \
        echo '-----END RSA PRIVATE KEY-----'; fi; done";
    let id = env.start_json(&["--", command]);
    let waited = env.json(&["wait", &id, "--timeout", "60", "--json"]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    id
}

/// Runs `herd args…` with stdout on `out`; it must succeed.
fn herd_into(env: &Env, args: &[&str], out: File) {
    let status = env
        .cmd(args)
        .stdout(Stdio::from(out))
        .status()
        .expect("herd runs");
    assert!(status.success(), "herd {args:?}: {status}");
}

#[test]
fn b30_herd_logs_spliced_to_a_pipe_or_a_file_prints_what_the_json_route_shows() {
    let env = Env::new();
    let id = mixed_job(&env);
    let expected = noted_dump(&env, &id);
    assert!(expected.len() > 2 << 20, "{}", expected.len());
    assert!(!expected.contains("ghp_ABCDEFGHIJ"), "a token is shown");
    assert!(!expected.contains("MIIEpAIB"), "key body is shown");
    assert_eq!(expected.matches("[REDACTED PRIVATE KEY]").count(), 3 * 302);
    // Into a pipe: spliced straight in.
    assert!(
        env.ok(&["logs", &id]) == expected,
        "logs into a pipe differs"
    );
    assert!(
        env.ok(&["logs", "-f", &id]) == expected,
        "logs -f into a pipe differs"
    );
    // Into a file: through the client's own pipe.
    let path = env.scratch().join("logs.out");
    for args in [
        ["logs", &id as &str].as_slice(),
        ["logs", "-f", &id].as_slice(),
    ] {
        herd_into(&env, args, File::create(&path).expect("a file"));
        let got = std::fs::read_to_string(&path).expect("the file");
        assert!(got == expected, "{args:?} into a file differs");
    }
    // Into a file opened for appending: splice refuses it; the bytes are written.
    std::fs::write(&path, "before\n").expect("a file");
    let appended = OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("the file opens for appending");
    herd_into(&env, &["logs", &id], appended);
    let got = std::fs::read_to_string(&path).expect("the file");
    assert!(
        got.strip_prefix("before\n") == Some(expected.as_str()),
        "logs appended to a file differs"
    );
}

#[test]
fn b30_a_follow_of_a_fast_growing_log_prints_what_the_json_route_shows() {
    let env = Env::new();
    // Bursts of 1.25 MiB with a token after each, the follow started after the
    // first: the read-out reads on as the log grows by more than a chunk at a time.
    let command = "for i in $(seq 1 4); do yes \"INFO burst $i status=ok\" | head -c 1310720; \
        echo \"tok ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef$i x\"; sleep 0.1; done";
    let id = env.start_json(&["--", command]);
    let log = env.home().join("logs/sessions").join(format!("{id}.log"));
    crate::support::wait_until(Duration::from_secs(30), || {
        std::fs::metadata(&log).is_ok_and(|m| m.len() > 1 << 20)
    })
    .expect("the job writes its first burst");
    let path = env.scratch().join("follow.out");
    herd_into(
        &env,
        &["logs", "-f", &id],
        File::create(&path).expect("a file"),
    );
    let mut got = String::new();
    File::open(&path)
        .and_then(|mut f| f.read_to_string(&mut got))
        .expect("the follow's output");
    let expected = noted_dump(&env, &id);
    let log_len = std::fs::metadata(&log).expect("the log").len();
    assert_eq!(log_len, 4 * 1_310_720 + 4 * 44, "the whole output is kept");
    assert!(got == expected, "the follow differs from the JSON dump");
    assert_eq!(got.matches("tok ghp_").count(), 4);
    assert!(!got.contains("ghp_ABCDEFGHIJ"), "a token is shown");
    // And the same follow piped, of the finished log.
    assert!(env.ok(&["logs", "-f", &id]) == expected);
}

#[test]
fn b28_a_fast_pipe_jobs_log_is_every_byte_after_the_noise() {
    let env = Env::new();
    // A shell's noise line first (left out), then a real line, then 6 MB as fast
    // as the job can write.
    let command = "echo 'bash: cannot set terminal process group (1): Inappropriate ioctl for device'; \
        echo first; yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 6000000; echo; echo last";
    let id = env.start_json(&["--", command]);
    let waited = env.json(&["wait", &id, "--timeout", "60", "--json"]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    let log = std::fs::read(env.home().join("logs/sessions").join(format!("{id}.log")))
        .expect("the session log");
    let mut expected = b"first\n".to_vec();
    expected.extend(
        b"0123456789abcdefghijklmnopqrstuvwxyz\n"
            .iter()
            .copied()
            .cycle()
            .take(6_000_000),
    );
    expected.extend_from_slice(b"\nlast\n");
    assert_eq!(log.len(), expected.len());
    assert!(log == expected, "the log differs from the job's output");
    let polled = env.poll_json(&id);
    assert_eq!(
        polled["bytes_not_kept"].as_u64().unwrap_or(0),
        0,
        "{polled}"
    );
}

#[test]
fn b28_a_capped_log_keeps_its_cap_under_a_fast_writer() {
    let env = Env::new();
    std::fs::write(env.home().join("config.toml"), "log_cap_bytes = 1000000\n")
        .expect("the config");
    let id = env.start_json(&["--", "echo first; yes abcdefghi | head -c 3000000"]);
    let waited = env.json(&["wait", &id, "--timeout", "60", "--json"]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    let log = std::fs::read(env.home().join("logs/sessions").join(format!("{id}.log")))
        .expect("the session log");
    assert_eq!(log.len(), 1_000_000);
    assert!(log.starts_with(b"first\nabcdefghi\n"));
    let polled = env.poll_json(&id);
    assert_eq!(
        polled["bytes_not_kept"].as_u64(),
        Some(3_000_006 - 1_000_000),
        "{polled}"
    );
}

/// Runs a 48 MiB job (six read-out batches), starts `herd logs` of it into a pipe
/// that is not read beyond its first byte, cuts the log to `cut` bytes and reads
/// on: the output must be the log as it is now, the daemon alive. The daemon's
/// log (`herd::readout` at debug) is returned.
fn read_out_while_cut(cut: u64) -> String {
    let mut env = Env::new();
    env.vars
        .push(("HERD_LOG".to_owned(), "info,herd::readout=debug".to_owned()));
    let line = "INFO the read-out maps this log and it is cut short under it ok";
    assert_eq!(line.len() + 1, 64);
    let id = env.start_json(&["--", &format!("yes '{line}' | head -c {}", 48 << 20)]);
    let waited = env.json(&["wait", &id, "--timeout", "60", "--json"]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    let daemon = env.daemon_pid().expect("the daemon runs");
    let log_path = env.home().join("logs/sessions").join(format!("{id}.log"));

    let mut client = env
        .cmd(&["logs", &id])
        .stdout(Stdio::piped())
        .spawn()
        .expect("herd logs starts");
    let mut out = client.stdout.take().expect("its stdout");
    // Its first byte: the read-out has begun. With nothing more read, the daemon
    // sends at most what the pipe and the socket hold (the frames' send buffer is
    // 4 MiB, which the kernel doubles): about 8.4 MB, the first batch (8.33 MB)
    // or a little into the second, never into the third.
    let mut shown = vec![0u8; 1];
    out.read_exact(&mut shown).expect("the first byte");
    // The read-out is as far as it gets while nothing is read: five batches
    // mapped (the one being written, two waiting for the writer, one redacted and
    // waiting to join them, the next mapped ahead): batches 1 to 5 or 2 to 6.
    let maps = || {
        std::fs::read_to_string(format!("/proc/{daemon}/maps"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.ends_with(&format!("{id}.log")))
            .count()
    };
    assert!(
        wait_until(Duration::from_secs(120), || maps() >= 5).is_ok(),
        "the read-out maps five batches ahead of a client that reads nothing: {}",
        maps()
    );
    OpenOptions::new()
        .write(true)
        .open(&log_path)
        .and_then(|f| f.set_len(cut))
        .expect("the log is cut short");
    out.read_to_end(&mut shown).expect("the rest");
    let status = client.wait().expect("herd logs ends");
    assert!(status.success(), "herd logs: {status}");
    let log = std::fs::read(&log_path).expect("the log");
    assert_eq!(log.len() as u64, cut);
    assert!(
        shown == log,
        "the read shows the log as it is now: {} bytes shown, {} in the log",
        shown.len(),
        log.len()
    );
    env.ok(&["ps"]);
    assert_eq!(env.daemon_pid(), Some(daemon), "the same daemon answers");
    std::fs::read_to_string(env.home().join("logs/daemon.log")).unwrap_or_default()
}

#[test]
fn b5_a_log_cut_short_while_it_is_read_out_is_shown_to_its_new_end_and_the_daemon_lives() {
    // Inside the sixth batch (41.65 to 49.98 MB), which the read-out has mapped
    // ahead but not read, or not mapped yet: its redaction meets the pages the
    // log lost.
    let daemon_log = read_out_while_cut((44 << 20) + 64 * 1000);
    assert!(
        daemon_log.contains("the log shrank under its map"),
        "the read-out met the cut in a mapped batch and went on by the chunked route: {daemon_log}"
    );
}

#[test]
fn b5_a_log_cut_short_under_a_batch_made_before_the_cut_is_shown_to_its_new_end() {
    // Inside the third batch (16.66 to 24.99 MB), redacted before the cut and
    // waiting for the writer: it is not sent from the file past the log's new end.
    let daemon_log = read_out_while_cut((20 << 20) + 64 * 7);
    assert!(
        daemon_log.contains("the log was cut short under a read-out batch"),
        "the writer saw the cut before the batch and the chunked route went on: {daemon_log}"
    );
}
