//! The secret redactor: the fixed last stage of every output route.
//!
//! No loop of regexes: all families are compiled into one multi-pattern
//! automaton (`regex_automata::meta::Regex::new_many`) whose matches report which
//! family they belong to, and a small hand-written routine per family decides
//! which part of the match to mask (the value of a header but not its name, the
//! password of a database URL but not the host). For ordinary output the text is
//! walked once by an aho-corasick scan for the literals every family starts with
//! (`sk-`, `ghp_`, `authorization`, `postgres`, `-----BEGIN`, ...), and the
//! automaton runs anchored only where such a literal starts; clean text never
//! enters the automaton. The three families with no literal to anchor on
//! (Telegram bot tokens, Zhipu keys, bare-token URL userinfo) are found by a
//! memchr scan for their one required byte (`:` or `.`) plus a few byte checks.
//! Patterns use ASCII classes and ASCII word boundaries only, which keeps the
//! lazy DFA on its fast path for any input.
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

use aho_corasick::AhoCorasick;
use regex_automata::{Anchored, Input, meta};

use crate::Error;

mod families;
mod invisible;
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
    /// The literals the built-in code patterns start with.
    triggers: AhoCorasick,
    /// Built-in code patterns, searched anchored at each trigger.
    code: Compiled,
    /// Config patterns (no literal known), searched over the whole text.
    extra: Option<Compiled>,
    /// Assignment patterns, then code patterns, then config patterns, searched
    /// over the whole text (environment dumps only).
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
        let mut dump = families::dump_patterns();
        dump.extend(families::code_patterns());
        dump.extend(extra.iter().cloned());
        let triggers = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(aho_corasick::MatchKind::LeftmostFirst)
            .build(families::triggers())
            .expect("the trigger literals are a small fixed set");
        Ok(Redactor {
            triggers,
            code: Compiled::build(&families::code_patterns())?,
            extra: if extra.is_empty() {
                None
            } else {
                Some(Compiled::build(&extra)?)
            },
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

    /// Redacts `text` in one left-to-right walk. Returns the input borrowed when
    /// nothing matched.
    ///
    /// A token split by zero-width or control characters (`sk-\u{200b}proj...`)
    /// is still found: such text is matched on a copy without those characters and
    /// the matches are mapped back onto the original.
    pub fn redact<'t>(&self, text: &'t str, mode: RedactMode) -> Cow<'t, str> {
        let stripped = invisible::strip(text);
        let (haystack, map) = match &stripped {
            Some((copy, map)) => (copy.as_str(), Some(map.as_slice())),
            None => (text, None),
        };
        let found = self.matches(haystack, mode);
        if found.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        let mut changed = false;
        for (start, end, kind) in found {
            let Some(replacement) = families::replace(kind, &haystack[start..end]) else {
                continue;
            };
            let (orig_start, orig_end) = match map {
                Some(map) => (map[start], map[end - 1] + 1),
                None => (start, end),
            };
            out.push_str(&text[last..orig_start]);
            out.push_str(&replacement);
            last = orig_end;
            changed = true;
        }
        if !changed {
            return Cow::Borrowed(text);
        }
        out.push_str(&text[last..]);
        Cow::Owned(out)
    }

    /// Every match in `text`, sorted by start and non-overlapping. On overlap
    /// the earlier start wins; on a tie the built-in automaton, then the side
    /// scanner, then config patterns.
    fn matches<'s>(&'s self, text: &str, mode: RedactMode) -> Vec<(usize, usize, &'s Kind)> {
        // (start, priority, end, kind)
        let mut all: Vec<(usize, u8, usize, &Kind)> = Vec::new();
        match mode {
            RedactMode::Code => {
                self.code_matches(text, &mut all);
                for (s, e, k) in families::side_matches(text) {
                    all.push((s, 1, e, side_kind(&k)));
                }
                if let Some(extra) = &self.extra {
                    for m in extra.re.find_iter(text) {
                        all.push((m.start(), 2, m.end(), &extra.kinds[m.pattern().as_usize()]));
                    }
                }
            }
            RedactMode::SecretDump => {
                for m in self.dump.re.find_iter(text) {
                    all.push((
                        m.start(),
                        0,
                        m.end(),
                        &self.dump.kinds[m.pattern().as_usize()],
                    ));
                }
                for (s, e, k) in families::side_matches(text) {
                    all.push((s, 1, e, side_kind(&k)));
                }
            }
        }
        if all.is_empty() {
            return Vec::new();
        }
        all.sort_unstable_by_key(|(s, p, _, _)| (*s, *p));
        let mut merged = Vec::with_capacity(all.len());
        let mut last_end = 0;
        for (s, _, e, k) in all {
            if s >= last_end {
                merged.push((s, e, k));
                last_end = e;
            }
        }
        merged
    }

    /// The built-in code families: find a trigger literal, then run the
    /// automaton anchored there. Clean text costs one aho-corasick scan.
    fn code_matches<'s>(&'s self, text: &str, out: &mut Vec<(usize, u8, usize, &'s Kind)>) {
        let mut pos = 0;
        while pos < text.len() {
            let Some(hit) = self
                .triggers
                .find(aho_corasick::Input::new(text).span(pos..text.len()))
            else {
                break;
            };
            let at = hit.start();
            let input = Input::new(text)
                .span(at..text.len())
                .anchored(Anchored::Yes);
            match self.code.re.search(&input) {
                Some(m) if m.end() > m.start() => {
                    out.push((
                        m.start(),
                        0,
                        m.end(),
                        &self.code.kinds[m.pattern().as_usize()],
                    ));
                    pos = m.end();
                }
                _ => pos = at + 1,
            }
        }
    }

    /// Byte ranges of the matches in `text`, for the streaming redactor's cut logic.
    pub(crate) fn match_spans(&self, text: &str, mode: RedactMode) -> Vec<(usize, usize)> {
        self.matches(text, mode)
            .into_iter()
            .map(|(s, e, _)| (s, e))
            .collect()
    }
}

/// The side scanner's kinds as `'static` references (they carry no data).
fn side_kind(kind: &Kind) -> &'static Kind {
    match kind {
        Kind::Telegram => &Kind::Telegram,
        Kind::UserinfoToken => &Kind::UserinfoToken,
        _ => &Kind::Token,
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
