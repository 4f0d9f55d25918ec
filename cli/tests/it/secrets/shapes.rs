//! B30 end to end, the shapes a fresh corpus found leaking, through every CLI
//! route and the durable ones (receipts, ledger, events, a restarted daemon):
//! a key read through `grep -r`, `grep -n`, `cat -A` and `diff`, a key inside
//! twice-escaped JSON, a key block longer than 64 KiB read at windows far from
//! its BEGIN, tokens in man-page overstrike and split by a DCS string, provider
//! shapes herd did not know; secrets on command lines; and an unfinished token on
//! the paged routes of a running job.

use super::{
    Key, Mode, Proof, Rng, Secret, bold, data, json_any, read_durable, read_each_mode,
    read_finished, script, secret, start,
};
use crate::support::Env;

/// `_\bc` for each character: underlined as `man` prints it.
fn underlined(text: &str) -> String {
    text.chars().map(|c| format!("_\u{8}{c}")).collect()
}

const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The job's script and data: every leaking shape of the issue, printed once.
fn shapes(env: &Env, rng: &mut Rng) -> (String, Vec<Secret>, usize) {
    let key = Key::new(rng);
    let keys = env.scratch().join("keys");
    std::fs::create_dir_all(&keys).expect("the scratch dir is writable");
    std::fs::write(keys.join("id_rsa"), &key.pem).expect("the scratch dir is writable");
    let mut secrets = key.secrets();
    // A key inside a JSON string inside a JSON string.
    let inner = serde_json::json!({ "key": key.pem }).to_string();
    let twice = serde_json::json!({ "config": inner }).to_string();
    let json_file = data(env, "twice.json", &format!("{twice}\n"));
    // A block longer than 64 KiB: windows at its end are far from its BEGIN.
    let long_body: Vec<String> = (0..1_200).map(|_| rng.pick(BASE64, 64)).collect();
    let long = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        long_body.join("\n")
    );
    for (idx, line) in long_body.iter().enumerate().step_by(7) {
        secrets.push(secret(&format!("long key line {idx}"), line));
    }
    let long_file = data(env, "long.pem", &long);
    // Tokens in overstrike, split by a DCS string, and shapes herd did not know.
    let bold_token = format!("ghp_{}", rng.alnum(36));
    let under_token = format!("whsec_{}", rng.alnum(32));
    let dcs_token = format!("glpat-{}", rng.alnum(20));
    let slack = format!(
        "hooks.slack.com/services/T0{}/B0{}/{}",
        rng.alnum(8),
        rng.alnum(8),
        rng.alnum(24)
    );
    let google = format!("ya29.{}", rng.alnum(60));
    let cookie = rng.alnum(32);
    let url_pass = format!("Pw{}", rng.alnum(16));
    let aws = rng.alnum(40);
    let tokens = format!(
        "bold {}\nunderlined {}\ndcs {}\u{1b}Pq#0;2;0;0;0\u{1b}\\{}\nhook https://{slack}\ngoogle {google}\nCookie: session={cookie}; theme=dark\nclone ftp://deploy:{url_pass}@ftp.example.com/x\n[default]\naws_secret_access_key = {aws}\n",
        bold(&bold_token),
        underlined(&under_token),
        &dcs_token[..10],
        &dcs_token[10..],
    );
    let tokens_file = data(env, "tokens.txt", &tokens);
    for (name, text) in [
        ("bold token", bold_token.as_str()),
        ("underlined token", under_token.as_str()),
        ("token split by DCS", dcs_token.as_str()),
        ("slack webhook", slack.as_str()),
        ("google access token", google.as_str()),
        ("cookie", cookie.as_str()),
        ("ftp password", url_pass.as_str()),
        ("aws secret access key", aws.as_str()),
    ] {
        secrets.push(secret(name, text));
    }
    let command = script(
        env,
        "shapes",
        &format!(
            "cd '{}'\necho start\ngrep -r . keys\ngrep -n . keys/id_rsa\ncat -A keys/id_rsa\ndiff /dev/null keys/id_rsa\ncat {json_file}\ncat {tokens_file}\ncat {long_file}\necho done\n",
            env.scratch().display()
        ),
    );
    (command, secrets, long_body.len())
}

#[test]
fn b30_keys_behind_prefixes_escapes_and_long_blocks_and_new_shapes_are_masked_everywhere() {
    let env = Env::new();
    let mut rng = Rng(0x5eed_0034);
    let (command, secrets, n_long) = shapes(&env, &mut rng);
    let mut proof = Proof::new(secrets);
    let ids = read_each_mode(&env, "corpus shapes", &command, &mut proof, |total| {
        assert!(total > n_long, "the log holds the long block");
        // Pages inside the long block, its BEGIN more than 64 KiB before them.
        vec![(total - 3, 2), (total - 40, 10), (total - n_long / 2, 5)]
    });
    read_durable(&env, &ids, &mut proof);
    proof.finish("corpus shapes", 40);
}

#[test]
fn b30_command_lines_are_shown_redacted_and_run_as_written() {
    let env = Env::new();
    let mut rng = Rng(0x5eed_0035);
    let token = rng.alnum(30);
    let pass = format!("Pw{}", rng.alnum(16));
    let commands = [
        format!("API_TOKEN={token} bash -c 'echo length ${{#API_TOKEN}}'"),
        format!("curl -u admin:{pass} --version >/dev/null; echo curl done"),
        format!("mysql -p{pass} --version >/dev/null 2>&1; echo mysql done"),
        format!("bash -c 'echo app done' app --password={pass}"),
    ];
    let mut proof = Proof::new(vec![
        secret("API_TOKEN value", &token),
        secret("password option", &pass),
    ]);
    let mut ids = Vec::new();
    for (n, command) in commands.iter().enumerate() {
        let label = format!("command line {n}");
        let answer = env.json(&["run", "--json", "--notify", "--", command]);
        proof.json(&format!("{label}: run --json"), &answer);
        let id = answer["session_id"]
            .as_str()
            .expect("run --json names the session")
            .to_owned();
        read_finished(&env, &id, &label, &mut proof);
        ids.push((id, label));
    }
    // The command ran with the value as written: the job saw all 30 characters.
    let ran = env.ok(&["logs", &ids[0].0]);
    assert!(
        ran.contains("length 30"),
        "the job did not see its token: {ran}"
    );
    read_durable(&env, &ids, &mut proof);
    proof.finish("secrets on command lines", 30);
}

#[test]
fn b30_paged_routes_hold_an_unfinished_token_like_the_streams() {
    let env = Env::new();
    let mut rng = Rng(0x5eed_0036);
    let token = format!("ghp_{}", rng.alnum(36));
    let command = script(
        &env,
        "partial",
        &format!("printf 'line one\\ntoken {}'\nsleep 30\n", &token[..26]),
    );
    let mut proof = Proof::new(vec![secret("token still being written", &token)]);
    for mode in Mode::BOTH {
        let label = format!("unfinished token, {}", mode.name());
        let id = start(&env, mode, &[], &command);
        super::await_raw(&env, &id, &token[..26]);
        for args in [
            vec!["logs", id.as_str()],
            vec!["logs", id.as_str(), "--offset", "0", "--limit", "10"],
            vec!["logs", id.as_str(), "-n", "1"],
            vec!["poll", id.as_str()],
        ] {
            proof.text(&format!("{label}: {args:?}"), &env.ok(&args));
        }
        for args in [
            vec!["logs", id.as_str(), "-n", "1", "--json"],
            vec![
                "logs",
                id.as_str(),
                "--offset",
                "1",
                "--limit",
                "1",
                "--json",
            ],
            vec!["poll", id.as_str(), "--json"],
        ] {
            proof.json(&format!("{label}: {args:?}"), &json_any(&env, &args));
        }
        env.ok(&["kill", &id]);
    }
    proof.finish("an unfinished token on paged routes", 14);
}

#[test]
fn b21_b30_a_heartbeat_deep_in_a_long_key_shows_only_masks() {
    let env = Env::new();
    std::fs::write(
        env.home().join("config.toml"),
        "heartbeat_floor_seconds = 1\n",
    )
    .expect("the home is writable");
    let mut rng = Rng(0x5eed_0037);
    // 1,400 body lines (about 90 KB) after BEGIN, a pause, then 100 more: the
    // beat that carries the last ones starts far more than 64 KiB after BEGIN.
    let body: Vec<String> = (0..1_500).map(|_| rng.pick(BASE64, 64)).collect();
    let first = data(
        &env,
        "first.pem",
        &format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n",
            body[..1_400].join("\n")
        ),
    );
    let rest = data(&env, "rest.pem", &format!("{}\n", body[1_400..].join("\n")));
    let job = script(
        &env,
        "beat-key",
        &format!("cat {first}\nsleep 2.5\ncat {rest}\necho after-the-key\nread _\n"),
    );
    let secrets = body[1_400..]
        .iter()
        .enumerate()
        .map(|(idx, line)| secret(&format!("key line {}", 1_400 + idx), line))
        .collect();
    let mut proof = Proof::new(secrets);
    let id = start(&env, Mode::Pipe, &["--heartbeat", "1"], &job);
    super::await_raw(&env, &id, "after-the-key");
    let mut events: Vec<serde_json::Value> = Vec::new();
    let beat = crate::support::wait_until(std::time::Duration::from_secs(15), || {
        events.extend(
            env.ok(&["events"])
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()),
        );
        events.iter().any(|e| {
            e["type"] == "heartbeat"
                && e["output"]
                    .as_str()
                    .is_some_and(|o| o.contains("after-the-key"))
        })
    });
    assert!(
        beat.is_ok(),
        "no heartbeat carried the key's last lines within 15 s; saw {events:?}"
    );
    assert!(
        events.iter().any(|e| e["type"] == "heartbeat"
            && e["output"]
                .as_str()
                .is_some_and(|o| o.contains(super::KEY_MASK))),
        "no heartbeat showed the key's lines masked: {events:?}"
    );
    for e in &events {
        proof.json(&format!("events: {}", e["type"]), e);
    }
    env.ok(&["kill", &id]);
    proof.finish("a heartbeat deep in a long key", 2);
}

#[test]
fn b30_a_follow_started_deep_inside_a_long_key_shows_only_masks() {
    let env = Env::new();
    let mut rng = Rng(0x5eed_0038);
    // 1,400 body lines (about 90 KB) after BEGIN; the job waits; the follow starts
    // at the log's end, far more than 64 KiB after BEGIN; then 100 more lines.
    let body: Vec<String> = (0..1_500).map(|_| rng.pick(BASE64, 64)).collect();
    let first = data(
        &env,
        "first.pem",
        &format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n",
            body[..1_400].join("\n")
        ),
    );
    let rest = data(&env, "rest.pem", &format!("{}\n", body[1_400..].join("\n")));
    let go = env.scratch().join("go");
    let job = script(
        &env,
        "follow-key",
        &format!(
            "cat {first}\nwhile [ ! -e '{}' ]; do sleep 0.05; done\ncat {rest}\necho after-the-key\n",
            go.display()
        ),
    );
    let secrets = body
        .iter()
        .enumerate()
        .map(|(idx, line)| secret(&format!("key line {idx}"), line))
        .collect();
    let mut proof = Proof::new(secrets);
    for mode in Mode::BOTH {
        let label = format!("a follow deep in a long key, {}", mode.name());
        let _ = std::fs::remove_file(&go);
        let id = start(&env, mode, &[], &job);
        super::await_raw(&env, &id, &body[1_399]);
        let follow = super::Follow::with_args(&env, &["logs", &id, "-n", "1", "--follow"]);
        // `-n 1` prints the last line so far (masked), then follows from the end.
        follow.await_output("the last line so far", |t| t.contains(super::KEY_MASK));
        std::fs::write(&go, "").expect("the scratch dir is writable");
        let followed = follow.finish();
        assert!(
            followed.contains("after-the-key"),
            "{label}: the follow did not show the job's last line: {followed:?}"
        );
        let n_masks = followed.matches(super::KEY_MASK).count();
        assert!(
            n_masks > 100,
            "{label}: the follow showed {n_masks} masked lines, not the 101 it should: {followed:?}"
        );
        proof.text(&format!("{label}: logs -n 1 --follow"), &followed);
    }
    proof.finish("a follow deep in a long key", 2);
}
