//! B30 end to end for secrets printed outside an environment dump: a `.netrc`
//! (one pair a line, one entry a line, `default`) and a `.pgpass` read under
//! other names, a private key through `base64` (wrapped at 76 columns), an OSC 8
//! hyperlink whose target carries a password (the raw bytes checked too), and
//! tokens of the providers the trufflehog comparison added; through every CLI route
//! and the durable ones, over a pipe and a PTY, with pages inside the base64 block.

use super::{Key, Proof, Rng, data, read_durable, read_each_mode, script, secret};
use crate::support::Env;

/// Standard base64 of `data` wrapped at 76 columns, as `base64` prints it.
fn base64_wrapped(data: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut flat = String::new();
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            flat.push(if i <= chunk.len() {
                char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize])
            } else {
                '='
            });
        }
    }
    flat.as_bytes()
        .chunks(76)
        .map(|line| format!("{}\n", String::from_utf8_lossy(line)))
        .collect()
}

#[test]
fn b30_credential_files_base64_keys_and_link_targets_are_masked_everywhere() {
    let env = Env::new();
    let mut rng = Rng(0x5eed_0060);
    let key = Key::new(&mut rng);
    let keys = env.scratch().join("keys");
    std::fs::create_dir_all(&keys).expect("the scratch dir is writable");
    std::fs::write(keys.join("key.pem"), &key.pem).expect("the scratch dir is writable");
    let netrc_pass = format!("Nq{}", rng.alnum(14));
    let netrc_one = format!("Nl{}", rng.alnum(14));
    let netrc_default = format!("Nd{}", rng.alnum(14));
    let netrc = data(
        &env,
        "netrc-backup",
        &format!(
            "machine git.example.com\n  login deploy\n  password {netrc_pass}\nmachine api.example.com login me password {netrc_one}\ndefault login anonymous password {netrc_default}\n"
        ),
    );
    let pg_pass = format!("Pg{}", rng.alnum(14));
    let pg_star = format!("Ps{}", rng.alnum(14));
    let pgpass = data(
        &env,
        "pgpass-copy",
        &format!("db.example.com:5432:app:app_user:{pg_pass}\n*:*:*:postgres:{pg_star}\n"),
    );
    let link_pass = format!("Lk{}", rng.alnum(16));
    let tokens = [
        format!("figp_{}", rng.alnum(44)),
        format!("bkua_{}", rng.pick(b"abcdef0123456789", 40)),
        format!("sbp_{}", rng.pick(b"abcdef0123456789", 40)),
        format!("nvapi-{}", rng.alnum(64)),
        format!("tskey-auth-{}-{}", rng.alnum(12), rng.alnum(30)),
    ];
    let tokens_file = data(&env, "tokens.txt", &format!("{}\n", tokens.join("\n")));
    let mut secrets = key.secrets();
    for (name, text) in [
        ("netrc password line", netrc_pass.as_str()),
        ("netrc one-line entry", netrc_one.as_str()),
        ("netrc default entry", netrc_default.as_str()),
        ("pgpass password", pg_pass.as_str()),
        ("pgpass wildcard password", pg_star.as_str()),
        ("link target password", link_pass.as_str()),
    ] {
        secrets.push(secret(name, text));
    }
    for token in &tokens {
        secrets.push(secret("compared provider token", token));
    }
    // The base64 lines of the key: every one is a secret.
    let encoded = base64_wrapped(key.pem.as_bytes());
    for (idx, line) in encoded.lines().enumerate() {
        if line.len() >= 40 {
            secrets.push(secret(&format!("base64 key line {idx}"), line));
        }
    }
    let command = script(
        &env,
        "files",
        &format!(
            "cd '{}'\necho start\ncat {netrc}\ngrep -n password {netrc}\ncat {pgpass}\nprintf '\\033]8;;https://deploy:{link_pass}@git.example.com/repo\\033\\\\repo\\033]8;;\\033\\\\\\n'\ncat {tokens_file}\nbase64 keys/key.pem\n",
            env.scratch().display(),
        ),
    );
    let mut proof = Proof::new(secrets);
    let ids = read_each_mode(&env, "files", &command, &mut proof, |total| {
        // Pages inside the base64 block at the end, far from its first line.
        vec![(total - 3, 2), (total - 20, 5), (total - 50, 10)]
    });
    for (id, label) in &ids {
        // The raw bytes: the link's escape is there, its target's password is not.
        let raw = env.ok(&["logs", id]);
        assert!(
            !raw.contains(&link_pass),
            "{label}: the link target shows: {raw}"
        );
        assert!(
            raw.contains("\u{1b}]8;;https://deploy:")
                && raw.contains("@git.example.com/repo\u{1b}\\repo"),
            "{label}: the link is no longer whole: {raw:?}"
        );
        assert!(raw.contains("machine git.example.com"), "{label}: {raw}");
    }
    read_durable(&env, &ids, &mut proof);
    proof.finish("credential files, base64 keys and link targets", 30);
}
