//! Errors of herd-hooks that a caller can act on.
//!
//! Plugin load failures are not here: they are data (`PluginLoadError` in the loader
//! module), one per plugin, reported without stopping the host.

/// Errors building the output pipeline.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An extra redaction pattern from config is not a valid regex.
    #[error(
        "invalid extra redaction pattern `{pattern}` ({reason}); fix or remove it in the config"
    )]
    BadPattern {
        /// The pattern as written in config.
        pattern: String,
        /// Why the regex engine rejected it, on one line.
        reason: String,
    },
    /// An extra redaction pattern matches the empty string, so it would mask nothing useful.
    #[error(
        "extra redaction pattern `{pattern}` can match an empty string (it would match between any two characters); make it require at least one character"
    )]
    EmptyMatchPattern {
        /// The pattern as written in config.
        pattern: String,
    },
    /// The combined redaction automaton could not be built (too large).
    #[error("failed to build the redaction automaton; simplify the extra patterns")]
    Automaton {
        /// The engine's reason.
        #[source]
        source: Box<regex_automata::meta::BuildError>,
    },
}
