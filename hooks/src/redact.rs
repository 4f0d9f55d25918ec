//! The secret redactor: the fixed last stage of every output route.
//!
//! No loop of regexes: all families are compiled into one multi-pattern
//! automaton (`regex_automata::meta::Regex::new_many`) whose matches report which
//! family they belong to, and a small hand-written routine per family decides
//! which part of the match to mask (the value of a header but not its name, the
//! password of a database URL but not the host). For ordinary output the text is
//! walked once by an aho-corasick scan for the literals every family starts with
//! (`sk-`, `ghp_`, `authorization`, `postgres://`, ...), and the
//! automaton runs anchored only where such a literal starts; clean text never
//! enters the automaton. Those trigger literals are not a list kept by hand: they
//! are derived from the patterns when the redactor is built (`triggers`), for the
//! built-in families and the configured ones alike. The three families with no literal to anchor on
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
//! Private-key blocks are not a pattern but a line state (`keys`): open from the
//! BEGIN line to the END line or the first line that cannot be key body, carried
//! from one text to the next, so a block is masked without its END in sight.
//!
//! Matching sees the text a person would see (`visible`): terminal escapes and
//! zero-width or bidi characters are removed from the copy that is matched, and
//! each match is mapped back onto the original.
//!
//! Mask format: a token of 18 characters or more keeps its first 6 and last 4
//! characters (`abcdef...wxyz`); a shorter one becomes `***`. Each line of a
//! private-key block becomes `[REDACTED PRIVATE KEY]`, database passwords `***`.
//!
//! Invariants: redaction only ever replaces text inside a match; text outside every
//! match comes out byte for byte; a replacement never adds or removes a newline
//! (no match spans one), so the redacted text has the lines of the original.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use regex_automata::{Anchored, Input};

use crate::Error;

mod command;
mod compiled;
use compiled::{Candidate, Compiled};
pub(crate) mod context;
mod echoed;
mod families;
mod keyindex;
mod keys;
#[cfg(test)]
pub(crate) use keys::tests::{in_one_string, numbered_in_one_string};
mod lookback;
mod providers;
mod rare;
mod readings;
mod side_blocks;
mod splice;
pub(crate) use splice::{splice, splice_continuing, splice_window};
mod stream;
mod suffixed;
mod triggers;
mod visible;

pub use keyindex::{KeyIndex, KeyLines};
pub use lookback::key_open_in_log;
pub use stream::StreamRedactor;

/// How much output before a window a route reads at first to learn whether the
/// window starts inside a private-key block. It is not a limit: when every line it
/// read could be key body, the route reads further back, to the block's start
/// (see `Redactor::key_state_needs_more`).
pub const KEY_LOOKBACK_BYTES: usize = 64 * 1024;

/// The size of the blocks of whole lines a long text is matched in (see
/// [`Redactor::redact`]): small enough to stay in the cache over every pass.
const BLOCK_BYTES: usize = 64 * 1024;

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
    /// `name = value` (any of `=`, `:`, `=>`, `:=`, quoted or not) for a name that
    /// holds a secret: the value is masked unless it is a reference, code, or
    /// holds no digit.
    NamedValue,
    /// `Cookie: a=1; b=2`: every value is masked, names and attributes kept.
    Cookie,
    /// `"name": "value"` in JSON.
    JsonField,
    /// `name: value` in YAML.
    YamlField,
    /// A pattern from config; with a capture group, only group 1 is masked.
    Extra(Option<Arc<regex::Regex>>),
}

/// The secret redactor. Cheap to share (`Arc`), immutable once built.
#[derive(Debug, Clone)]
pub struct Redactor {
    /// Where the built-in code patterns can start (derived from them).
    triggers: triggers::Triggers,
    /// Built-in code patterns, searched anchored at each trigger.
    code: Compiled,
    /// Config patterns and where they can start, searched anchored at each trigger.
    extra: Option<(Compiled, triggers::Triggers)>,
    /// Assignment patterns, then code patterns, then config patterns, searched
    /// over the whole text (environment dumps only).
    dump: Dump,
}

/// The environment-dump automaton, the largest of a redactor (its patterns hold the
/// code patterns again). Built-in patterns alone are compiled on the first dump
/// redacted: most processes never see one, and it would cost each of them about
/// 2 MB from the start. With config patterns it is compiled with the redactor, so a
/// combined automaton that is too large is refused then.
#[derive(Debug, Clone)]
struct Dump {
    patterns: Vec<(String, Kind)>,
    compiled: OnceLock<Compiled>,
}

impl Dump {
    fn compiled(&self) -> &Compiled {
        self.compiled.get_or_init(|| {
            Compiled::build(&self.patterns)
                .expect("only the built-in patterns are compiled late; they are fixed and covered by the table tests")
        })
    }
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
        Redactor::build(families::code_patterns(), config)
    }

    /// A redactor with `code` as its built-in code families (the tests give it a
    /// family the old hand-kept trigger list did not know).
    fn build(code: Vec<(String, Kind)>, config: &RedactorConfig) -> Result<Redactor, Error> {
        let mut extra = Vec::with_capacity(config.extra_patterns.len());
        for pattern in &config.extra_patterns {
            let re = regex::Regex::new(pattern).map_err(|source| Error::BadPattern {
                pattern: pattern.clone(),
                reason: source
                    .to_string()
                    .lines()
                    .map(str::trim)
                    .rfind(|l| !l.is_empty())
                    .unwrap_or("not a valid regex")
                    .to_owned(),
            })?;
            // A pattern that can match an empty string (`\\b`, `x*`, `(?:)`) matches
            // between any two characters: refused, whatever the text.
            let can_be_empty = regex_syntax::parse(pattern)
                .map_or(true, |hir| hir.properties().minimum_len() == Some(0));
            if can_be_empty || re.is_match("") {
                return Err(Error::EmptyMatchPattern {
                    pattern: pattern.clone(),
                });
            }
            let group = (re.captures_len() > 1).then(|| Arc::new(re));
            extra.push((pattern.clone(), Kind::Extra(group)));
        }
        let mut dump = families::dump_patterns();
        dump.extend(code.iter().cloned());
        dump.extend(extra.iter().cloned());
        let code = Compiled::build(&code)?;
        let triggers = code.triggers()?;
        let compiled = OnceLock::new();
        let extra = if extra.is_empty() {
            None
        } else {
            let extra = Compiled::build(&extra)?;
            let triggers = extra.triggers()?;
            let _ = compiled.set(Compiled::build(&dump)?);
            Some((extra, triggers))
        };
        Ok(Redactor {
            triggers,
            code,
            extra,
            dump: Dump {
                patterns: dump,
                compiled,
            },
        })
    }

    /// Redacts the output of `command`, choosing the mode from the command.
    pub fn redact_output<'t>(&self, command: &str, text: &'t str) -> Cow<'t, str> {
        self.redact(text, RedactMode::for_command(command))
    }

    /// Redacts a command line itself: as a command line (secret assignments before
    /// the command, password and token options, see `command`), then every output
    /// family (`Code` mode). Only the shown form changes; the command runs as
    /// written.
    pub fn redact_command<'t>(&self, command: &'t str) -> Cow<'t, str> {
        let own = command::command_spans(command);
        if own.is_empty() {
            return self.redact(command, RedactMode::Code);
        }
        let (found, _) = self.find(command, RedactMode::Code, false);
        let mut all = own;
        all.extend(found);
        all.sort_by_key(|f| f.start);
        let mut merged: Vec<Found> = Vec::with_capacity(all.len());
        for f in all {
            match merged.last() {
                // Overlapping readings (the command line's and an output
                // family's): the first is shown, and what the other masks past
                // its end is masked too, so neither shows what the other hides.
                Some(last) if f.start < last.end => {
                    // A piece of a secret, not one: hidden whole.
                    if f.end > last.end && command.is_char_boundary(last.end) {
                        let start = last.end;
                        merged.push(Found {
                            start,
                            end: f.end,
                            with: "***".to_owned(),
                        });
                    }
                }
                _ => merged.push(f),
            }
        }
        Cow::Owned(splice(command, &merged).into_owned())
    }

    /// Redacts `text` in one left-to-right walk. Returns the input borrowed when
    /// nothing matched.
    ///
    /// A token split by escapes, zero-width or control characters
    /// (`sk-\u{200b}proj...`, `\x1b[1mghp_\x1b[0m...`) is still found (see `visible`).
    ///
    /// A long text is matched in blocks of whole lines (of about 64 KiB), the
    /// private-key state carried from one to the next, so every pass over the text
    /// (escapes, keys, triggers, side scanners) reads a block still in the cache
    /// rather than the whole text from memory once per pass. The result is the
    /// same: no built-in family's match spans a newline (config patterns may, so a
    /// redactor with them, and the assignment passes of `SecretDump` mode, which
    /// anchor on line starts, see the whole text at once).
    pub fn redact<'t>(&self, text: &'t str, mode: RedactMode) -> Cow<'t, str> {
        if text.len() <= BLOCK_BYTES || mode != RedactMode::Code || self.extra.is_some() {
            let (found, _) = self.find(text, mode, false);
            return splice(text, &found);
        }
        let mut found = Vec::new();
        let mut key_open = false;
        let mut start = 0;
        while start < text.len() {
            let reach = start + BLOCK_BYTES;
            let end = match text.as_bytes().get(reach..) {
                Some(rest) => memchr::memchr(b'\n', rest).map_or(text.len(), |nl| reach + nl + 1),
                None => text.len(),
            };
            let (block, open) = self.find(&text[start..end], mode, key_open);
            key_open = open;
            found.extend(block.into_iter().map(|f| Found {
                start: start + f.start,
                end: start + f.end,
                with: f.with,
            }));
            start = end;
        }
        splice(text, &found)
    }

    /// Redacts `text`, which follows `before` in the output (the context: a
    /// private-key block `before` ends inside is masked on in `text`, and a secret
    /// on the line `text` starts inside is found whole). Returns `text`'s part.
    pub fn redact_after(&self, before: &str, text: &str, mode: RedactMode) -> String {
        self.redact_after_state(before, false, text, mode)
    }

    /// [`Self::redact_after`], given whether a private-key block was open where
    /// `before` starts (see [`key_state_matters`]).
    pub fn redact_after_state(
        &self,
        before: &str,
        open_at_start: bool,
        text: &str,
        mode: RedactMode,
    ) -> String {
        if before.is_empty() {
            let (found, _) = self.find(text, mode, open_at_start);
            return splice(text, &found).into_owned();
        }
        let from = context::context_start(before, before.len(), crate::LINE_CONTEXT_BYTES);
        let key_open = self.key_open_after(&before[..from], open_at_start);
        let mut joined = String::with_capacity(before.len() - from + text.len());
        joined.push_str(&before[from..]);
        joined.push_str(text);
        let (found, _) = self.find(&joined, mode, key_open);
        splice_window(&joined, &found, before.len() - from, joined.len())
    }

    /// Every replacement in `text`, sorted and non-overlapping, in `text`'s own byte
    /// offsets; and whether a private-key block is open at its end. `key_open` says
    /// one was open where `text` starts (the text before it ended inside a block).
    pub(crate) fn find(&self, text: &str, mode: RedactMode, key_open: bool) -> (Vec<Found>, bool) {
        let stripped = visible::strip(text);
        let (haystack, map) = match &stripped {
            Some((copy, map)) => (copy.as_str(), Some(map.as_slice())),
            None => (text, None),
        };
        let to_text = |start: usize, end: usize| match map {
            Some(map) => visible::widen_overstrike(text, map[start], map[end - 1] + 1),
            None => (start, end),
        };
        // One packed pass for the rare literals of the key markers and of the side
        // scanners, shared by both.
        let rare = rare::RareHits::find(haystack.as_bytes());
        let (keys, open_after) = keys::spans_found(
            haystack,
            key_open,
            [
                &rare.list(rare::Rare::PuttyLines),
                &rare.list(rare::Rare::EncodedPem),
            ],
        );
        let mut found: Vec<Found> = keys
            .into_iter()
            .filter(|(s, e)| e > s)
            .map(|(s, e)| {
                let (start, end) = to_text(s, e);
                Found {
                    start,
                    end,
                    with: keys::KEY_MASK.to_owned(),
                }
            })
            .collect();
        let n_keys = found.len();
        let mut key_idx = 0;
        for (start, end, mut with) in self.matches_found(haystack, map, mode, &rare) {
            let (orig_start, orig_end) = to_text(start, end);
            // Key spans win over any match they overlap.
            while key_idx < n_keys && found[key_idx].end <= orig_start {
                key_idx += 1;
            }
            if key_idx < n_keys && found[key_idx].start < orig_end {
                continue;
            }
            // Only a config pattern can span a newline: the lines stay.
            let n_newlines =
                memchr::memchr_iter(b'\n', &text.as_bytes()[orig_start..orig_end]).count();
            with.extend(std::iter::repeat_n('\n', n_newlines));
            found.push(Found {
                start: orig_start,
                end: orig_end,
                with,
            });
        }
        let before_other_reading = found.len();
        if stripped.is_some() {
            self.find_in_other_reading(text, mode, &mut found);
        }
        if (n_keys > 0 && found.len() > n_keys) || found.len() > before_other_reading {
            found.sort_unstable_by_key(|f| f.start);
        }
        (found, open_after)
    }

    /// Whether `before` (the output just before some position) ends inside a
    /// private-key block, looking back as far as the block reaches (to the nearest
    /// line that cannot be key body), with no block open where `before` starts.
    pub fn key_open_at_end(&self, before: &str) -> bool {
        self.key_open_after(before, false)
    }

    /// Whether `before` ends inside a private-key block, given whether one was open
    /// where it starts (`open_at_start`, known to the caller: a log index, a
    /// carried stream state). `open_at_start` decides only when every line of
    /// `before` could be key body; otherwise the nearest line that cannot does.
    pub fn key_open_after(&self, before: &str, open_at_start: bool) -> bool {
        key_open_after(before, open_at_start)
    }

    /// Whether a private-key block is open after `text`, given whether one was open
    /// where it starts (the state machine alone, no redaction).
    pub(crate) fn key_state_after(&self, text: &str, open: bool) -> bool {
        match visible::strip(text) {
            Some((seen, _)) => keys::spans(&seen, open).1,
            None => keys::spans(text, open).1,
        }
    }

    /// Where a stream that went idle holding `partial` (the unfinished last line)
    /// must keep holding from: the start of a trailing part that could still become
    /// a secret when more output arrives, or `partial.len()` when all of it can go.
    ///
    /// Held: a trigger literal whose pattern has not matched yet or whose match runs
    /// to the end (`Authorization: Bearer `, `ghp_abc`); a trailing token-like run of
    /// 8 or more characters; an unfinished key marker or escape sequence;
    /// everything, in `SecretDump` mode or with config patterns (their shapes are
    /// unknown).
    pub(crate) fn hold_point(&self, partial: &str, mode: RedactMode) -> usize {
        if mode == RedactMode::SecretDump || self.extra.is_some() {
            return 0;
        }
        // Never inside an escape sequence still arriving, and what comes before one
        // is judged as if it ended there: a terminal string still open
        // (`sk-proj-Zo29… ESC P q#0;2`) hides what follows its introducer until it
        // ends, and the token before it may go on after it (a fuzz finding: the
        // string's body was read as text ending the token, which went out).
        match visible::unfinished_escape(partial) {
            Some(esc) => self.hold_point_before(&partial[..esc]).min(esc),
            None => self.hold_point_before(partial),
        }
    }

    /// [`Self::hold_point`] of a partial line that ends with no escape sequence
    /// unfinished.
    fn hold_point_before(&self, partial: &str) -> usize {
        let stripped = visible::strip(partial);
        let (seen, map) = match &stripped {
            Some((copy, map)) => (copy.as_str(), Some(map.as_slice())),
            None => (partial, None),
        };
        let to_text = |idx: usize| match map {
            _ if idx >= seen.len() => partial.len(),
            Some(map) => map[idx],
            None => idx,
        };
        let mut hold = seen.len();
        // A trigger whose pattern has not matched yet, or whose match reaches the end.
        let mut scan = self.triggers.scan(seen);
        let mut from = 0;
        while let Some((at, hit_len)) = scan.next_from(from) {
            from = at + 1;
            let input = Input::new(seen)
                .span(at..seen.len())
                .anchored(Anchored::Yes);
            let rest = &seen[at..];
            let open = match self.code.re.search(&input) {
                // A header's value may still be on its way (`Authorization: Bearer `
                // matched the scheme as the value).
                Some(m) => match &self.code.kinds[m.pattern().as_usize()] {
                    Kind::Authorization | Kind::HeaderValue => seen[m.end()..].trim().is_empty(),
                    Kind::NamedValue
                        if !providers::names_a_value(&seen[at..m.end()], &seen[..at]) =>
                    {
                        false
                    }
                    _ => m.end() == seen.len(),
                },
                // No match yet: a token still arriving (no space since the
                // trigger), or a header or URL name waiting for its value.
                None => !rest.contains(char::is_whitespace) || (hit_len >= 5 && rest.len() <= 256),
            };
            if open {
                hold = hold.min(at);
                break;
            }
        }
        // An unfinished private-key marker (`-----BEGIN RSA PRI`).
        if let Some(dashes) = keys::unfinished_marker(seen) {
            hold = hold.min(dashes);
        }
        // The trailing word.
        let word_start = seen.rfind(|c: char| c.is_whitespace()).map_or(0, |idx| {
            idx + seen[idx..].chars().next().map_or(1, char::len_utf8)
        });
        let word = &seen[word_start..];
        let run_start = word.rfind(|c: char| !is_token_char(c)).map_or(0, |idx| {
            idx + word[idx..].chars().next().map_or(1, char::len_utf8)
        });
        let run = &word[run_start..];
        // A shorter run goes out: a stream keeps what it showed of an unfinished
        // line as context, so a token whose first characters were shown is still
        // found when the rest arrives.
        if run.chars().count() >= 8 {
            hold = hold.min(word_start + run_start);
        }
        // Never inside a complete marker: the state machine must see it whole.
        if let Some((start, end)) = keys::marker_around(seen, hold) {
            hold = if seen[end..].trim().is_empty() {
                seen.len()
            } else {
                start
            };
        }
        to_text(hold)
    }

    /// Every match in `text`, sorted by start and non-overlapping. On overlap
    /// the earlier start wins; on a tie the built-in automaton, then the side
    /// scanner, then config patterns.
    fn matches(
        &self,
        text: &str,
        map: Option<&[usize]>,
        mode: RedactMode,
    ) -> Vec<(usize, usize, String)> {
        self.matches_found(text, map, mode, &rare::RareHits::find(text.as_bytes()))
    }

    /// [`Self::matches`] with the rare literals of `text` found beforehand.
    fn matches_found(
        &self,
        text: &str,
        map: Option<&[usize]>,
        mode: RedactMode,
        rare: &rare::RareHits,
    ) -> Vec<(usize, usize, String)> {
        let mut all: Vec<Candidate<'_>> = Vec::new();
        match mode {
            RedactMode::Code => {
                let triggers = &self.triggers;
                self.code
                    .anchored_matches(triggers, text, map, 0, &mut all, families::replace);
                for (s, e, k) in families::side_matches(text, rare) {
                    all.push((s, 1, e, side_kind(&k), None));
                }
                if let Some((extra, triggers)) = &self.extra {
                    extra.anchored_matches(triggers, text, map, 2, &mut all, families::replace);
                }
            }
            RedactMode::SecretDump => {
                let dump = self.dump.compiled();
                for m in dump.re.find_iter(text) {
                    all.push((
                        m.start(),
                        0,
                        m.end(),
                        &dump.kinds[m.pattern().as_usize()],
                        None,
                    ));
                }
                for (s, e, k) in families::side_matches(text, rare) {
                    all.push((s, 1, e, side_kind(&k), None));
                }
            }
        }
        if all.is_empty() {
            return Vec::new();
        }
        all.sort_unstable_by_key(|(s, p, _, _, _)| (*s, *p));
        let mut merged = Vec::with_capacity(all.len());
        let mut last_end = 0;
        for (s, _, e, k, made) in all {
            if s < last_end || e <= s {
                continue;
            }
            // A match whose replacement declines hides none it overlaps.
            if let Some(with) = made.or_else(|| families::replace(k, &text[s..e], &text[..s])) {
                merged.push((s, e, with));
                last_end = e;
            }
        }
        merged
    }
}

/// A character that can be part of a token, URL or key value.
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(c, '_' | '-' | '.' | ':' | '/' | '+' | '=' | '@' | '%' | '~')
}

/// Whether the private-key state where `text` starts can change what is masked in
/// it: its first line could be key body (or is empty), or the rest of an opener
/// (a BEGIN marker, a PuTTY lines header) cut in two, so a block opened before
/// `text` would go on in it; or, the first line being no marker line (it may be
/// the rest of a body line cut inside its prefix, `ssh/id_rsa:MIIE…`), the second
/// line could be key body. A route that shows text cut from a longer output (a
/// tail, a page, a chunk) learns the state before it, from as far back as the
/// block reaches, only then (`Redactor::key_open_after`, `Window::after_open_key`).
pub fn key_state_matters(text: &str) -> bool {
    fn seen(line: &str) -> Cow<'_, str> {
        match visible::strip(line) {
            Some((copy, _)) => Cow::Owned(copy),
            None => Cow::Borrowed(line),
        }
    }
    let end = memchr::memchr(b'\n', text.as_bytes()).map_or(text.len(), |idx| idx);
    let first = seen(&text[..end]);
    if keys::could_be_body(&first)
        || keys::continues_string(&first).is_some()
        || keys::rest_of_opener(&first).is_some()
    {
        return true;
    }
    if end == text.len() || keys::is_marker_line(&first) {
        return false;
    }
    let rest = &text[end + 1..];
    let second_end = memchr::memchr(b'\n', rest.as_bytes()).map_or(rest.len(), |idx| idx);
    keys::could_be_body(&seen(&rest[..second_end]))
}

/// The table of what the redactor recognises (provider, shape), as markdown: the
/// generated part of `docs/secrets.md`.
pub fn recognised_table() -> String {
    providers::markdown_table(families::BUILTIN_ROWS)
}

/// Whether `text` ends inside a private-key block, with none open where it starts
/// (the key state alone: no redactor needed, see [`Redactor::key_open_after`]).
pub fn key_open_at_end(text: &str) -> bool {
    key_open_after(text, false)
}

/// The key state after `before`, on the text a person would see, at the cost of
/// the lines that matter. A line that cannot be key body (a marker line among
/// them) decides the state after it whatever came before it, so the look-back
/// walks back from the end over the lines that could be body (judged as a person
/// sees them: escapes and overstrike resolved line by line, which is exact since
/// no escape spans a line) to the nearest one that cannot (usually the last line),
/// and runs the state machine from there. When every line of `before` could be
/// key body, `open_at_start` decides (such lines keep a block open and open none).
/// No fixed look-back and no search over text that does not matter: the cost is
/// that of the trailing run of body-like lines.
fn key_open_after(before: &str, open_at_start: bool) -> bool {
    let bytes = before.as_bytes();
    let mut end = before.len();
    loop {
        let line_start = memchr::memrchr(b'\n', &bytes[..end]).map_or(0, |nl| nl + 1);
        let line = &before[line_start..end];
        let body = match visible::strip(line) {
            Some((seen, _)) => keys::could_be_body(&seen),
            None => keys::could_be_body(line),
        };
        if !body {
            // A first line cut inside a one-string block goes on with its state.
            let open = line_start == 0 && open_at_start;
            let from = &before[line_start..];
            return match visible::strip(from) {
                Some((seen, _)) => keys::spans(&seen, open).1,
                None => keys::spans(from, open).1,
            };
        }
        if line_start == 0 {
            return open_at_start;
        }
        end = line_start - 1;
    }
}

/// The side scanner's kinds as `'static` references (they carry no data).
fn side_kind(kind: &Kind) -> &'static Kind {
    match kind {
        Kind::Telegram => &Kind::Telegram,
        Kind::UserinfoToken => &Kind::UserinfoToken,
        Kind::DbPassword => &Kind::DbPassword,
        _ => &Kind::Token,
    }
}

/// The text a person would see: escapes and invisible characters removed.
#[cfg(test)]
pub(crate) fn visible_text(text: &str) -> String {
    visible::strip(text).map_or_else(|| text.to_owned(), |(copy, _)| copy)
}

/// One replacement: `text[start..end]` becomes `with`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) with: String,
}

/// `parts` one after the other, in one allocation: a match's replacement is made
/// for every match, and `format!` there cost about 5% of redacting dense output.
pub(crate) fn joined(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        out.push_str(part);
    }
    out
}

/// Masks one secret token: 18+ characters keep the first 6 and the last 4
/// (`abcdef...wxyz`), shorter ones become `***`.
pub fn mask(token: &str) -> String {
    if token.is_ascii() {
        // Most tokens: byte offsets are character offsets, no counting or format.
        let n = token.len();
        if n < 18 {
            return "***".to_owned();
        }
        let mut out = String::with_capacity(13);
        out.push_str(&token[..6]);
        out.push_str("...");
        out.push_str(&token[n - 4..]);
        return out;
    }
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
