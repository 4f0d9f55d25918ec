//! Values of secret-named fields in any output: a name whose last word is a
//! secret word (`password`, `passwd`, `pwd`, `pass`, `passphrase`, `secret`,
//! `token`, `signature`, `credentials`, `api_key`, `access_key`, `private_key`, …)
//! followed by `=`, `:`, `=>` or `:=` and a value, in every syntax that prints one:
//! ini, TOML, YAML, JSON (escaped once or more), a Python dict or repr, `.env`,
//! `export`, `declare -x NAME="…"`, `set`, `printenv`, a Docker or Kubernetes env
//! array (`"NAME=value"`), logfmt, a JDBC URL or an ADO.NET / ODBC connection
//! string (`Password=…;`), a URL query (`?password=`, `&access_token=`,
//! `&client_secret=`), a Java property (`-Dpassword=`, `keyStorePassword=`); and
//! where the name and its value sit apart: an XML element (`<password>…</password>`,
//! `<entry key="password">…</entry>`), an XML key and value pair (.NET's
//! `<add key="StorageAccountKey" value="…"/>`, `<property name="password"
//! value="…"/>`), a command-line flag ending in a secret word and the word after
//! it (`--password …`, `--vault-token …`), or the next item of an argument list
//! (`["--password", "…"]`).
//!
//! The pattern is anchored on the secret word itself (the name's earlier parts,
//! `DB_`, `aws_secret_`, `PG`, are before the match and kept), so the trigger scan
//! pays for it only where such a word is written. Whether a value is masked is
//! decided here ([`replace`]): a value that is code (a call, an index, a dotted
//! path from a lower-case identifier, a bare lower-case identifier, a type), a
//! reference (`$X`, `${X}`, `{{ x }}`, `os.environ[…]`), a path, a URL (left to the
//! URL family), a placeholder (`***`, `<token>`, `xxxx`) or a word such as `true`
//! stays; for names of the token kind a value must also look like a key (letters
//! and digits mixed, or long and irregular), while a password-kind name masks any
//! other value.

use std::cell::Cell;

use super::{B, Shape, fill};
use crate::redact::{Kind, mask};

/// Secret words a password is named by.
const PASSWORD_WORDS: &[&str] = &["password", "passwd", "passphrase", "pwd", "pass", "pw"];

/// The words that end a secret's name (case-insensitive): passwords and
/// passphrases, secrets, tokens, signatures, credentials and the keys of APIs
/// and accounts. `pass`, `pwd` and `auth` only as a word of their own (`_pass`, npm's `_auth`,
/// `MYSQL_PWD`) or a Java key store's (`-storepass`, `keyPass`), not inside
/// another (`bypass`, `compass`).
fn words() -> String {
    format!(
        r"(?i-u:passw(?:or)?d|passphrase|secret|token|signature|credentials?|(?:api|access|secret|private|app|account|storage|master|signing|encryption|license)[_-]?key|apikey|(?:store|key)pass)|(?:[_.-]|{B})(?i-u:pass|pwd|auth)"
    )
}

/// The whole family: one of these heads, then one value, quoted (escaped any
/// number of times) or bare:
/// - the word, an optional closing quote of the name and the separator
///   (`password=`, `"token": `, `PGPASSWORD => `);
/// - the word, the closing quote of an XML attribute naming the secret and the
///   `value` attribute after it (`key="ApiSecret" value=`);
/// - the word and one space, where it closes a command-line flag (`--password `,
///   `--vault-token `; help text aligns its columns with more
///   spaces or a tab), or the closing quote and comma of a flag in an argument
///   list (`"--password", `); whether it does is judged from the text before the
///   match ([`closes_a_flag`]), which the pattern cannot look at;
///
/// or the end of an XML start tag named by the word, or of one whose attribute
/// names it, and the element's text, up to its closing tag (`<password>…</`,
/// `<db:clientSecret>…</`, `<entry key="password">…</`, Android's `<string
/// name="api_key">…</`).
pub(super) fn pattern() -> String {
    let words = words();
    // One value for every head: counted repetitions make the automaton large,
    // and a large one falls back to a slower engine.
    let heads = format!(
        r#"(?:{words})(?:(?:\\{{0,7}}["'])?[ \t]*(?:=>|:=|=|:)[ \t]*|\\{{0,7}}["'][ \t]+(?i-u:value)[ \t]*=[ \t]*|\\{{0,7}}["'],[ \t]{{0,2}}| )"#
    );
    let value = r#"(?:\\{0,7}["'`][^"'`\\\r\n]{1,256}\\{0,7}["'`]|[^\s"'`,;&<>)\]}\\]{1,256})"#;
    format!(r#"(?:{heads}){value}|(?:{words})(?:\\{{0,7}}["'])?>[^<\r\n]{{1,256}}</"#)
}

/// The catalog row of the family.
pub(super) fn shape() -> Shape {
    Shape {
        provider: "Secret-named values",
        shape: "the value of a name ending in `password`, `passwd`, `pwd`, `pass`, `passphrase`, `secret`, `token`, `signature`, `credentials`, `api_key`, `access_key`, `secret_key`, `private_key`, … (`PGPASSWORD`, `MYSQL_PWD`, `aws_secret_access_key`, `GITHUB_TOKEN`, `client_secret`, `keyStorePassword`) in ini, TOML, YAML, JSON, a Python dict or repr, `.env`, `export`, `declare -x`, env arrays, logfmt, JDBC URLs, ADO.NET / ODBC connection strings, URL queries, anywhere; and where name and value sit apart: an XML element (`<password>…</password>`, `<entry key=\"password\">…</entry>`), an XML key and value pair (.NET's `<add key=\"StorageAccountKey\" value=\"…\"/>`, `<property name=\"password\" value=\"…\"/>`), a flag ending in a secret word and its next word (`--password …`, `--vault-token …`, `--aws-secret-access-key …`) or the next item of an argument list (`[\"--password\", \"…\"]`); code, references, paths and placeholders are left alone",
        pattern: pattern(),
        kind: Kind::NamedValue,
        dump_only: false,
        sample: format!("PGPASSWORD={}", fill(super::ALNUM, 24)),
    }
}

/// How strictly a name's value is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Name {
    /// A password: any value that is not code, a reference or a placeholder.
    Password,
    /// `pass` alone: a password, or a count (`pass: 12` in a test summary).
    Pass,
    /// An upper-case name given a value with `=` (`GITHUB_TOKEN=…`): an
    /// environment assignment, not code, so a lower-case word is a value too.
    Env,
    /// A token, key or secret: the value must look like one.
    Token,
}

/// The kind of the name (the match up to its separator `sep`).
fn name_kind(name: &str, sep: &str) -> Name {
    let word = name
        .trim_end_matches(['"', '\'', '\\', ' ', '\t'])
        .trim_start_matches(['_', '.', '-']);
    let lower = word.to_ascii_lowercase();
    if lower == "pass" {
        return Name::Pass;
    }
    if sep == "=" && word.bytes().all(|b| !b.is_ascii_lowercase()) {
        return Name::Env;
    }
    if PASSWORD_WORDS.iter().any(|w| lower.ends_with(w)) {
        return Name::Password;
    }
    Name::Token
}

/// Where the separator of a match starts and ends (`=`, `:`, `=>`, `:=`).
fn separator(m: &str) -> Option<(usize, usize)> {
    let idx = m.find([':', '='])?;
    let mut end = idx + 1;
    if matches!(m.as_bytes().get(end), Some(b'>' | b'=')) && m.as_bytes()[idx] != m.as_bytes()[end]
    {
        end += 1;
    }
    Some((idx, end))
}

/// How a match gives its value (see [`pattern`]).
struct Given<'m> {
    /// The name (with the quote and spaces after it, for an assignment).
    name: &'m str,
    /// What stands between name and value, as [`name_kind`] reads it: the
    /// assignment's separator, `>` for an element's text, `value=` for an XML
    /// pair, a space for a flag's next word.
    sep: &'m str,
    /// Where the value starts, spaces before it included.
    rest_at: usize,
    /// The value is an element's text, up to the closing tag `</` that ends the
    /// match.
    element: bool,
}

/// The parts of match `m`; `None` for text the pattern does not match.
fn given(m: &str) -> Option<Given<'_>> {
    let name_len = m
        .bytes()
        .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')))
        .unwrap_or(m.len());
    let after_name = &m[name_len..];
    let after_quote = after_name.trim_start_matches(['\\', '"', '\'']);
    let quoted_name = after_quote.len() < after_name.len();
    let after_space = after_quote.trim_start_matches([' ', '\t']);
    let spaced = after_space.len() < after_quote.len();
    let at = |rest: &str| m.len() - rest.len();
    if let Some(text) = after_quote.strip_prefix('>') {
        return Some(Given {
            name: &m[..name_len],
            sep: ">",
            rest_at: at(text),
            element: true,
        });
    }
    if after_space.starts_with([':', '=']) {
        let (sep, after_sep) = separator(m)?;
        return Some(Given {
            name: &m[..sep],
            sep: &m[sep..after_sep],
            rest_at: after_sep,
            element: false,
        });
    }
    if quoted_name && spaced {
        let keyword = after_space.get(..5)?;
        let after_eq = after_space[5..]
            .trim_start_matches([' ', '\t'])
            .strip_prefix('=')
            .filter(|_| keyword.eq_ignore_ascii_case("value"))?;
        return Some(Given {
            name: &m[..name_len],
            sep: "value=",
            rest_at: at(after_eq),
            element: false,
        });
    }
    if let Some(after_comma) = after_quote.strip_prefix(',').filter(|_| quoted_name) {
        return Some(Given {
            name: &m[..name_len],
            sep: ",",
            rest_at: at(after_comma),
            element: false,
        });
    }
    (!quoted_name && spaced).then_some(Given {
        name: &m[..name_len],
        sep: " ",
        rest_at: name_len,
        element: false,
    })
}

/// Whether an element's text is prose or a label, not a secret: HTML names its
/// fields so (`<h2 id="password">Change password</h2>`, `<label
/// for="password">Password:</label>`, `<option value="token">Token</option>`).
fn is_label(text: &str) -> bool {
    const NAMES: &[&str] = &["secret", "token", "key", "apikey", "credentials"];
    text.contains([' ', '\t'])
        || text.ends_with([':', '?', '!'])
        || PASSWORD_WORDS
            .iter()
            .chain(NAMES)
            .any(|w| text.eq_ignore_ascii_case(w))
}

/// The replacement of one match of the family (or of the provider-named one),
/// `None` when the value stays.
pub(crate) fn replace(m: &str, before: &str) -> Option<String> {
    let given = given(m).filter(|g| gives_a_value(g, before))?;
    if given.element {
        // The element's text, without the spaces around it and the closing tag.
        let text = m.get(given.rest_at..m.len().checked_sub(2)?)?;
        let value = text.trim_matches([' ', '\t']);
        let value_start = given.rest_at + (text.len() - text.trim_start_matches([' ', '\t']).len());
        let value_end = value_start + value.len();
        if is_label(value) {
            return None;
        }
        return masked(
            m,
            value_start..value_end,
            false,
            name_kind(given.name, given.sep),
        );
    }
    let rest = &m[given.rest_at..];
    let rest_trimmed = rest.trim_start_matches([' ', '\t']);
    let value_at = m.len() - rest_trimmed.len();
    // A quoted value: its opening quote (escaped any number of times) and close.
    let open_len = rest_trimmed.bytes().take_while(|b| *b == b'\\').count();
    let quoted = matches!(
        rest_trimmed.as_bytes().get(open_len),
        Some(b'"' | b'\'' | b'`')
    );
    let (value_start, value_end) = if quoted {
        let inner = &rest_trimmed[open_len + 1..];
        let close = inner
            .trim_end_matches(['"', '\'', '`'])
            .trim_end_matches('\\');
        (
            value_at + open_len + 1,
            value_at + open_len + 1 + close.len(),
        )
    } else {
        (value_at, m.len())
    };
    // An argument list's next item: a quoted word (a description, `"Database
    // password"`, or a name, `'db_password'`, stays; see `masked`).
    if given.sep == "," && (!quoted || m[value_start..value_end].contains(char::is_whitespace)) {
        return None;
    }
    // OpenSSL's `-pass pass:<secret>` (`env:`, `file:` and `fd:` name where the
    // secret is, and stay): the source's name is kept.
    let value_start = match m.get(value_start..value_end) {
        Some(v) if given.sep == " " && v.starts_with("pass:") => value_start + 5,
        _ => value_start,
    };
    // A list item is judged as a bare word: lists hold names as often as values.
    masked(
        m,
        value_start..value_end,
        quoted && given.sep != ",",
        name_kind(given.name, given.sep),
    )
}

/// Whether match `m`, after the text `before`, names a value: every form does
/// but a word and the space or comma after it that closes no flag
/// ([`closes_a_flag`]: `the token abc`). What follows it cannot change that, so a
/// stream need not hold such a match back for its value to end.
pub(crate) fn names_a_value(m: &str, before: &str) -> bool {
    given(m).is_some_and(|g| gives_a_value(&g, before))
}

fn gives_a_value(given: &Given<'_>, before: &str) -> bool {
    !matches!(given.sep, " " | ",") || closes_a_flag(before, given.name, given.sep == ",")
}

/// Whether `name`, the start of a match, closes a command-line flag that takes
/// a secret: the word it ends (the letters, digits, `-`, `_` and `.` just before
/// it in `before`, then itself) is one or two dashes and a letter or digit
/// (`--password`, `--vault-token`, `-pass`, `--db_pass`, `--redis.password`),
/// standing where a word starts (after any other byte, a line's start or a
/// spelled `\n` or `\t` included), and is no switch ([`is_switch`]). A hyphenated
/// word of prose (`single-pass 2x`, `top-secret plan9`) is none. In an argument
/// list (`quoted`), the flag stands in quotes (`["--password", "…"]`).
fn closes_a_flag(before: &str, name: &str, quoted: bool) -> bool {
    let b = before.as_bytes();
    let run = b
        .iter()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        .count();
    let mut start = b.len() - run;
    // A spelled line break or tab before the flag (`"a\n--password …"`).
    if matches!(b.get(start), Some(b'n' | b't' | b'r'))
        && start > 0
        && b[start - 1] == b'\\'
        && b.get(start + 1) == Some(&b'-')
    {
        start += 1;
    }
    let opens = match start.checked_sub(1).map(|i| b[i]) {
        None => !quoted,
        Some(b'"' | b'\'' | b'`') => true,
        Some(_) => !quoted,
    };
    // The flag's bytes from its first dash: `before`'s part, then the name.
    let flag: Vec<u8> = b[start..].iter().chain(name.as_bytes()).copied().collect();
    let dashes = flag.iter().take_while(|c| **c == b'-').count();
    opens
        && (1..=2).contains(&dashes)
        && flag.get(dashes).is_some_and(u8::is_ascii_alphanumeric)
        && !is_switch(&flag[dashes..])
}

/// Words that make a flag a switch or an action whose next word is no secret
/// (`--no-password`, `--skip-password`, `--ask-vault-pass`, `--show-token`,
/// `--prompt-password`), or name a token that is no secret: a page's or a
/// request's (`--starting-token`, `--next-token`, `--client-request-token`,
/// `--idempotency-token`, `--change-token`, `--lock-token`).
const SWITCH_WORDS: &[&str] = &[
    "no",
    "skip",
    "ask",
    "show",
    "prompt",
    "print",
    "require",
    "disable",
    "enable",
    "without",
    "reset",
    "forgot",
    "generate",
    "rotate",
    "list",
    "starting",
    "next",
    "page",
    "pagination",
    "continuation",
    "request",
    "idempotency",
    "change",
    "lock",
];

/// Whether flag `name` (without its dashes) is a switch: one of its words is one
/// of [`SWITCH_WORDS`].
fn is_switch(name: &[u8]) -> bool {
    name.split(|b| matches!(b, b'-' | b'_' | b'.')).any(|w| {
        SWITCH_WORDS
            .iter()
            .any(|s| w.eq_ignore_ascii_case(s.as_bytes()))
    })
}

/// `m` with its value (`value`, quoted or not, given to a name of kind `name`)
/// masked when it is a secret; `None` when nothing in it changes.
fn masked(m: &str, value: std::ops::Range<usize>, quoted: bool, name: Name) -> Option<String> {
    let text = m.get(value.clone())?;
    let with = if is_secret_value(text, quoted, name) {
        mask(text)
    } else {
        // Left alone as a whole, the value may still hold what another family
        // masks (a URL's password, a token inside a call): the match hides those
        // families' matches inside it, so they are found here.
        inner_secrets(text)?
    };
    Some(crate::redact::joined(&[
        &m[..value.start],
        &with,
        &m[value.end..],
    ]))
}

/// `value` with the built-in families' matches masked, when there are any.
///
/// Not inside such a search already: a secret-named value nested in the value
/// searched declines there, and the scan goes on inside it, so what it holds is
/// found all the same. Searching each nested value again doubled the work with
/// every name nested in one value (`password=!password=!…`: 18 names 0.1 s, 30
/// minutes; fuzz finding).
fn inner_secrets(value: &str) -> Option<String> {
    static BUILTIN: std::sync::OnceLock<crate::Redactor> = std::sync::OnceLock::new();
    if value.len() < 10 || SEARCHING_INSIDE.with(Cell::get) {
        return None;
    }
    let redactor = BUILTIN.get_or_init(crate::Redactor::builtin);
    #[cfg(test)]
    N_INNER_SEARCHES.with(|n| n.set(n.get() + 1));
    let _searching = SearchingInside::enter();
    match redactor.redact(value, crate::RedactMode::Code) {
        std::borrow::Cow::Owned(masked) => Some(masked),
        std::borrow::Cow::Borrowed(_) => None,
    }
}

thread_local! {
    /// Set while this thread searches a value for inner secrets.
    static SEARCHING_INSIDE: Cell<bool> = const { Cell::new(false) };
}

#[cfg(test)]
thread_local! {
    /// How many values this thread has searched for inner secrets.
    static N_INNER_SEARCHES: Cell<usize> = const { Cell::new(0) };
}

/// How many values this thread has searched for inner secrets so far.
#[cfg(test)]
fn n_inner_searches() -> usize {
    N_INNER_SEARCHES.with(Cell::get)
}

/// Marks this thread as searching a value until dropped (a panic included).
struct SearchingInside;

impl SearchingInside {
    fn enter() -> SearchingInside {
        SEARCHING_INSIDE.with(|s| s.set(true));
        SearchingInside
    }
}

impl Drop for SearchingInside {
    fn drop(&mut self) {
        SEARCHING_INSIDE.with(|s| s.set(false));
    }
}

/// Words that are not a secret whatever name they are given.
const NOT_SECRETS: &[&str] = &[
    "null",
    "none",
    "nil",
    "true",
    "false",
    "yes",
    "no",
    "on",
    "off",
    "undefined",
    "string",
    "str",
    "bytes",
    "required",
    "optional",
    "redacted",
    "hidden",
    "masked",
    "empty",
    "unset",
    "env",
];

/// Whether `value`, given to a secret name of kind `name`, is a secret.
fn is_secret_value(value: &str, quoted: bool, name: Name) -> bool {
    if value.is_empty() || is_left_alone(value) {
        return false;
    }
    let all_digits = value.bytes().all(|b| b.is_ascii_digit());
    match name {
        // A bare lower-case identifier or dotted path is code (`password=pw`,
        // `password=self.password`); a quoted value is a literal.
        Name::Password => quoted || !is_code_word(value),
        Name::Pass => !all_digits && (quoted || !is_code_word(value)),
        // `NAME=word` is a value, but `NAME=OTHER_NAME` and `NAME=a.b` are code.
        Name::Env => {
            value.len() >= 4
                && !(is_constant(value) || (value.contains('.') && is_code_word(value)))
        }
        Name::Token => is_key_like(value, quoted),
    }
}

/// An upper-case constant (`OPENAI_API_KEY`).
fn is_constant(value: &str) -> bool {
    value.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
}

/// A value that looks like a key or token: no spaces, letters, not an identifier,
/// and letters mixed with digits, or long and irregular.
fn is_key_like(value: &str, quoted: bool) -> bool {
    let n = value.chars().count();
    let letters = value.bytes().filter(u8::is_ascii_alphabetic).count();
    let digits = value.bytes().filter(u8::is_ascii_digit).count();
    if value.contains(char::is_whitespace) || letters == 0 || is_code_word(value) || is_email(value)
    {
        return false;
    }
    if digits > 0 {
        return n >= 8 || (quoted && n >= 6);
    }
    // Letters only (and symbols): long and irregular, not a word or an identifier.
    n >= 16 && !is_wordy(value)
}

/// An email address (`user@example.com`): who a token is for, not one.
fn is_email(value: &str) -> bool {
    value.split_once('@').is_some_and(|(user, domain)| {
        !user.is_empty()
            && domain.rsplit_once('.').is_some_and(|(host, tld)| {
                !host.is_empty()
                    && tld.len() >= 2
                    && tld.bytes().all(|b| b.is_ascii_alphabetic())
                    && host
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
            })
    })
}

/// References, code, paths, URLs, placeholders and plain words.
fn is_left_alone(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    value.starts_with('$')
        || value.starts_with("{{")
        || value.starts_with("%(")
        || value.starts_with('<')
        || value.starts_with('[')
        || value.starts_with('{')
        || value.starts_with("os.")
        || value.starts_with("process.env")
        || value.starts_with("env.")
        || value.starts_with("secrets.")
        // OpenSSL's and others' pass-phrase sources (`-pass env:VAR`, `file:…`).
        || ["env:", "file:", "fd:"].iter().any(|p| lower.starts_with(p))
        || value.contains("://")
        || value.contains(['(', '[', '{', '<'])
        || value.starts_with('/')
        || value.starts_with("~/")
        || value.starts_with("./")
        || value.starts_with("../")
        || value.starts_with(['-', '=', '>', '!', '|'])
        || value
            .bytes()
            .all(|b| matches!(b, b'*' | b'x' | b'X' | b'.' | b'#' | b'?'))
        || NOT_SECRETS.contains(&lower.as_str())
}

/// A bare identifier or a dotted path of them that reads as code: lower-case
/// snake case (`pw`, `db_password`, `self.password`), an upper-case constant
/// (`DB_PASSWORD`, `settings.SECRET_KEY`), or a type (`String`, `SecretStr`), with
/// no digit.
fn is_code_word(value: &str) -> bool {
    let segments: Vec<&str> = value.split('.').collect();
    let ident = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_');
    if !segments.iter().all(|s| ident(s)) {
        return false;
    }
    segments.iter().all(|s| {
        s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
            || s.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
            || is_wordy(s)
    })
}

/// Camel case made of word-like parts (`SecretStr`, `LinearRegression`): each
/// upper-case letter starts a part of three or more letters.
fn is_wordy(value: &str) -> bool {
    if !value.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_') {
        return false;
    }
    value.split('_').filter(|p| !p.is_empty()).all(|part| {
        let mut parts = Vec::new();
        let mut current = String::new();
        for c in part.chars() {
            if c.is_ascii_uppercase() && !current.is_empty() {
                parts.push(std::mem::take(&mut current));
            }
            current.push(c);
        }
        parts.push(current);
        parts
            .iter()
            .all(|p| p.len() >= 3 && p.chars().skip(1).all(|c| c.is_ascii_lowercase()))
    })
}

#[cfg(test)]
mod tests;
