//! B30 end to end with inputs the other secret tests do not use: a key listed by
//! other tools (`grep -rn` with a deep path, `nl`, `sed -n l`, a removal in
//! `diff -u`, a Python list of lines, JSON escaped three times, a YAML block
//! scalar), a key printed after 200 KiB without a newline, a 300 KiB key block read
//! at several high offsets, tokens of other providers in overstrike, and secrets on
//! command lines in other forms (an option and its value apart, `curl --user`,
//! `sshpass -pPASS`, `redis-cli -a`, `openssl -pass pass:`, the script of
//! `bash -c`, URL userinfo, `export NAME=…`).

use super::{
    Key, Proof, Rng, Secret, bold, data, read_durable, read_each_mode, read_finished, script,
    secret,
};
use crate::support::Env;

const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The job's script: every listing once; its secrets; the body lines of the
/// 300 KiB block.
fn listings(env: &Env, rng: &mut Rng) -> (String, Vec<Secret>, usize) {
    let key = Key::new(rng);
    let deep = env.scratch().join("srv/app/config/prod/tls");
    std::fs::create_dir_all(&deep).expect("the scratch dir is writable");
    std::fs::write(deep.join("server.key"), &key.pem).expect("the scratch dir is writable");
    let pem = data(env, "server.key", &key.pem);
    let mut secrets = key.secrets();
    let json = serde_json::to_string(&key.pem).unwrap_or_default();
    let thrice = serde_json::to_string(&serde_json::to_string(&json).unwrap_or_default())
        .unwrap_or_default();
    let lines: Vec<String> = key.pem.lines().map(|l| format!("'{l}'")).collect();
    let yaml: String = key.pem.lines().map(|l| format!("    {l}\n")).collect();
    let escaped = data(
        env,
        "escaped.txt",
        &format!(
            "{{\"secret\": {thrice}}}\n[{}]\ntls:\n  key: |\n{yaml}",
            lines.join(", ")
        ),
    );
    let mut after_long = "x".repeat(200 * 1024);
    after_long.push_str(&key.pem);
    let after_long = data(env, "after-long.txt", &after_long);
    // 300 KiB of body lines after one BEGIN.
    let long_body: Vec<String> = (0..4_700).map(|_| rng.pick(BASE64, 64)).collect();
    for (idx, line) in long_body.iter().enumerate().step_by(97) {
        secrets.push(secret(&format!("long key line {idx}"), line));
    }
    let long = data(
        env,
        "long.pem",
        &format!(
            "-----BEGIN EC PRIVATE KEY-----\n{}\n-----END EC PRIVATE KEY-----\n",
            long_body.join("\n")
        ),
    );
    let tokens = [
        format!("sk-proj-{}", rng.alnum(40)),
        format!("AKIA{}", rng.pick(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)),
        format!("xoxb-{}-{}", rng.pick(b"0123456789", 12), rng.alnum(24)),
    ];
    let overstrike: String = tokens
        .iter()
        .map(|t| format!("NAME {}\n", bold(t)))
        .collect();
    for t in &tokens {
        secrets.push(secret("token in overstrike", t));
    }
    let overstrike = data(env, "overstrike.txt", &overstrike);
    let command = script(
        env,
        "listings",
        &format!(
            "cd '{}'\necho start\ngrep -rn . srv\nnl {pem}\nsed -n l {pem}\ndiff -u {pem} /dev/null\ncat {escaped}\ncat {after_long}\necho\ncat {overstrike}\ncat {long}\necho done\n",
            env.scratch().display()
        ),
    );
    (command, secrets, long_body.len())
}

#[test]
fn b30_keys_in_other_listings_escapings_and_long_blocks_are_masked_everywhere() {
    let env = Env::new();
    let mut rng = Rng(0x5eed_0040);
    let (command, secrets, n_long) = listings(&env, &mut rng);
    let mut proof = Proof::new(secrets);
    let ids = read_each_mode(&env, "other listings", &command, &mut proof, |total| {
        assert!(total > n_long, "the log holds the long block");
        // Pages at several high offsets inside the 300 KiB block.
        [2, 300, 1_200, 2_500, 4_000, n_long - 10]
            .iter()
            .map(|back| (total - 2 - back, 3))
            .collect()
    });
    read_durable(&env, &ids, &mut proof);
    proof.finish("other listings", 40);
}

#[test]
fn b30_command_lines_in_other_forms_are_shown_redacted_and_run_as_written() {
    let env = Env::new();
    let mut rng = Rng(0x5eed_0041);
    let token = rng.alnum(30);
    let pass = format!("Pw{}", rng.alnum(16));
    let commands = [
        format!("export API_TOKEN={token} && bash -c 'echo length ${{#API_TOKEN}}'"),
        format!("mysql --password {pass} --version >/dev/null 2>&1; echo mysql done"),
        format!("curl --user admin:{pass} --version >/dev/null; echo curl done"),
        format!("sshpass -p{pass} true 2>/dev/null; echo sshpass done"),
        format!("redis-cli -a {pass} ping 2>/dev/null; echo redis done"),
        format!("openssl version -a -pass pass:{pass} 2>/dev/null; echo openssl done"),
        format!("bash -c 'MYSQL_PWD={pass} true; echo script done'"),
        format!(
            "echo clone https://deploy:{pass}@git.example.com/o/r.git >/dev/null; echo url done"
        ),
    ];
    let mut proof = Proof::new(vec![
        secret("exported token", &token),
        secret("password", &pass),
    ]);
    let mut ids = Vec::new();
    for (n, command) in commands.iter().enumerate() {
        let label = format!("command line form {n}");
        let answer = env.json(&["run", "--json", "--notify", "--", command]);
        proof.json(&format!("{label}: run --json"), &answer);
        let id = answer["session_id"]
            .as_str()
            .expect("run --json names the session")
            .to_owned();
        read_finished(&env, &id, &label, &mut proof);
        ids.push((id, label));
    }
    // The commands ran as written: the job saw the whole token.
    let ran = env.ok(&["logs", &ids[0].0]);
    assert!(
        ran.contains("length 30"),
        "the job did not see its token: {ran}"
    );
    read_durable(&env, &ids, &mut proof);
    proof.finish("command lines in other forms", 40);
}
