//! The secret redactor: the fixed last stage of every output route.
//!
//! All secret families are compiled into one multi-pattern automaton
//! (`regex_automata::meta::Regex::new_many`), so a text is scanned once, left to
//! right, whatever the number of families; each match reports which family it
//! belongs to and a small hand-written routine decides which part of the match to
//! mask (the value of a header but not its name, the password of a database URL
//! but not the host). Patterns use ASCII classes and ASCII word boundaries only,
//! which keeps the lazy DFA on its fast path for any input.
//!
//! Two automata are built: the `Code` one (provider tokens, headers, private keys,
//! database URLs, JWTs, ...) used for ordinary output, and the `SecretDump` one
//! that adds `KEY=value`, JSON and YAML assignment passes for secret-ish names. The
//! second is used only when the command dumps an environment or reads a secret file
//! (`env`, `printenv`, `cat .env`, ...), because in ordinary output such
//! assignments are mostly code, and masking them would hide what the agent needs.
//!
//! Mask format: a token of 18 characters or more keeps its first 6 and last 4
//! characters (`abcdef...wxyz`); a shorter one becomes `***`. Private-key blocks
//! become `[REDACTED PRIVATE KEY]`, database passwords `***`.
//!
//! Invariant: redaction only ever replaces text inside a match; text outside every
//! match comes out byte for byte.

use std::borrow::Cow;
use std::sync::Arc;

use regex_automata::meta;

use crate::Error;

mod families;
mod stream;

pub use stream::StreamRedactor;

/// Which automaton to use for a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RedactMode {
    /// Ordinary output: tokens, headers, keys, URLs; no assignment passes.
    Code,
    /// The command dumps an environment or reads a secret file: assignments of
    /// secret-ish names are masked as well.
    SecretDump,
}

impl RedactMode {
    /// Picks the mode for the output of `command`.
    ///
    /// `SecretDump` when any `|`/`;`/`&` segment starts with an environment dump
    /// (`env`, `printenv`, `set`, `export`, `declare`, `typeset`) or with a file
    /// reader (`cat`, `head`, `tail`, `grep`, `sed`, ...) given a secret-looking file
    /// (`.env`, `*.env`, shell rc files, `config.yaml`, `.netrc`, ...).
    pub fn for_command(command: &str) -> RedactMode {
        if families::is_secret_dump(command) {
            RedactMode::SecretDump
        } else {
            RedactMode::Code
        }
    }
}

/// Configuration of the redactor beyond the built-in families.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedactorConfig {
    /// Extra regexes whose matches are masked (additive; the built-in families
    /// always apply). A pattern with a capture group masks only group 1.
    pub extra_patterns: Vec<String>,
}

/// What to do with one match of one family.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// Mask the whole match.
    Token,
    /// Replace the whole match with `[REDACTED PRIVATE KEY]`.
    PrivateKey,
    /// `Authorization: Scheme value`: keep the name and the scheme, mask the value.
    Authorization,
    /// `X-Api-Key: value` and friends: keep the name, mask the value.
    HeaderValue,
    /// `scheme://user:password@`: the password becomes `***`.
    DbPassword,
    /// `scheme://TOKEN@`: mask the token.
    UserinfoToken,
    /// `<digits>:<secret>` Telegram bot token: keep the bot id.
    Telegram,
    /// `NAME=value` in an environment dump.
    EnvAssign,
    /// `"name": "value"` in JSON.
    JsonField,
    /// `name: value` in YAML.
    YamlField,
    /// A pattern from config; with a capture group, only group 1 is masked.
    Extra(Option<Arc<regex::Regex>>),
}

/// One compiled automaton with the kind of each of its patterns.
#[derive(Debug, Clone)]
struct Compiled {
    re: meta::Regex,
    kinds: Vec<Kind>,
}

impl Compiled {
    fn build(patterns: &[(String, Kind)]) -> Result<Compiled, Error> {
        let re =
            meta::Regex::new_many(&patterns.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>())
                .map_err(|source| Error::Automaton {
                    source: Box::new(source),
                })?;
        Ok(Compiled {
            re,
            kinds: patterns.iter().map(|(_, k)| k.clone()).collect(),
        })
    }
}

/// The secret redactor. Cheap to share (`Arc`), immutable once built.
#[derive(Debug, Clone)]
pub struct Redactor {
    code: Compiled,
    dump: Compiled,
}

impl Redactor {
    /// A redactor with the built-in families only.
    pub fn builtin() -> Redactor {
        Redactor::new(&RedactorConfig::default())
            .expect("the built-in patterns are fixed and covered by the table tests")
    }

    /// A redactor with the built-in families plus `config.extra_patterns`.
    ///
    /// # Errors
    ///
    /// `Error::BadPattern` names the first extra pattern that is not a valid regex,
    /// `Error::EmptyMatchPattern` one that matches the empty string, and
    /// `Error::Automaton` reports a combined automaton that is too large.
    pub fn new(config: &RedactorConfig) -> Result<Redactor, Error> {
        let mut extra = Vec::with_capacity(config.extra_patterns.len());
        for pattern in &config.extra_patterns {
            let re = regex::Regex::new(pattern).map_err(|source| Error::BadPattern {
                pattern: pattern.clone(),
                source: Box::new(source),
            })?;
            if re.is_match("") {
                return Err(Error::EmptyMatchPattern {
                    pattern: pattern.clone(),
                });
            }
            let group = (re.captures_len() > 1).then(|| Arc::new(re));
            extra.push((pattern.clone(), Kind::Extra(group)));
        }
        let mut code = families::code_patterns();
        code.extend(extra.iter().cloned());
        let mut dump = families::dump_patterns();
        dump.extend(families::code_patterns());
        dump.extend(extra);
        Ok(Redactor {
            code: Compiled::build(&code)?,
            dump: Compiled::build(&dump)?,
        })
    }

    /// Redacts the output of `command`, choosing the mode from the command.
    pub fn redact_output<'t>(&self, command: &str, text: &'t str) -> Cow<'t, str> {
        self.redact(text, RedactMode::for_command(command))
    }

    /// Redacts a command line itself (always in `Code` mode).
    pub fn redact_command<'t>(&self, command: &'t str) -> Cow<'t, str> {
        self.redact(command, RedactMode::Code)
    }

    /// Redacts `text` in one pass. Returns the input borrowed when nothing matched.
    pub fn redact<'t>(&self, text: &'t str, mode: RedactMode) -> Cow<'t, str> {
        let compiled = match mode {
            RedactMode::Code => &self.code,
            RedactMode::SecretDump => &self.dump,
        };
        let mut out: Option<String> = None;
        let mut last = 0;
        for m in compiled.re.find_iter(text) {
            let (start, end) = (m.start(), m.end());
            let kind = &compiled.kinds[m.pattern().as_usize()];
            let Some(replacement) = families::replace(kind, &text[start..end]) else {
                continue;
            };
            let buf = out.get_or_insert_with(|| String::with_capacity(text.len()));
            buf.push_str(&text[last..start]);
            buf.push_str(&replacement);
            last = end;
        }
        match out {
            None => Cow::Borrowed(text),
            Some(mut buf) => {
                buf.push_str(&text[last..]);
                Cow::Owned(buf)
            }
        }
    }

    /// Byte ranges of the matches in `text`, for the streaming redactor's cut logic.
    pub(crate) fn match_spans(&self, text: &str, mode: RedactMode) -> Vec<(usize, usize)> {
        let compiled = match mode {
            RedactMode::Code => &self.code,
            RedactMode::SecretDump => &self.dump,
        };
        compiled
            .re
            .find_iter(text)
            .map(|m| (m.start(), m.end()))
            .collect()
    }
}

/// Masks one secret token: 18+ characters keep the first 6 and the last 4
/// (`abcdef...wxyz`), shorter ones become `***`.
pub fn mask(token: &str) -> String {
    let n_chars = token.chars().count();
    if n_chars < 18 {
        return "***".to_owned();
    }
    let head: String = token.chars().take(6).collect();
    let tail: String = token.chars().skip(n_chars - 4).collect();
    format!("{head}...{tail}")
}

#[cfg(test)]
mod tests;
