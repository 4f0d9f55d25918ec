//! The secrets of tools' own option forms, which no general rule reads: a short
//! option that takes a password (`mysql -pPASS`, `sshpass -p PASS`, `sqlcmd -P`,
//! `ldapsearch -w`, `plink -pw`, `docker login -p`), a user and password in one
//! word (`smbclient -U user%pass`, `lftp -u user,pass`), a positional secret
//! (`redis-cli -a`, `vault login TOKEN`, npm's `…:_authToken TOKEN`, `aws configure
//! set aws_secret_access_key VALUE`, `gh secret set NAME --body VALUE`), and
//! `openssl`'s `pass:PASS`.

use super::{Found, Word, is_secret_key, masked_from, masked_range};

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
    "mysqlpump",
    "mysqlsh",
];

/// Programs whose `-p PASS` (apart) is a password.
fn takes_p_apart(program: &str, words: &[Word]) -> bool {
    let login = || words.iter().any(|w| w.text == "login");
    program == "sshpass"
        || program.starts_with("mongo")
        || matches!(
            program,
            "docker" | "podman" | "buildah" | "skopeo" | "helm" | "oras" | "nerdctl" | "az"
        ) && login()
}

/// The short option `text` of `program` that takes a password as the next word
/// (or attached to it, for `attached`).
fn password_option(program: &str, text: &str) -> bool {
    match text {
        "-P" => matches!(program, "sqlcmd" | "bcp" | "osql" | "isql"),
        "-w" => program.starts_with("ldap"),
        "-pw" => matches!(program, "plink" | "pscp" | "psftp"),
        _ => false,
    }
}

/// `Some(words consumed)` when the word at `words[n]` is one of the tools' forms
/// (its secret pushed to `found`).
pub(super) fn tool_secret(
    command: &str,
    words: &[Word],
    n: usize,
    program: &str,
    found: &mut Vec<Found>,
) -> Option<usize> {
    let word = &words[n];
    let text = word.text.as_str();
    let next = words.get(n + 1).filter(|_| !word.ends_command);
    let mut push = |f: Option<Found>| found.extend(f);
    // `-pPASS` attached.
    if let Some(pass) = text.strip_prefix("-p")
        && (MYSQL_LIKE.contains(&program) || program == "sshpass")
        && !pass.is_empty()
    {
        push(masked_from(command, word, word.start + 2, pass));
        return Some(0);
    }
    // `-p PASS`, `-P PASS`, `-w PASS`, `-pw PASS` apart.
    if (text == "-p" && takes_p_apart(program, words)) || password_option(program, text) {
        let value = next.filter(|v| !v.text.starts_with('-'))?;
        push(masked_from(command, value, value.start, &value.text));
        return Some(1);
    }
    // `smbclient -U user%pass` (`-Uuser%pass`, `--user=user%pass`), `lftp -u user,pass`.
    let smb = program.starts_with("smb") || program == "rpcclient";
    if (smb && (text == "-U" || text == "--user")) || (program == "lftp" && text == "-u") {
        let value = next?;
        user_and_pass(command, value, if smb { '%' } else { ',' }, &mut push);
        return Some(1);
    }
    if smb && (text.starts_with("-U") || text.starts_with("--user=")) {
        user_and_pass(command, word, '%', &mut push);
        return Some(0);
    }
    positional(command, words, n, program, &mut push)
}

/// The part of `word` after the first `sep` (`user%pass`) masked.
fn user_and_pass(command: &str, word: &Word, sep: char, push: &mut impl FnMut(Option<Found>)) {
    let raw = &command[word.start..word.end];
    if let (Some((_, pass)), Some(at)) = (word.text.split_once(sep), raw.find(sep)) {
        push(masked_from(command, word, word.start + at + 1, pass));
    }
}

/// Positional secrets: `redis-cli -a PASS`, `vault login TOKEN`, npm's
/// `…:_authToken TOKEN`, `openssl … -pass pass:PASS` (`-passin`, `-passout`,
/// `-k`; `env:` and `file:` name one), `aws configure set NAME VALUE` (`git
/// config`, `npm config set`) for a secret name, `gh secret set NAME --body VALUE`.
fn positional(
    command: &str,
    words: &[Word],
    n: usize,
    program: &str,
    push: &mut impl FnMut(Option<Found>),
) -> Option<usize> {
    let word = &words[n];
    let text = word.text.as_str();
    let next = words.get(n + 1).filter(|_| !word.ends_command);
    let plain = |v: &&Word| !v.text.starts_with('-') && !v.text.contains('=');
    let positional = (text == "-a" && program.starts_with("redis-cli"))
        || (text == "login" && program == "vault")
        || text.ends_with("_authToken")
        || (matches!(text, "--body" | "-b")
            && program == "gh"
            && words.iter().any(|w| w.text == "secret"));
    if positional {
        let value = next.filter(plain)?;
        push(masked_from(command, value, value.start, &value.text));
        return Some(1);
    }
    if matches!(text, "-pass" | "-passin" | "-passout" | "-k" | "-kfile")
        && let Some(value) = next
        && let Some(pass) = value.text.strip_prefix("pass:")
        && let Some(colon) = command[value.start..value.end].find(':')
    {
        push(masked_range(
            command,
            value,
            value.start + colon + 1,
            value.end,
            pass,
        ));
        return Some(1);
    }
    // `env:VAR`, `file:PATH`, `fd:N`, `stdin` name where the password is.
    if program == "openssl" && matches!(text, "-pass" | "-passin" | "-passout") {
        return next.map(|_| 1);
    }
    // `aws configure set aws_secret_access_key VALUE`, `git config user.token VALUE`.
    let setter = matches!(
        program,
        "aws" | "git" | "npm" | "yarn" | "pnpm" | "pip" | "gcloud"
    );
    if setter
        && is_secret_key(text)
        && n > 0
        && matches!(
            words[n - 1].text.as_str(),
            "set" | "config" | "--global" | "--local" | "--system"
        )
        && let Some(value) = next.filter(plain)
    {
        push(masked_from(command, value, value.start, &value.text));
        return Some(1);
    }
    None
}
