//! The secret families: their patterns, how each match is masked, and how a
//! command is recognised as an environment dump or a secret-file read.
//!
//! Patterns are written with ASCII classes and `(?-u:\b)` boundaries on purpose: a
//! Unicode word boundary would force the regex engine off its lazy DFA on
//! non-ASCII input, and secrets are ASCII anyway.

use super::{Kind, mask};

/// Word boundary that keeps the DFA fast (ASCII semantics).
const B: &str = r"(?-u:\b)";

/// Secret-ish name components, for `NAME=value` in environment dumps.
const ENV_WORDS: &str = r"(?:API_?KEY|APIKEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PW|CREDENTIALS?|AUTH|PRIVATE_?KEY|ACCESS_?KEY)";

/// Secret-ish name endings, for JSON and YAML keys (`apiKey`, `client_secret`).
const FIELD_WORDS: &str = r"(?:api_?key|apikey|token|secret|password|passwd|credentials?|auth|private_?key|access_?key|secret_?key)";

/// The families used for every output.
pub(super) fn code_patterns() -> Vec<(String, Kind)> {
    let distinctive = [
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "xox[abprs]-",
        "xapp-",
        "pplx-",
        "bb_live_",
        "sk_live_",
        "sk_test_",
        "rk_live_",
        "rk_test_",
        "pypi-",
        "dop_v1_",
        "doo_v1_",
        "tvly-",
        "retaindb_",
        "hsk-",
        "mem0_",
        "pk-lf-",
        "sk-lf-",
        "syt_",
        "gl(?:pat|oas|dt|rt|rtr|cbt|ptt|ft|imt|agent|soat|ffct|wt)-",
        "GR1348941",
    ]
    .join("|");
    let short = [
        "hf_",
        "r8_",
        "npm_",
        "am_(?:org_)?",
        "sk_",
        "fal_",
        "fc-",
        "fw-",
        "fw_",
        "exa_",
        "gsk_",
        "brv_",
        "xai-",
        "ntn_",
        "fpk_",
    ]
    .join("|");
    let v = |p: String, k: Kind| (p, k);
    vec![
        // PEM private keys, whole block.
        v(
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?s:.)*?-----END[A-Z0-9 ]*PRIVATE KEY-----"
                .into(),
            Kind::PrivateKey,
        ),
        // Authorization / Proxy-Authorization headers: the scheme word is kept.
        v(
            format!(
                r#"{B}(?i-u:(?:proxy-)?authorization)["']?[ \t]*[:=][ \t]*["']?(?:[A-Za-z][A-Za-z0-9_-]*[ \t]+)?[^\s"',;]+"#
            ),
            Kind::Authorization,
        ),
        // API-key style headers.
        v(
            format!(
                r#"{B}(?i-u:x-api-key|x-goog-api-key|api-key|apikey|x-api-token|x-auth-token|x-access-token)["']?[ \t]*[:=][ \t]*["']?[^\s"',;&]+"#
            ),
            Kind::HeaderValue,
        ),
        // Database connection strings: the password.
        v(
            format!(
                r"{B}(?i-u:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?)://[^\s:/@]*:[^\s@/]+@"
            ),
            Kind::DbPassword,
        ),
        // A bare token as URL userinfo: scheme://TOKEN@host.
        v(
            format!(r"{B}[a-z][a-z0-9+.-]*://[A-Za-z0-9_.~%-]{{8,}}@"),
            Kind::UserinfoToken,
        ),
        // Provider prefixes.
        v(format!(r"{B}sk-[A-Za-z0-9_-]{{16,}}"), Kind::Token),
        v(
            format!(r"{B}(?:{distinctive})[A-Za-z0-9_-]{{10,}}"),
            Kind::Token,
        ),
        v(format!(r"{B}(?:{short})[A-Za-z0-9]{{16,}}"), Kind::Token),
        v(format!(r"{B}AIza[0-9A-Za-z_-]{{30,}}"), Kind::Token),
        v(format!(r"{B}(?:AKIA|ASIA)[0-9A-Z]{{16}}{B}"), Kind::Token),
        v(
            format!(r"{B}SG\.[A-Za-z0-9_-]{{16,}}\.[A-Za-z0-9_-]{{16,}}"),
            Kind::Token,
        ),
        v(format!(r"{B}gAAAAA[A-Za-z0-9_=-]{{40,}}"), Kind::Token),
        // JWTs.
        v(
            format!(r"{B}eyJ[A-Za-z0-9_-]{{10,}}\.eyJ[A-Za-z0-9_-]{{10,}}\.[A-Za-z0-9_-]*"),
            Kind::Token,
        ),
        // Zhipu: 32 hex, a dot, 16+ alphanumerics.
        v(
            format!(r"{B}[0-9a-f]{{32}}\.[A-Za-z0-9]{{16,}}{B}"),
            Kind::Token,
        ),
        // Telegram bot tokens: the bot id is kept.
        v(
            format!(r"{B}[0-9]{{8,10}}:[A-Za-z0-9_-]{{35}}{B}"),
            Kind::Telegram,
        ),
        // E.164 phone numbers.
        v(r"(?-u:\B)\+[1-9][0-9]{7,14}(?-u:\b)".into(), Kind::Token),
    ]
}

/// The assignment families, used only for environment dumps and secret files.
pub(super) fn dump_patterns() -> Vec<(String, Kind)> {
    let value = r#"(?:"[^"\n]*"|'[^'\n]*'|[^\s"']*)"#;
    vec![
        (
            format!(
                r"(?m)^[ \t]*(?:export[ \t]+|declare[ \t]+-[A-Za-z]+[ \t]+|setenv[ \t]+)?(?:[A-Za-z0-9]+[_.])*(?:[A-Za-z0-9]*(?i-u:PASSWORD|PASSWD|TOKEN|SECRET)|(?i-u:{ENV_WORDS}))(?:[_.][A-Za-z0-9]+)*[ \t]*=[ \t]*{value}"
            ),
            Kind::EnvAssign,
        ),
        (
            format!(r#"\\?"[A-Za-z0-9_.-]*(?i-u:{FIELD_WORDS})\\?"[ \t]*:[ \t]*\\?"[^"\\\n]*\\?""#),
            Kind::JsonField,
        ),
        (
            format!(
                r"(?m)^[ \t]*(?:-[ \t]+)?[A-Za-z0-9_.-]*(?i-u:{FIELD_WORDS})[ \t]*:[ \t]+{value}"
            ),
            Kind::YamlField,
        ),
    ]
}

/// The replacement for one match, or `None` to leave it as it is (a value that
/// is only a reference to a secret, such as `$TOKEN`).
pub(super) fn replace(kind: &Kind, m: &str) -> Option<String> {
    match kind {
        Kind::Token => Some(mask(m)),
        Kind::PrivateKey => Some("[REDACTED PRIVATE KEY]".to_owned()),
        Kind::Authorization => {
            let (head, value) = split_value(m, &[':', '='])?;
            // `Bearer abc`: keep the scheme word and its spacing.
            let (scheme, secret) = match value.find([' ', '\t']) {
                Some(idx) => {
                    let rest = value[idx..].trim_start_matches([' ', '\t']);
                    (&value[..value.len() - rest.len()], rest)
                }
                None => ("", value),
            };
            if is_reference(secret) {
                return None;
            }
            Some(format!("{head}{scheme}{}", mask(secret)))
        }
        Kind::HeaderValue => {
            let (head, value) = split_value(m, &[':', '='])?;
            if is_reference(value) {
                return None;
            }
            Some(format!("{head}{}", mask(value)))
        }
        Kind::DbPassword => {
            // `scheme://user:password@`
            let after_scheme = m.find("://")? + 3;
            let colon = after_scheme + m[after_scheme..].find(':')?;
            let password = &m[colon + 1..m.len() - 1];
            if is_template(password) {
                return None;
            }
            Some(format!("{}***@", &m[..=colon]))
        }
        Kind::UserinfoToken => {
            let after_scheme = m.find("://")? + 3;
            let token = &m[after_scheme..m.len() - 1];
            Some(format!("{}{}@", &m[..after_scheme], mask(token)))
        }
        Kind::Telegram => {
            let colon = m.find(':')?;
            Some(format!("{}***", &m[..=colon]))
        }
        Kind::EnvAssign => assignment(m, '='),
        Kind::YamlField => assignment(m, ':'),
        Kind::JsonField => {
            // `"name": "value"` (quotes possibly escaped): the value sits between
            // the last two quotes.
            let close = m.rfind('"')?;
            let open = m[..close].trim_end_matches('\\').rfind('"')?;
            let value = m[open + 1..close].trim_end_matches('\\');
            let name = &m[..open];
            if value.is_empty() || is_reference(value) {
                return None;
            }
            if is_pathlike(value) && !is_passwordish(name) {
                return None;
            }
            Some(format!(
                "{}{}{}",
                &m[..=open],
                mask(value),
                &m[open + 1 + value.len()..]
            ))
        }
        Kind::Extra(None) => Some(mask(m)),
        Kind::Extra(Some(re)) => {
            let caps = re.captures(m)?;
            let group = caps.get(1)?;
            Some(format!(
                "{}{}{}",
                &m[..group.start()],
                mask(group.as_str()),
                &m[group.end()..]
            ))
        }
    }
}

/// Name words whose values are masked even when they look like paths.
const ENV_PASSWORDISH: &[&str] = &["password", "passwd", "pass", "pw"];

fn is_passwordish(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|word| ENV_PASSWORDISH.contains(&word))
        || lower.ends_with("password")
        || lower.ends_with("passwd")
}

/// `NAME<sep>value`: masks the value unless it is only a reference.
fn assignment(m: &str, sep: char) -> Option<String> {
    let idx = m.find(sep)?;
    let name = &m[..idx];
    let after = &m[idx + 1..];
    let rest = after.trim_start_matches([' ', '\t']);
    let lead = &m[..m.len() - rest.len()];
    let (open, value, close) = unquote(rest);
    if value.is_empty() || is_reference(value) {
        return None;
    }
    if is_pathlike(value) && !is_passwordish(name) {
        return None;
    }
    Some(format!("{lead}{open}{}{close}", mask(value)))
}

/// Splits `"a"` / `'a'` into (open quote, value, close quote).
fn unquote(s: &str) -> (&str, &str, &str) {
    for q in ["\"", "'"] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            return (q, &s[1..s.len() - 1], q);
        }
    }
    ("", s, "")
}

/// Splits a header match into (everything up to the value, the value).
fn split_value<'m>(m: &'m str, seps: &[char]) -> Option<(&'m str, &'m str)> {
    let idx = m.find(seps)?;
    let rest = m[idx + 1..].trim_start_matches([' ', '\t', '"', '\'']);
    if rest.is_empty() {
        return None;
    }
    Some((&m[..m.len() - rest.len()], rest))
}

/// A value that names where a secret comes from rather than being one.
fn is_reference(value: &str) -> bool {
    value.starts_with('$')
        || value.starts_with("os.getenv")
        || value.starts_with("os.environ")
        || value.starts_with("process.env")
        || value.starts_with("env.")
        || is_template(value)
        || value == "***"
}

fn is_template(value: &str) -> bool {
    (value.starts_with('{') && value.ends_with('}')) || value.starts_with("${")
}

fn is_pathlike(value: &str) -> bool {
    value.starts_with('/')
        || value.starts_with("~/")
        || value.starts_with("./")
        || value.starts_with("../")
}

/// Commands whose output lists environment variables.
const DUMPERS: &[&str] = &["env", "printenv", "set", "export", "declare", "typeset"];

/// Commands that print a file's contents (or parts of it).
const READERS: &[&str] = &[
    "cat", "head", "tail", "type", "bat", "batcat", "less", "more", "nl", "zcat", "tac", "view",
    "grep", "rg", "awk", "sed", "strings", "xxd", "od",
];

/// True when `command` dumps an environment or reads a secret-looking file.
pub(super) fn is_secret_dump(command: &str) -> bool {
    command
        .split(['|', ';', '&', '\n', '(', ')', '`'])
        .any(|segment| {
            let mut words = segment
                .split_whitespace()
                .map(|w| w.trim_matches(['"', '\'']))
                .skip_while(|w| *w == "sudo" || *w == "command" || *w == "exec" || *w == "$");
            let Some(first) = words.next() else {
                return false;
            };
            let program = first.rsplit('/').next().unwrap_or(first);
            if DUMPERS.contains(&program) {
                return true;
            }
            READERS.contains(&program) && words.any(is_secret_file)
        })
}

/// True for `.env`-style files, shell rc files and config files holding credentials.
fn is_secret_file(word: &str) -> bool {
    if word.starts_with('-') {
        return false;
    }
    let base = word.rsplit('/').next().unwrap_or(word);
    const RC: &[&str] = &[
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".kshrc",
        ".cshrc",
        ".tcshrc",
        ".envrc",
        ".netrc",
        ".npmrc",
        ".pypirc",
        "config.yaml",
        "config.yml",
        "config.toml",
        "credentials",
        "secrets.yaml",
        "secrets.yml",
        "secrets.json",
    ];
    base == ".env" || base.starts_with(".env.") || base.ends_with(".env") || RC.contains(&base)
}
