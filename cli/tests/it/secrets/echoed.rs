//! B30 end to end for commands an interactive shell echoes after its prompt: a
//! real `bash -i` in a PTY session, rendering Debian's prompt
//! (`root@host:/dir# `), is sent commands that carry a client's password option;
//! the echoed command lines are masked on every CLI route and the durable ones.

use std::time::Duration;

use super::{
    Mode, Proof, Rng, await_raw, find, raw_log, read_durable, read_finished, secret, start,
};
use crate::support::{Env, wait_until};

#[test]
fn b30_commands_a_pty_shell_echoes_after_its_prompt_are_masked_on_every_route() {
    let env = Env::new();
    let mut rng = Rng(0x5eed_0041);
    let mysql = format!("My{}", rng.alnum(20));
    let curl = format!("Cu{}", rng.alnum(20));
    let docker = format!("Dk{}", rng.alnum(20));
    // Debian's /etc/bash.bashrc prompt, rendered by bash itself; no rc file, so
    // the prompt is the same on every machine.
    let id = start(
        &env,
        Mode::Pty,
        &["--notify", "--env", r"PS1=\u@\h:\w\$ "],
        "bash --norc --noprofile -i",
    );
    // `\$` renders `#` for root (CI) and `$` for anyone else.
    let prompted = wait_until(Duration::from_secs(15), || {
        let log = raw_log(&env, &id);
        find(&log, b"$ ").or_else(|| find(&log, b"# ")).is_some()
    });
    assert!(prompted.is_ok(), "bash never printed its prompt");
    // The clients are shell functions that print a marker, so nothing depends on
    // which clients the machine has and no client prints its arguments back.
    env.ok(&[
        "submit",
        &id,
        "mysql() { echo ran-mysql; }; curl() { echo ran-curl; }; docker() { echo ran-docker; }",
    ]);
    // One command at a time, each after the prompt that follows the last one's
    // output, as a person or an agent types them.
    let commands = [
        (format!("mysql -uroot -p{mysql} -e 'select 1'"), "ran-mysql"),
        (
            format!("curl -s -u admin:{curl} https://example.invalid/x"),
            "ran-curl",
        ),
        (
            format!("docker login -u bob -p {docker} registry.example.com"),
            "ran-docker",
        ),
    ];
    for (command, ran) in &commands {
        env.ok(&["submit", &id, command]);
        await_raw(&env, &id, &format!("{ran}\r\n"));
    }
    env.ok(&["submit", &id, "exit"]);
    env.ok(&["wait", &id, "--timeout", "20"]);
    let mut proof = Proof::new(vec![
        secret("mysql -p after a prompt", &mysql),
        secret("curl -u user:pass after a prompt", &curl),
        secret("docker login -p after a prompt", &docker),
    ]);
    read_finished(&env, &id, "pty shell", &mut proof);
    read_durable(&env, &[(id.clone(), "pty shell".to_owned())], &mut proof);
    proof.finish("commands echoed after a prompt", 10);
}
