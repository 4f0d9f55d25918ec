//! Command lines redacted as command lines: the secrets a shell command carries in
//! its own words, which no output pattern sees as such.
//!
//! - `NAME=value` assignments before a command (`API_TOKEN=… deploy`,
//!   `env PGPASSWORD=… psql`): the value is masked when the name looks secret
//!   (`TOKEN`, `SECRET`, `PASSWORD`, `KEY`, …) or the value looks like a token;
//! - any option or `NAME=VALUE` word whose name ends in a secret word
//!   (`--password=…`, `--password …`, `--client-secret`, `--oauth2-bearer`,
//!   `-storepass`, `-Dpassword=…`, `-Djavax.net.ssl.keyStorePassword=…`,
//!   `db_password=…` of `terraform -var`, `--set a=1,password=…` of `helm`,
//!   `ansible_password=…`), every value of `kubectl … --from-literal=k=v`, and
//!   `-u user:pass` / `--user user:pass` of `curl` (the user kept);
//! - the tools' own forms (`tools`): `-p<pass>` of the MySQL tools and
//!   `sshpass`, `-p <pass>` of `sshpass`, the `mongo` tools and `docker`/`podman`/`az`
//!   `login`, `sqlcmd -P`, `ldapsearch -w`, `plink -pw`, `smbclient -U user%pass`,
//!   `lftp -u user,pass`, `redis-cli -a`, `openssl`'s `pass:<pass>`, `vault login
//!   <token>`, npm's `…:_authToken <token>`, `aws configure set <secret name>
//!   <value>`, `gh secret set … --body <value>`, and the password of `htpasswd -b`;
//! - the script of `bash -c '…'` (any shell), as a command line of its own;
//! - URL userinfo and every token shape are left to the output families, which run
//!   on the command line too.
//!
//! Only what is shown changes: the command runs as written.

use super::{Found, mask};

mod tools;

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

/// The replacement of `word` with its part from byte `value_at` (in the original)
/// on masked (a closing quote goes with it). The span is the whole word, the part
/// before the value kept as written, so it wins over an output family's match
/// that starts inside the word (`--password=…` is one replacement, not two).
fn masked_from(command: &str, word: &Word, value_at: usize, value: &str) -> Option<Found> {
    masked_range(command, word, value_at, word.end, value)
}

/// Like [`masked_from`], the value ending at `value_end` (the rest of the word
/// after it is dropped from the span, not shown changed).
fn masked_range(
    command: &str,
    word: &Word,
    value_at: usize,
    value_end: usize,
    value: &str,
) -> Option<Found> {
    if is_reference(value) || value_at >= value_end || value_at < word.start {
        return None;
    }
    let kept = command.get(word.start..value_at)?;
    Some(Found {
        start: word.start,
        end: value_end,
        with: format!("{kept}{}", mask(value)),
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
                    && let Some(f) = masked_from(command, word, word.start + eq + 1, value)
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
                    htpasswd_spans(command, &words[n..end], &mut found);
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
fn htpasswd_spans(command: &str, words: &[Word], found: &mut Vec<Found>) {
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
        && let Some(f) = masked_from(command, pass, pass.start, &pass.text)
    {
        found.push(f);
    }
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
    if program == "curl" && (text == "-u" || text == "--user" || text.starts_with("--user=")) {
        return user_pass(command, words, n, found);
    }
    if let Some(rest) = text.strip_prefix("-u")
        && program == "curl"
        && rest.contains(':')
        && let Some((_, pass)) = rest.split_once(':')
        && let Some(colon) = raw.find(':')
        && let Some(f) = masked_from(command, word, word.start + colon + 1, pass)
    {
        found.push(f);
        return 0;
    }
    if let Some(consumed) = tools::tool_secret(command, words, n, program, found) {
        return consumed;
    }
    // `NAME=VALUE` anywhere (`--password=…`, `-Dpassword=…`, `db_password=…` of
    // `terraform -var`, `--set a=1,password=…`): the secret items' values.
    if text.contains('=') {
        if let Some(f) = assigned_items(command, word) {
            found.push(f);
        }
        return 0;
    }
    // `--password VALUE`, `-storepass VALUE`: a secret option and the next word.
    let name = text.trim_start_matches('-');
    if text.starts_with('-')
        && (text.starts_with("--") || name.len() >= 3)
        && is_secret_key(name)
        && let Some(value) = next
        && !value.text.starts_with('-')
        && !is_operator(&value.text)
    {
        if let Some(f) = masked_from(command, value, value.start, &value.text) {
            found.push(f);
        }
        return 1;
    }
    0
}

/// A redirection or other shell operator left as a word (`<`, `2>`, `<<`).
fn is_operator(text: &str) -> bool {
    !text.is_empty()
        && text
            .trim_start_matches(char::is_numeric)
            .starts_with(['<', '>'])
}

/// Name words that make an option or a `NAME=VALUE` item a flag, not a secret
/// (`--no-password`, `--ask-pass`, `--with-token`).
const FLAG_WORDS: &[&str] = &[
    "no", "ask", "with", "prompt", "show", "print", "hide", "require", "allow", "disable",
    "enable", "skip", "use", "read", "stdin",
];

/// Whether an option or item name (dashes, dots, underscores or camel case
/// between its words) names a secret: its last word is a password, passphrase,
/// secret, token, bearer or API key (`--client-secret`, `keyStorePassword`,
/// `-storepass`, `db.password`, `MYSQL_PWD`), and it is not a flag or a file.
pub(super) fn is_secret_key(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let parts: Vec<&str> = lower
        .split(['-', '_', '.', ':'])
        .filter(|p| !p.is_empty())
        .collect();
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return false;
    };
    if parts.len() > 1 && FLAG_WORDS.contains(first) {
        return false;
    }
    let prev = parts
        .len()
        .checked_sub(2)
        .and_then(|i| parts.get(i))
        .copied();
    [
        "password",
        "passwd",
        "passphrase",
        "secret",
        "token",
        "bearer",
        "apikey",
        "storepass",
        "keypass",
    ]
    .iter()
    .any(|w| last.ends_with(w))
        || matches!(*last, "pass" | "pwd" | "pw")
        || (*last == "key"
            && prev.is_some_and(|p| {
                matches!(
                    p,
                    "api" | "access" | "secret" | "app" | "account" | "master" | "signing"
                )
            }))
}

/// `NAME=VALUE` items of a word (one, or several joined by `,`): the first whose
/// name is secret has its value masked (to the item's end), the word's text before
/// it kept. The word must read as written or as one quoted string.
fn assigned_items(command: &str, word: &Word) -> Option<Found> {
    let raw = &command[word.start..word.end];
    let shift = if raw == word.text {
        0
    } else if raw.len() == word.text.len() + 2 && raw.get(1..raw.len() - 1) == Some(&word.text) {
        1
    } else {
        // Escapes inside: only a whole-word assignment, its value to the end.
        let (name, value) = word.text.split_once('=')?;
        let eq = raw.find('=')?;
        return is_secret_key(name.trim_start_matches('-'))
            .then(|| masked_from(command, word, word.start + eq + 1, value))
            .flatten();
    };
    let text = word.text.as_str();
    // `--from-literal=KEY=VALUE` of `kubectl create secret`: every value.
    let literal = text.starts_with("--from-literal=");
    let mut at = 0;
    for item in text.split(',') {
        let item_at = at;
        at += item.len() + 1;
        let Some((name, mut value)) = item.split_once('=') else {
            continue;
        };
        let mut value_at = item_at + name.len() + 1;
        let mut secret = is_secret_key(name.trim_start_matches('-'));
        if literal && item_at == 0 {
            let Some((_, v)) = value.split_once('=') else {
                continue;
            };
            value_at += value.len() - v.len();
            value = v;
            secret = true;
        }
        if secret {
            let item_end = item_at + item.len();
            let end = if item_end == text.len() {
                word.end
            } else {
                word.start + shift + item_end
            };
            return masked_range(command, word, word.start + shift + value_at, end, value);
        }
    }
    None
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
    if let Some(f) = masked_from(
        command,
        value_word,
        value_word.start + from + colon + 1,
        pass,
    ) {
        found.push(f);
    }
    usize::from(!std::ptr::eq(value_word, word))
}

#[cfg(test)]
mod tests;
