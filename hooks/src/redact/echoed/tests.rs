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
        format!("x\n(venv) bob@laptop:~/app$ mysql -uroot -p{pass} app\n"),
        format!("(base) root@gpu:~# redis-cli -a {pass} ping\n"),
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
fn b30_an_echoed_command_shows_what_the_command_line_reader_shows() {
    // A long password: the mask is the reader's (head and tail), not longer.
    let r = Redactor::builtin();
    for command in [
        "mysql -uroot -pKx9mQ2vL7pR4tY8wZ3nB6cJ5 app",
        "redis-cli -a Kx9mQ2vL7pR4tY8wZ3nB6cJ5 ping",
        "curl -u admin:Kx9mQ2vL7pR4tY8wZ3nB6cJ5 https://x.example",
        "docker login -u bob -p Kx9mQ2vL7pR4tY8wZ3nB6cJ5 reg.example",
    ] {
        let line = format!("root@web:~# {command}\n");
        let echoed = r.redact(&line, RedactMode::Code);
        assert_eq!(
            echoed,
            format!("root@web:~# {}\n", r.redact_command(command)),
            "{command}"
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
        // `# ` alone is a comment: prose about flags, hashes, placeholders.
        "# Using the --password option\n",
        "# Set --client-secret before deploying\n",
        "# sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n",
        "# api_key=YOUR_API_KEY\n",
        "ok\n# sshpass -p Hunter2xZ ssh deploy@web\n",
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

#[test]
fn b30_command_lines_in_a_shell_trace_are_masked_as_command_lines() {
    let pass = "Pw7rT9xQ2mZ4vK8yB";
    for text in [
        format!("+ mysql -uroot -p{pass} app\n"),
        format!("out\n++ curl -s -u admin:{pass} https://x.example\nmore"),
        format!("+ sshpass -p {pass} ssh host"),
        format!("+ smbclient //h/s -U admin%{pass}"),
    ] {
        let out = code(&text);
        assert!(!out.contains(&pass[..10]), "{text:?} -> {out}");
    }
    let plain = "+ make -j4 all\n+ ./run --verbose\n";
    assert_eq!(code(plain), plain);
}
