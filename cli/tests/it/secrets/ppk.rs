//! B30 end to end for PuTTY private-key files (`.ppk`): the private lines and the
//! MAC are masked on every CLI route and the durable ones, over a pipe and a PTY,
//! whatever each line carries (`grep -r` paths, `grep -n` numbers, `cat -A`), in a
//! JSON string and a Python repr, and in pages that start inside the private part.

use super::{Proof, Rng, Secret, data, read_durable, read_each_mode, script, secret};
use crate::support::Env;

const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// A version 3 key file, encrypted (its Argon2 headers), and its secrets: each
/// private line and the MAC.
fn ppk(rng: &mut Rng) -> (String, Vec<Secret>) {
    let public: Vec<String> = (0..6).map(|_| rng.pick(BASE64, 64)).collect();
    let mut private: Vec<String> = (0..14).map(|_| rng.pick(BASE64, 64)).collect();
    private.push(format!("{}=", rng.pick(BASE64, 31)));
    let mac = rng.pick(b"0123456789abcdef", 64);
    let file = format!(
        "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: aes256-cbc\nComment: rsa-key-20261204\nPublic-Lines: {}\n{}\nKey-Derivation: Argon2id\nArgon2-Memory: 8192\nArgon2-Passes: 13\nArgon2-Parallelism: 1\nArgon2-Salt: {}\nPrivate-Lines: {}\n{}\nPrivate-MAC: {mac}\n",
        public.len(),
        public.join("\n"),
        rng.pick(b"0123456789abcdef", 32),
        private.len(),
        private.join("\n"),
    );
    let mut secrets: Vec<Secret> = private
        .iter()
        .enumerate()
        .map(|(idx, line)| secret(&format!("ppk private line {idx}"), line))
        .collect();
    secrets.push(secret("ppk private MAC", &mac));
    (file, secrets)
}

#[test]
fn b30_a_putty_key_file_is_masked_on_every_route() {
    let env = Env::new();
    let mut rng = Rng(0x5eed_0039);
    let (file, secrets) = ppk(&mut rng);
    let keys = env.scratch().join("keys");
    std::fs::create_dir_all(&keys).expect("the scratch dir is writable");
    std::fs::write(keys.join("id.ppk"), &file).expect("the scratch dir is writable");
    let json = data(
        &env,
        "ppk.json",
        &format!("{}\n", serde_json::json!({ "ppk": file })),
    );
    let repr = data(
        &env,
        "ppk.repr",
        &format!("key = '{}'\n", file.replace('\n', "\\n")),
    );
    let command = script(
        &env,
        "ppk",
        &format!(
            "cd '{}'\necho start\ngrep -r . keys\ngrep -n . keys/id.ppk\ncat -A keys/id.ppk\ncat {json}\ncat {repr}\ncat keys/id.ppk\necho done\n",
            env.scratch().display()
        ),
    );
    let mut proof = Proof::new(secrets);
    // Pages that start inside the private part of the last copy.
    let ids = read_each_mode(&env, "putty key file", &command, &mut proof, |total| {
        vec![(total - 4, 2), (total - 10, 3), (total - 14, 1)]
    });
    read_durable(&env, &ids, &mut proof);
    proof.finish("putty key file", 30);
}
