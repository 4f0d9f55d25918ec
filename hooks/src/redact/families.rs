//! The secret families: their patterns, how each match is masked, and how a
//! command is recognised as an environment dump or a secret-file read.
//!
//! Patterns are written with ASCII classes and `(?-u:\b)` boundaries on purpose: a
//! Unicode word boundary would force the regex engine off its lazy DFA on
//! non-ASCII input, and secrets are ASCII anyway.

use super::rare::RareHits;
use super::{Kind, joined, mask};

/// Word boundary that keeps the DFA fast (ASCII semantics).
const B: &str = r"(?-u:\b)";

/// Secret-ish name components, for `NAME=value` in environment dumps.
const ENV_WORDS: &str = r"(?:API_?KEY|APIKEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PW|CREDENTIALS?|AUTH|PRIVATE_?KEY|ACCESS_?KEY)";

/// Secret-ish name endings, for JSON and YAML keys (`apiKey`, `client_secret`).
const FIELD_WORDS: &str = r"(?:api_?key|apikey|token|secret|password|passwd|credentials?|auth|private_?key|access_?key|secret_?key)";

/// The families used for every output that have a literal to anchor on, so the
/// redactor's trigger scan skips clean text at memchr-like speed (the literals
/// are derived from these patterns by `triggers`; a new family needs no list
/// beside it, and one without a usable literal still works, only slower). The
/// three families without one (Telegram bot tokens, Zhipu keys, bare-token URL
/// userinfo) are found by [`side_matches`] instead.
pub(super) fn code_patterns() -> Vec<(String, Kind)> {
    first_families()
        .into_iter()
        .chain(
            super::providers::catalog()
                .into_iter()
                .filter(|s| !s.dump_only)
                .map(|s| (s.pattern, s.kind)),
        )
        .collect()
}

/// The families written here (the provider table adds the rest).
fn first_families() -> Vec<(String, Kind)> {
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
        // E.164 phone numbers.
        v(r"(?-u:\B)\+[1-9][0-9]{7,14}(?-u:\b)".into(), Kind::Token),
    ]
}

/// What the families of this module recognise, for the table of
/// `docs/secrets.md` (the provider shapes add their own rows).
pub(crate) const BUILTIN_ROWS: &[(&str, &str)] = &[
    (
        "GitHub",
        "tokens `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`",
    ),
    (
        "GitLab",
        "tokens `glpat-`, `gloas-`, `gldt-`, `glrt-`, `glcbt-`, `glptt-`, `glft-`, `glimt-`, `glagent-`, `glsoat-`, `glffct-`, `glwt-`, `GR1348941…`",
    ),
    (
        "Slack",
        "tokens `xoxa-`, `xoxb-`, `xoxp-`, `xoxr-`, `xoxs-`, `xapp-`",
    ),
    (
        "OpenAI / Anthropic / DeepSeek and others",
        "keys `sk-…` (16+ characters: `sk-proj-`, `sk-ant-`, `sk-svcacct-`, …)",
    ),
    (
        "Stripe",
        "keys `sk_live_`, `sk_test_`, `rk_live_`, `rk_test_`",
    ),
    (
        "AI and developer APIs",
        "`hf_`, `r8_`, `npm_`, `am_`, `sk_`, `fal_`, `fc-`, `fw-`, `exa_`, `gsk_`, `brv_`, `xai-`, `ntn_`, `fpk_`, `pplx-`, `bb_live_`, `tvly-`, `hsk-`, `mem0_`, `pk-lf-`, `sk-lf-`, `retaindb_`, `syt_` tokens",
    ),
    ("PyPI", "upload tokens `pypi-…`"),
    ("DigitalOcean", "tokens `dop_v1_`, `doo_v1_`"),
    ("Google", "API keys `AIza…`"),
    ("AWS", "access key IDs `AKIA…`, `ASIA…`"),
    ("SendGrid", "API keys `SG.….…`"),
    ("Fernet", "tokens `gAAAAA…`"),
    (
        "Telegram",
        "bot tokens `<bot id>:<35 characters>` (the bot id kept)",
    ),
    ("Zhipu", "keys `<32 hex>.<secret>`"),
    ("Azure AD", "client secrets `…Q~…`"),
    ("HashiCorp Terraform", "API tokens `….atlasv1.…`"),
    ("Discord", "bot tokens `<id>.<time>.<hmac>`"),
    ("MaxMind", "license keys `…_…_mmk`"),
    (
        "Facebook",
        "app access token `<15 or 16 digits>|<27 to 40 characters>`",
    ),
    ("Mailchimp", "API keys `<32 hex>-us<n>`"),
    (
        "HashiCorp Vault",
        "service tokens of the older format `s.<24 alphanumerics>`",
    ),
    ("JWT", "JSON Web Tokens `eyJ….eyJ….…`"),
    (
        "HTTP",
        "`Authorization:` and `Proxy-Authorization:` values (the scheme kept), `X-Api-Key:`, `X-Goog-Api-Key:`, `Api-Key:`, `X-Auth-Token:`, `X-Access-Token:` values",
    ),
    (
        "URLs",
        "the password of `scheme://user:password@` for every scheme (`https`, `ftp`, `postgres`, `redis`, …), a bare token `scheme://TOKEN@`",
    ),
    (
        "Private keys",
        "PEM and PGP private-key blocks, and the public and private lines and MAC of PuTTY key files (`.ppk`, from `Public-Lines:` to `Private-MAC:`), line by line, whatever prefix or escaping each line carries",
    ),
    ("Phone numbers", "E.164 numbers `+15551234567`"),
    (
        "Environment dumps",
        "`NAME=value`, JSON and YAML fields of secret-looking names, in the output of `env`, `printenv`, `cat .env`, …",
    ),
];

/// The assignment families, used only for environment dumps and secret files.
pub(super) fn dump_patterns() -> Vec<(String, Kind)> {
    let value = r#"(?:"[^"\n]*"|'[^'\n]*'|[^\s"']*)"#;
    let mut patterns = vec![
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
    ];
    patterns.extend(
        super::providers::catalog()
            .into_iter()
            .filter(|s| s.dump_only)
            .map(|s| (s.pattern, s.kind)),
    );
    patterns
}

/// The replacement for one match, or `None` to leave it as it is (a value that
/// is only a reference to a secret, such as `$TOKEN`). `before` is the text
/// before the match (a flag's name is judged with the word it closes).
pub(super) fn replace(kind: &Kind, m: &str, before: &str) -> Option<String> {
    match kind {
        Kind::Token => Some(mask(m)),
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
            Some(joined(&[head, scheme, &mask(secret)]))
        }
        Kind::HeaderValue => {
            let (head, value) = split_value(m, &[':', '='])?;
            if is_reference(value) {
                return None;
            }
            Some(joined(&[head, &mask(value)]))
        }
        Kind::DbPassword => {
            // `scheme://user:password@`
            let after_scheme = m.find("://")? + 3;
            let colon = after_scheme + m[after_scheme..].find(':')?;
            let password = &m[colon + 1..m.len() - 1];
            if is_template(password) {
                return None;
            }
            Some(joined(&[&m[..=colon], "***@"]))
        }
        Kind::UserinfoToken => {
            let after_scheme = m.find("://")? + 3;
            let token = &m[after_scheme..m.len() - 1];
            Some(joined(&[&m[..after_scheme], &mask(token), "@"]))
        }
        Kind::Telegram => {
            let colon = m.find(':')?;
            Some(joined(&[&m[..=colon], "***"]))
        }
        Kind::EnvAssign => assignment(m, '='),
        Kind::NamedValue => super::providers::named_value(m, before),
        Kind::Cookie => cookie(m),
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
            Some(joined(&[
                &m[..=open],
                &mask(value),
                &m[open + 1 + value.len()..],
            ]))
        }
        Kind::Extra(None) => Some(mask(m)),
        Kind::Extra(Some(re)) => {
            let caps = re.captures(m)?;
            let group = caps.get(1)?;
            Some(joined(&[
                &m[..group.start()],
                &mask(group.as_str()),
                &m[group.end()..],
            ]))
        }
    }
}

/// `Cookie: a=1; b=2` / `Set-Cookie: a=1; Path=/`: every cookie value masked,
/// the names and the attributes of a `Set-Cookie` kept.
fn cookie(m: &str) -> Option<String> {
    const ATTRIBUTES: &[&str] = &[
        "path",
        "domain",
        "expires",
        "max-age",
        "samesite",
        "secure",
        "httponly",
        "priority",
        "partitioned",
        "version",
        "comment",
    ];
    let colon = m.find(':')?;
    let mut out = String::with_capacity(m.len());
    out.push_str(&m[..=colon]);
    let mut changed = false;
    for (n, part) in m[colon + 1..].split(';').enumerate() {
        if n > 0 {
            out.push(';');
        }
        match part.split_once('=') {
            Some((name, value))
                if !value.trim().is_empty()
                    && !ATTRIBUTES.contains(&name.trim().to_ascii_lowercase().as_str()) =>
            {
                let lead = &value[..value.len() - value.trim_start().len()];
                out.push_str(name);
                out.push('=');
                out.push_str(lead);
                out.push_str(&mask(value.trim()));
                changed = true;
            }
            _ => out.push_str(part),
        }
    }
    changed.then_some(out)
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
    Some(joined(&[lead, open, &mask(value), close]))
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
            // `kubectl get secret NAME -o yaml`: every value is a secret.
            if matches!(program, "kubectl" | "oc") {
                let rest: Vec<&str> = words.collect();
                return rest
                    .iter()
                    .any(|w| matches!(*w, "get" | "describe" | "edit"))
                    && rest
                        .iter()
                        .any(|w| matches!(*w, "secret" | "secrets") || w.starts_with("secret/"));
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
        "credentials.json",
        ".git-credentials",
        ".pgpass",
        ".my.cnf",
        ".dockercfg",
        "secrets.yaml",
        "secrets.yml",
        "secrets.json",
    ];
    base == ".env" || base.starts_with(".env.") || base.ends_with(".env") || RC.contains(&base)
}

/// Matches of the families that have no literal prefix, found by a memchr scan
/// for their one required byte (`:` or `.`) and a few byte checks around it:
/// - Telegram bot tokens `\b[0-9]{8,10}:[A-Za-z0-9_-]{35}\b` (the bot id is kept);
/// - Zhipu keys `\b[0-9a-f]{32}\.[A-Za-z0-9]{16,}\b`;
/// - URL userinfo of any scheme: `scheme://user:password@` (the password becomes
///   `***`) and a bare token `\b[a-z][a-z0-9+.-]*://[A-Za-z0-9_.~%-]{8,}@`;
/// - Discord bot tokens `\b[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}\b`;
/// - Terraform Cloud tokens `<14 alphanumerics>.atlasv1.<60-70>`;
/// - Azure AD client secrets `[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}`;
/// - the shapes of `suffixed` (MaxMind, Mailchimp, older Vault tokens);
/// - `.netrc` and `.pgpass` lines, judged as whole lines (`providers::files`).
///
/// Returned sorted by start, non-overlapping.
pub(super) fn side_matches(text: &str, rare: &RareHits) -> Vec<(usize, usize, Kind)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut next_free = 0;
    for (from, to) in super::side_blocks::candidate_ranges(bytes) {
        side_matches_in(bytes, from, to, &mut next_free, &mut found);
    }
    let n_dotted = found.len();
    super::suffixed::suffixed_matches(bytes, rare, &mut found);
    let mut prompted = Vec::new();
    super::providers::file_line_matches(bytes, rare, &mut found, &mut prompted);
    super::echoed::echoed_matches(text, rare, &prompted, &mut found);
    if found.len() > n_dotted {
        found.sort_unstable_by_key(|(start, end, _)| (*start, std::cmp::Reverse(*end)));
        let mut last_end = 0;
        found.retain(|(start, end, _)| {
            let keep = *start >= last_end;
            if keep {
                last_end = *end;
            }
            keep
        });
    }
    found
}

/// The side scanner over `bytes[from..to]`: every `:`, `.` and `~` there, with
/// the family checks of [`side_matches`] (a hit may reach past `to`).
fn side_matches_in(
    bytes: &[u8],
    from: usize,
    to: usize,
    next_free: &mut usize,
    found: &mut Vec<(usize, usize, Kind)>,
) {
    for idx in memchr::memchr3_iter(b':', b'.', b'~', &bytes[from..to]) {
        let idx = from + idx;
        if idx < *next_free {
            continue;
        }
        // One or two byte tests first: most `:` and `.` in logs (times, versions,
        // host names, paths) fail them, and only a hit that passes pays for the
        // family's own checks.
        let prev = if idx > 0 { bytes[idx - 1] } else { b' ' };
        let next = bytes.get(idx + 1).copied().unwrap_or(b' ');
        let hit = match bytes[idx] {
            b':' => {
                let telegram = if prev.is_ascii_digit() {
                    telegram_at(bytes, idx)
                } else {
                    None
                };
                telegram.or_else(|| (next == b'/').then(|| userinfo_at(bytes, idx)).flatten())
            }
            b'.' => {
                let hex = prev.is_ascii_digit() || (b'a'..=b'f').contains(&prev);
                let zhipu = if hex && idx >= 32 {
                    zhipu_at(bytes, idx)
                } else {
                    None
                };
                zhipu
                    .or_else(|| {
                        (bytes.get(idx + 7) == Some(&b'.'))
                            .then(|| discord_at(bytes, idx))
                            .flatten()
                    })
                    .or_else(|| (next == b'a').then(|| terraform_at(bytes, idx)).flatten())
                    .or_else(|| {
                        (prev == b's')
                            .then(|| super::suffixed::vault_legacy_at(bytes, idx))
                            .flatten()
                    })
            }
            _ => azure_secret_at(bytes, idx),
        };
        if let Some((start, end, kind)) = hit {
            found.push((start, end, kind));
            *next_free = end;
        }
    }
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Length of the run ending just before `end` of bytes satisfying `pred`, capped.
fn run_back(bytes: &[u8], end: usize, cap: usize, pred: impl Fn(u8) -> bool) -> usize {
    bytes[..end]
        .iter()
        .rev()
        .take(cap)
        .take_while(|b| pred(**b))
        .count()
}

fn run_fwd(bytes: &[u8], start: usize, pred: impl Fn(u8) -> bool) -> usize {
    bytes[start..].iter().take_while(|b| pred(**b)).count()
}

/// A word boundary before `idx` given that `bytes[idx]` is a word byte.
fn boundary_before(bytes: &[u8], idx: usize) -> bool {
    idx == 0 || !is_word(bytes[idx - 1])
}

/// A word boundary at `idx` given that `bytes[idx - 1]` is a word byte.
fn boundary_at(bytes: &[u8], idx: usize) -> bool {
    idx == bytes.len() || !is_word(bytes[idx])
}

fn telegram_at(bytes: &[u8], colon: usize) -> Option<(usize, usize, Kind)> {
    let n_digits = run_back(bytes, colon, 11, |b| b.is_ascii_digit());
    if !(8..=10).contains(&n_digits) || !boundary_before(bytes, colon - n_digits) {
        return None;
    }
    let end = colon + 1 + 35;
    if end > bytes.len() || !bytes[colon + 1..end].iter().all(|b| is_token(*b)) {
        return None;
    }
    // `\b` after a token byte: `-` is not a word byte, so a trailing `-` needs a
    // word byte after it, exactly as the regex would.
    let last_is_word = is_word(bytes[end - 1]);
    let ok = if last_is_word {
        boundary_at(bytes, end)
    } else {
        end < bytes.len() && is_word(bytes[end])
    };
    ok.then_some((colon - n_digits, end, Kind::Telegram))
}

fn zhipu_at(bytes: &[u8], dot: usize) -> Option<(usize, usize, Kind)> {
    let n_hex = run_back(bytes, dot, 33, |b| {
        b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
    });
    if n_hex != 32 || !boundary_before(bytes, dot - 32) {
        return None;
    }
    let n_tail = run_fwd(bytes, dot + 1, |b| b.is_ascii_alphanumeric());
    let end = dot + 1 + n_tail;
    if n_tail < 16 || !boundary_at(bytes, end) {
        return None;
    }
    Some((dot - 32, end, Kind::Token))
}

fn userinfo_at(bytes: &[u8], colon: usize) -> Option<(usize, usize, Kind)> {
    if !bytes[colon..].starts_with(b"://") {
        return None;
    }
    let n_scheme = run_back(bytes, colon, 32, |b| {
        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'+' || b == b'.' || b == b'-'
    });
    // The scheme starts with a letter at a word boundary; trim leading non-letters.
    let mut start = colon - n_scheme;
    while start < colon && !bytes[start].is_ascii_lowercase() {
        start += 1;
    }
    if start == colon || !boundary_before(bytes, start) {
        return None;
    }
    let user = colon + 3;
    let n_user = run_fwd(bytes, user, |b| {
        b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'~' | b'%' | b'-')
    });
    let at = user + n_user;
    // `user:password@`: the password runs to the last `@` before the host.
    if bytes.get(at) == Some(&b':') {
        let n_pass = run_fwd(bytes, at + 1, |b| {
            !b.is_ascii_whitespace() && !matches!(b, b'/' | b'"' | b'\'' | b'<' | b'>')
        });
        let pass = &bytes[at + 1..at + 1 + n_pass];
        let last_at = pass.iter().rposition(|b| *b == b'@')?;
        if last_at == 0 {
            return None;
        }
        return Some((start, at + 1 + last_at + 1, Kind::DbPassword));
    }
    if n_user < 8 || bytes.get(at) != Some(&b'@') {
        return None;
    }
    Some((start, at + 1, Kind::UserinfoToken))
}

fn discord_at(bytes: &[u8], dot: usize) -> Option<(usize, usize, Kind)> {
    // The cheap test first: six token bytes and a second dot after this one.
    if bytes.get(dot + 7) != Some(&b'.') {
        return None;
    }
    let n_id = run_back(bytes, dot, 26, is_token);
    let start = dot - n_id;
    if !(24..=26).contains(&n_id)
        || !matches!(bytes[start], b'M' | b'N' | b'O')
        || !boundary_before(bytes, start)
    {
        return None;
    }
    let n_time = run_fwd(bytes, dot + 1, is_token);
    let second = dot + 1 + n_time;
    if n_time != 6 || bytes.get(second) != Some(&b'.') {
        return None;
    }
    let n_mac = run_fwd(bytes, second + 1, is_token);
    let end = second + 1 + n_mac;
    (27..=38)
        .contains(&n_mac)
        .then_some((start, end, Kind::Token))
}

/// A Terraform Cloud token `<14>.atlasv1.<60-70>`.
fn terraform_at(bytes: &[u8], dot: usize) -> Option<(usize, usize, Kind)> {
    if !bytes[dot..].starts_with(b".atlasv1.") {
        return None;
    }
    let n_head = run_back(bytes, dot, 15, |b| b.is_ascii_alphanumeric());
    if n_head != 14 || !boundary_before(bytes, dot - 14) {
        return None;
    }
    let tail = dot + 9;
    let n_tail = run_fwd(bytes, tail, |b| is_token(b) || b == b'=');
    (60..=70)
        .contains(&n_tail)
        .then_some((dot - 14, tail + n_tail, Kind::Token))
}

fn azure_secret_at(bytes: &[u8], tilde: usize) -> Option<(usize, usize, Kind)> {
    if tilde < 5 || bytes[tilde - 1] != b'Q' || !bytes[tilde - 2].is_ascii_digit() {
        return None;
    }
    let is_class = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'~' | b'.');
    if !bytes[tilde - 5..tilde - 2].iter().all(|b| is_class(*b)) {
        return None;
    }
    let n_tail = run_fwd(bytes, tilde + 1, |b| is_class(b) || b == b'-');
    (31..=40)
        .contains(&n_tail)
        .then_some((tilde - 5, tilde + 1 + n_tail, Kind::Token))
}
