//! How a tool's options are spelled, and splitting its arguments by that spelling.
//!
//! Options are parsed per tool, so an option's value is never read as a target
//! (`pkill -u python node` targets `node`; `killall -s python` names no process). Each
//! tool's [`Spec`] lists the options that take a value; anything else starting with `-`
//! is a flag. Signal spellings (`-9`, `-KILL`, `-SIGKILL`, `-s KILL`, `--signal=KILL`)
//! are flags here: which signal is sent does not change what dies. The rules and the
//! wrapper peeling both parse through [`parse`].

use crate::shell::Word;

/// How one tool's options are spelled.
pub(crate) struct Spec {
    /// Short options that take a value (`-u root`, `-uroot`).
    pub(crate) short_values: &'static str,
    /// Long options that take a value when given without `=` (`--signal KILL`).
    pub(crate) long_values: &'static [&'static str],
    /// Whether `-9`, `-KILL`, `-SIGTERM` are signal options.
    pub(crate) dash_signals: bool,
    /// Whether `NAME=value` words before the first positional are assignments (`env`, `sudo`).
    pub(crate) assignments: bool,
}

/// One option as given: its name without dashes and its value, if it took one.
#[derive(Debug, Clone)]
pub(crate) struct Opt {
    pub(crate) name: String,
    pub(crate) value: Option<String>,
}

/// A tool's arguments split into options and positional words.
#[derive(Debug, Default)]
pub(crate) struct Parsed<'w> {
    pub(crate) opts: Vec<Opt>,
    pub(crate) positionals: Vec<&'w Word>,
    /// Index (into the argument slice) of the first positional.
    pub(crate) first_positional_idx: Option<usize>,
}

impl Parsed<'_> {
    pub(crate) fn has(&self, name: &str) -> bool {
        self.opts.iter().any(|o| o.name == name)
    }

    pub(crate) fn values(&self, name: &str) -> impl Iterator<Item = &str> {
        self.opts
            .iter()
            .filter(move |o| o.name == name)
            .filter_map(|o| o.value.as_deref())
    }
}

/// Whether `s` (after its dash) spells a signal: `9`, `KILL`, `SIGKILL`, `HUP`.
fn is_signal(s: &str) -> bool {
    !s.is_empty()
        && (s.bytes().all(|b| b.is_ascii_digit())
            || (s.len() >= 2 && s.bytes().all(|b| b.is_ascii_uppercase()))
            || s.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("sig")))
}

/// Splits `args` per `spec`. With `stop_at_positional`, everything from the first
/// positional on is left unparsed (a wrapper's inner command).
pub(crate) fn parse<'w>(args: &'w [Word], spec: &Spec, stop_at_positional: bool) -> Parsed<'w> {
    let mut parsed = Parsed::default();
    let mut idx = 0;
    let mut options_done = false;
    while let Some(word) = args.get(idx) {
        let arg = word.value();
        idx += 1;
        if options_done || !arg.starts_with('-') || arg == "-" {
            if spec.assignments && parsed.positionals.is_empty() && is_assignment(arg) {
                continue;
            }
            if parsed.first_positional_idx.is_none() {
                parsed.first_positional_idx = Some(idx - 1);
            }
            if stop_at_positional {
                return parsed;
            }
            parsed.positionals.push(word);
            continue;
        }
        if arg == "--" {
            options_done = true;
            continue;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None if spec.long_values.contains(&long) => {
                    let value = args.get(idx).map(|w| w.value().to_owned());
                    idx += 1;
                    (long, value)
                }
                None => (long, None),
            };
            parsed.opts.push(Opt {
                name: name.to_owned(),
                value,
            });
            continue;
        }
        let cluster = arg.get(1..).unwrap_or_default();
        if spec.dash_signals && is_signal(cluster) {
            parsed.opts.push(Opt {
                name: "signal".to_owned(),
                value: Some(cluster.to_owned()),
            });
            continue;
        }
        for (pos, c) in cluster.char_indices() {
            if spec.short_values.contains(c) {
                let rest = cluster.get(pos + c.len_utf8()..).unwrap_or_default();
                let value = if rest.is_empty() {
                    let value = args.get(idx).map(|w| w.value().to_owned());
                    idx += 1;
                    value
                } else {
                    Some(rest.to_owned())
                };
                parsed.opts.push(Opt {
                    name: c.to_string(),
                    value,
                });
                break;
            }
            parsed.opts.push(Opt {
                name: c.to_string(),
                value: None,
            });
        }
    }
    parsed
}

fn is_assignment(arg: &str) -> bool {
    match arg.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}
