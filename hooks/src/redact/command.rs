//! Command lines redacted as command lines: the secrets a shell command carries in
//! its own words, which no output pattern sees as such.
//!
//! - `NAME=value` assignments before a command (`API_TOKEN=… deploy`,
//!   `env PGPASSWORD=… psql`): the value is masked when the name looks secret
//!   (`TOKEN`, `SECRET`, `PASSWORD`, `KEY`, …) or the value looks like a token;
//! - password and token options: `--password=…` / `--password …` (and `--passwd`,
//!   `--pass`, `--token`, `--api-key`, `--secret`, `--client-secret`,
//!   `--access-token`, `--auth-token`, `--http-password`, …), `-p<pass>` of the
//!   MySQL tools, `-p <pass>` of `sshpass` and `docker login`, `-u user:pass` /
//!   `--user user:pass` of `curl` (the user kept);
//! - `-p<pass>` of `sshpass`, `-a <pass>` of `redis-cli`, `pass:<pass>` of
//!   `openssl -pass`/`-passin`/`-passout`, `vault login <token>`, npm's
//!   `…:_authToken <token>`, and the password of `htpasswd -b`;
//! - the script of `bash -c '…'` (any shell), as a command line of its own;
//! - URL userinfo and every token shape are left to the output families, which run
//!   on the command line too.
//!
//! Only what is shown changes: the command runs as written.

use super::{Found, mask};

/// One word of a command line: its byte span and its text without quotes.
#[derive(Debug)]
struct Word {
    start: usize,
    end: usize,
    text: String,
    /// The word ends a command (`;`, `&&`, `|`, `(`, a newline follows it).
    ends_command: bool,
}

/// Splits `command` into shell words, honouring quotes and backslashes; a control
/// operator ends the word before it and the command it belongs to.
fn words(command: &str) -> Vec<Word> {
    let bytes = command.as_bytes();
    let mut out = Vec::new();
    let mut idx = 0;
    while idx < bytes.len() {
        match bytes[idx] {
            b' ' | b'\t' => idx += 1,
            b';' | b'&' | b'|' | b'\n' | b'(' | b')' | b'`' => {
                if let Some(last) = out.last_mut() {
                    let last: &mut Word = last;
                    last.ends_command = true;
                }
                idx += 1;
            }
            _ => {
                let start = idx;
                let mut text = String::new();
                let mut quote: Option<u8> = None;
                while idx < bytes.len() {
                    let b = bytes[idx];
                    match quote {
                        Some(q) if b == q => {
                            quote = None;
                            idx += 1;
                        }
                        Some(_) => push_char(command, &mut idx, &mut text),
                        None => match b {
                            b'"' | b'\'' => {
                                quote = Some(b);
                                idx += 1;
                            }
                            b'\\' if idx + 1 < bytes.len() => {
                                idx += 1;
                                push_char(command, &mut idx, &mut text);
                            }
                            b' ' | b'\t' | b';' | b'&' | b'|' | b'\n' | b'(' | b')' | b'`' => break,
                            _ => push_char(command, &mut idx, &mut text),
                        },
                    }
                }
                out.push(Word {
                    start,
                    end: idx,
                    text,
                    ends_command: false,
                });
            }
        }
    }
    out
}

/// Appends the character at `*idx` to `text` and steps past it.
fn push_char(command: &str, idx: &mut usize, text: &mut String) {
    let ch = command[*idx..].chars().next().unwrap_or('\u{fffd}');
    text.push(ch);
    *idx += ch.len_utf8();
}

/// Name parts that make an assignment's value secret.
const SECRET_NAME_PARTS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PWD",
    "PW",
    "KEY",
    "CREDENTIAL",
    "CREDENTIALS",
    "AUTH",
    "APIKEY",
    "PRIVATE",
    "SESSION",
    "COOKIE",
    "DSN",
];

/// Long options whose value is a secret.
const SECRET_OPTIONS: &[&str] = &[
    "password",
    "passwd",
    "pass",
    "token",
    "api-key",
    "apikey",
    "api-token",
    "secret",
    "client-secret",
    "access-token",
    "auth-token",
    "access-key",
    "secret-key",
    "secret-access-key",
    "http-password",
    "proxy-password",
    "ftp-password",
    "bearer",
    "private-key-passphrase",
    "passphrase",
    "key-password",
    "store-password",
    "registry-password",
    "oauth-token",
    "github-token",
    "gitlab-token",
    "npm-token",
    "session-token",
];

/// Programs whose `-p<pass>` (attached) is a password.
const MYSQL_LIKE: &[&str] = &[
    "mysql",
    "mysqldump",
    "mariadb",
    "mysqladmin",
    "mariadb-dump",
    "mysqlimport",
    "mysqlshow",
    "mysqlcheck",
];

/// Whether `value` looks like a token (long, mixed letters and digits, no spaces).
fn is_token_like(value: &str) -> bool {
    value.len() >= 16
        && !value.contains(['/', ' ', '.'])
        && value.bytes().any(|b| b.is_ascii_digit())
        && value.bytes().any(|b| b.is_ascii_alphabetic())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+' | b'=' | b'~'))
}

/// Whether an assignment's name looks secret.
fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|part| SECRET_NAME_PARTS.contains(&part))
        || ["TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY"]
            .iter()
            .any(|w| upper.ends_with(w))
}

/// A value that is only a reference (`$TOKEN`, `${X}`), or empty.
fn is_reference(value: &str) -> bool {
    value.is_empty() || value.starts_with('$') || value == "***"
}

/// The replacement of `word`'s part from byte `value_at` (in the original) on:
/// the value masked (a closing quote goes with it).
fn masked_from(word: &Word, value_at: usize, value: &str) -> Option<Found> {
    if is_reference(value) || value_at >= word.end {
        return None;
    }
    Some(Found {
        start: value_at,
        end: word.end,
        with: mask(value),
    })
}

/// The replacements a command line needs as a command line, sorted.
pub(super) fn command_spans(command: &str) -> Vec<Found> {
    let words = words(command);
    let mut found = Vec::new();
    let mut at_command_start = true;
    let mut program = String::new();
    let mut n = 0;
    while n < words.len() {
        let word = &words[n];
        let raw = &command[word.start..word.end];
        if at_command_start {
            // Assignments before the command (and `env`, `sudo`, `export` words).
            if let Some((name, value)) = word.text.split_once('=')
                && !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                if (is_secret_name(name) || is_token_like(value))
                    && let Some(eq) = raw.find('=')
                    && let Some(f) = masked_from(word, word.start + eq + 1, value)
                {
                    found.push(f);
                }
            } else if !matches!(
                word.text.as_str(),
                "env" | "sudo" | "export" | "exec" | "command" | "time" | "nohup" | "-E"
            ) {
                program = word.text.rsplit('/').next().unwrap_or("").to_owned();
                at_command_start = false;
                if program == "htpasswd" {
                    let end = words[n..]
                        .iter()
                        .position(|w| w.ends_command)
                        .map_or(words.len(), |i| n + i + 1);
                    htpasswd_spans(&words[n..end], &mut found);
                }
            }
        } else if word.text == "-c" && is_shell(&program) {
            // `bash -c 'SCRIPT'`: the script is a command line of its own.
            if let Some(script) = words.get(n + 1).filter(|_| !word.ends_command) {
                found.extend(script_spans(command, script));
                n += 1;
            }
        } else {
            n += option_secret(command, &words, n, &program, &mut found);
        }
        if word.ends_command {
            at_command_start = true;
            program.clear();
        }
        n += 1;
    }
    found.sort_by_key(|f| f.start);
    found.dedup_by(|b, a| b.start < a.end);
    found
}

/// Whether `program` is a shell whose `-c` takes a command line.
fn is_shell(program: &str) -> bool {
    matches!(
        program,
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "ash" | "fish"
    )
}

/// The replacements of the command line inside `script` (a `-c` argument), in
/// `command`'s offsets: only when the word is one quoted string (no escapes), so
/// its text maps onto the original byte for byte.
fn script_spans(command: &str, script: &Word) -> Vec<Found> {
    let raw = &command[script.start..script.end];
    let quoted = raw.len() >= 2
        && matches!(raw.as_bytes()[0], b'\'' | b'"')
        && raw.as_bytes()[raw.len() - 1] == raw.as_bytes()[0]
        && raw[1..raw.len() - 1] == script.text;
    if !quoted {
        return Vec::new();
    }
    command_spans(&script.text)
        .into_iter()
        .map(|f| Found {
            start: script.start + 1 + f.start,
            end: script.start + 1 + f.end,
            with: f.with,
        })
        .collect()
}

/// `htpasswd -b FILE USER PASS` (`-nb USER PASS`): the password is a positional
/// argument in batch mode.
fn htpasswd_spans(words: &[Word], found: &mut Vec<Found>) {
    let batch = words
        .iter()
        .find(|w| w.text.starts_with('-') && !w.text.starts_with("--") && w.text.contains('b'));
    let Some(batch) = batch else {
        return;
    };
    let args: Vec<&Word> = words
        .iter()
        .skip(1)
        .filter(|w| !w.text.starts_with('-'))
        .collect();
    let idx = if batch.text.contains('n') { 1 } else { 2 };
    if let Some(pass) = args.get(idx)
        && let Some(f) = masked_from(pass, pass.start, &pass.text)
    {
        found.push(f);
    }
}

/// The secrets of a few tools' own forms: `redis-cli -a PASS`, `vault login
/// TOKEN`, `npm config set …:_authToken TOKEN`, `openssl … -pass pass:PASS`
/// (`-passin`, `-passout`; `env:` and `file:` name one). `Some(words consumed)`
/// when `word` is one of them.
fn tool_secret(
    command: &str,
    word: &Word,
    next: Option<&Word>,
    program: &str,
    found: &mut Vec<Found>,
) -> Option<usize> {
    let text = word.text.as_str();
    // `redis-cli -a PASS`, `vault login TOKEN`, `npm config set …:_authToken TOKEN`.
    let positional = (text == "-a" && program.starts_with("redis-cli"))
        || (text == "login" && program == "vault")
        || text.ends_with("_authToken");
    if positional
        && let Some(value) = next
        && !value.text.starts_with('-')
        && !value.text.contains('=')
        && let Some(f) = masked_from(value, value.start, &value.text)
    {
        found.push(f);
        return Some(1);
    }
    // `openssl … -pass pass:PASS` (`-passin`, `-passout`); `env:`/`file:` name one.
    if matches!(text, "-pass" | "-passin" | "-passout" | "-k" | "-kfile")
        && let Some(value) = next
        && let Some(pass) = value.text.strip_prefix("pass:")
        && let Some(colon) = command[value.start..value.end].find(':')
        && let Some(f) = masked_from(value, value.start + colon + 1, pass)
    {
        found.push(f);
        return Some(1);
    }
    None
}

/// Masks the secret an option at `words[n]` carries; returns how many following
/// words it consumed as its value (0 or 1).
fn option_secret(
    command: &str,
    words: &[Word],
    n: usize,
    program: &str,
    found: &mut Vec<Found>,
) -> usize {
    let word = &words[n];
    let text = word.text.as_str();
    let raw = &command[word.start..word.end];
    let next = words.get(n + 1).filter(|_| !word.ends_command);
    if let Some(long) = text.strip_prefix("--") {
        let (name, inline) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (long, None),
        };
        let lower = name.to_ascii_lowercase();
        let is_secret = SECRET_OPTIONS.contains(&lower.as_str())
            || lower.ends_with("-password")
            || lower.ends_with("-token")
            || lower.ends_with("-secret");
        if lower == "user" && program == "curl" {
            return user_pass(command, words, n, found);
        }
        if !is_secret {
            return 0;
        }
        return match (inline, next) {
            (Some(value), _) => {
                if let Some(eq) = raw.find('=')
                    && let Some(f) = masked_from(word, word.start + eq + 1, value)
                {
                    found.push(f);
                }
                0
            }
            (None, Some(value)) if !value.text.starts_with('-') => {
                if let Some(f) = masked_from(value, value.start, &value.text) {
                    found.push(f);
                }
                1
            }
            _ => 0,
        };
    }
    if text == "-u" && program == "curl" {
        return user_pass(command, words, n, found);
    }
    if let Some(rest) = text.strip_prefix("-u")
        && program == "curl"
        && rest.contains(':')
        && let Some((_, pass)) = rest.split_once(':')
        && let Some(colon) = raw.find(':')
        && let Some(f) = masked_from(word, word.start + colon + 1, pass)
    {
        found.push(f);
        return 0;
    }
    if let Some(pass) = text.strip_prefix("-p")
        && (MYSQL_LIKE.contains(&program) || program == "sshpass")
        && !pass.is_empty()
        && let Some(f) = masked_from(word, word.start + 2, pass)
    {
        found.push(f);
        return 0;
    }
    if let Some(consumed) = tool_secret(command, word, next, program, found) {
        return consumed;
    }
    let docker_login = program == "docker" && words.iter().any(|w| w.text == "login");
    if text == "-p"
        && (program == "sshpass" || docker_login)
        && let Some(value) = next
        && let Some(f) = masked_from(value, value.start, &value.text)
    {
        found.push(f);
        return 1;
    }
    0
}

/// `-u user:pass` / `--user user:pass`: the password masked, the user kept.
fn user_pass(command: &str, words: &[Word], n: usize, found: &mut Vec<Found>) -> usize {
    let word = &words[n];
    let (value_word, inline_at) = match word.text.split_once('=') {
        Some(_) => (word, command[word.start..word.end].find('=').map(|i| i + 1)),
        None => match words.get(n + 1) {
            Some(next) if !word.ends_command => (next, Some(0)),
            _ => return 0,
        },
    };
    let raw = &command[value_word.start..value_word.end];
    let Some(from) = inline_at else {
        return 0;
    };
    let Some(colon) = raw[from..].find(':') else {
        return 0;
    };
    let pass = value_word.text.split_once(':').map_or("", |(_, p)| p);
    if let Some(f) = masked_from(value_word, value_word.start + from + colon + 1, pass) {
        found.push(f);
    }
    usize::from(!std::ptr::eq(value_word, word))
}

#[cfg(test)]
mod tests;
