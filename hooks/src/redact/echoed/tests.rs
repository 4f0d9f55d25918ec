//! Command lines echoed after a prompt or in a shell's trace are read as command
//! lines; other lines that start alike are left as printed.

use crate::{RedactMode, Redactor};

fn code(text: &str) -> String {
    Redactor::builtin()
        .redact(text, RedactMode::Code)
        .into_owned()
}

#[test]
fn b30_commands_echoed_after_a_prompt_are_masked_as_command_lines() {
    let pass = "Pw7rT9xQ2mZ4vK8yB";
    for text in [
        // CI logs: each script line after `$ `.
        format!("$ mysql -uroot -p{pass} -e 'select 1'\n"),
        format!("Running job\n$ docker login -u bob -p {pass} registry.example.com\nLogin failed"),
        format!("ok\r\n# sshpass -p {pass} ssh deploy@web\r\n"),
        // An interactive shell in a PTY: Debian's and Fedora's prompts, a venv.
        format!("out\r\nroot@web-1:~# mysql -uroot -p{pass} app\r\n"),
        format!("out\nbob@build.example.com:~$ curl -s -u admin:{pass} https://x.example\n"),
        format!("x\n[deploy@web-1 app]$ redis-cli -a {pass} ping\n"),
        format!("x\n[root@web-1 ~]# mysql -p{pass}\n"),
        format!("\u{1b}[?2004hroot@vm:/srv/app# docker login -u bob -p {pass} reg.example\r\n"),
        format!("\u{1b}[?2004l\r\u{1b}[?2004hroot@vm:/srv# mysql -p{pass}\r\n"),
        format!("x\r\n\r\rbob@laptop:~$ redis-cli -a {pass} ping\r\n"),
        format!("x\r\nbash-5.2# mysql -uroot -p{pass} app\r\n"),
        format!("sh-5.1$ sshpass -p {pass} ssh host\n"),
        format!("x\nbob@laptop:/home/bob/src/app$ sshpass -p {pass} scp a host:b\n"),
        format!("root@web-1:~# mysql -uroot -p{pass} app"),
        // The shell's trace, as before.
        format!("+ mysql -uroot -p{pass} app\n"),
        format!("out\n++ curl -s -u admin:{pass} https://x.example\r\nmore"),
    ] {
        let out = code(&text);
        assert!(!out.contains(&pass[..10]), "{text:?} -> {out:?}");
        // What is not the secret stays.
        assert!(
            out.contains("-p") || out.contains("-u") || out.contains("-a"),
            "{out:?}"
        );
    }
}

#[test]
fn b30_lines_that_start_like_a_prompt_but_hold_no_command_secret_stay() {
    for text in [
        "# Database settings\nhost = db\n",
        "$ ls -la\ntotal 8\n",
        "# mysql -u root -p\n",
        "costs ~$ 5 or ]$ 6\n",
        "[warning]# not a prompt -pHunter2x\n",
        "x\nuser:~$ mysql -pHunter2x is shown in the docs\n",
        "x\nnot a prompt@host:~$ -pHunter2x\n",
        "x\n[no at sign]$ mysql -pHunter2x\n",
        "#\n$\n~$ \n]# ",
        "x\n(venv) bob@laptop:~$ mysql -p\n",
        "x\nbob@laptop:app$ mysql -pHunter2x\n",
        "12:00:01 web# mysql -pHunter2x\n",
        "a@b: c$ mysql -pHunter2x\n",
        "bash-x# mysql -pHunter2x\n",
        "mybash-5.2# mysql -pHunter2x\n",
    ] {
        assert_eq!(code(text), text, "over-masked");
    }
}
