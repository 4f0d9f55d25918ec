//! `.netrc` and `.pgpass` lines in ordinary output, and the lines of the same
//! look that must stay.

use crate::{RedactMode, Redactor};

fn code(text: &str) -> String {
    static REDACTOR: std::sync::OnceLock<Redactor> = std::sync::OnceLock::new();
    REDACTOR
        .get_or_init(Redactor::builtin)
        .redact(text, RedactMode::Code)
        .into_owned()
}

#[test]
fn b30_netrc_lines_printed_anywhere_are_masked() {
    let secret = "Xq7rT2mPz9Lk";
    for text in [
        format!("machine api.example.com\n  login me\n  password {secret}\n"),
        format!("machine h\n\tlogin u\n\tpassword {secret}\r\n"),
        format!("machine h login u password {secret}\n"),
        format!("machine h password {secret} login u\n"),
        format!("default login anonymous password {secret}\n"),
        format!("default\n    login x\n    password {secret}"),
        format!("3:  password {secret}\n"),
        format!("/root/.netrc:  password {secret}\n"),
        format!("/root/.netrc:7:password {secret}\n"),
    ] {
        let out = code(&text);
        assert!(
            !out.contains(secret),
            "{text:?} shows the password: {out:?}"
        );
        assert_eq!(out.lines().count(), text.lines().count(), "{out:?}");
    }
    // A window that starts on the password line alone still masks it.
    let out = Redactor::builtin().redact_after(
        "machine h\n  login u\n",
        &format!("  password {secret}\n"),
        RedactMode::Code,
    );
    assert_eq!(out, "  password ***\n");
}

#[test]
fn b30_pgpass_lines_printed_anywhere_are_masked() {
    let secret = "Xq7rT2mPz9Lk";
    for text in [
        format!("db.example.com:5432:app:app_user:{secret}\n"),
        format!("localhost:5432:*:postgres:{secret}\n"),
        format!("*:*:*:*:{secret}\n"),
        format!("127.0.0.1:6432:billing:svc:{secret}\r\n"),
        format!("db:5432:app:u:{secret}\\:more\n"),
        format!("# comment\nreplica.internal:5433:app:app:{secret}\nnext line"),
        format!("/home/me/.pgpass:db.example.com:5432:app:app:{secret}\n"),
        format!("/home/me/.pgpass:2:db.example.com:5432:app:app:{secret}\n"),
        format!("2:db.example.com:5432:app:app:{secret}\n"),
    ] {
        let out = code(&text);
        assert!(
            !out.contains(secret),
            "{text:?} shows the password: {out:?}"
        );
    }
}

#[test]
fn b30_lines_shaped_like_credential_files_but_not_one_stay() {
    for text in [
        "12:34:56:789:abc",
        "2026-12-04T12:34:56:789:Z",
        "fe80::1:2:3:4",
        "fe80:0:0:0:1",
        "2001:db8:85a3:0:0:8a2e:370:7334",
        "00:1a:2b:3c:4d:5e",
        "aa:bb:cc:dd:ee:ff",
        "root:x:0:0:root:/root:/bin/bash",
        "daemon:*:1:1:System Services:/var/root:/usr/bin/false",
        "root:*:19000:0:99999:7:::",
        "system:serviceaccount:kube-system:default",
        "arn:aws:eks:us-east-1:123456789012:cluster/prod",
        "default/nginx-7c5d8b9f4-x2x9z:80:TCP:Running",
        "src/main.c:42:5: error: expected ';'",
        "main.rs:120:9:warning:unused",
        "nginx:1.25:alpine:linux:amd64",
        "host:99999:db:user:value",
        "host:080:db:user:value",
        "password reset for alice",
        "Enter password:",
        "  password",
        "the password login page",
        "login failed: wrong password",
        "Error: password incorrect",
        "password_hash = bcrypt(password)",
    ] {
        assert_eq!(code(text), text, "over-masked");
    }
}
