//! The arguments of `herd attach`, and its detach key.
//!
//! They live with the other arguments, below both the parser and `attach`, so the
//! parser does not depend on the command that uses them.

// `herd attach`.
#[derive(Debug, clap::Args)]
pub(crate) struct AttachArgs {
    /// The session id, a unique prefix, or a name.
    #[arg(add = clap_complete::engine::ArgValueCandidates::new(crate::complete::running_sessions))]
    pub(crate) id: String,
    /// The key that detaches from a PTY session, in caret notation: `^\` (Ctrl-\,
    /// the default), `^X`, `^]`, ... (`^@` to `^_`, a letter in either case).
    /// Any other key goes to the job. A pipe session detaches on Ctrl-D or Ctrl-C.
    #[arg(long, value_name = "KEY", default_value = "^\\", value_parser = DetachKey::parse)]
    pub(crate) detach_key: DetachKey,
}

/// A control key that detaches, as the byte the terminal sends for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DetachKey(u8);

impl DetachKey {
    /// Ctrl-\, dtach's (and `--detach-key`'s default).
    pub(crate) const DEFAULT: DetachKey = DetachKey(0x1c);

    /// Parses caret notation (`^X`, `^\`); the error says what is accepted.
    pub(crate) fn parse(text: &str) -> Result<DetachKey, String> {
        let wrong = || {
            format!(
                "`{text}` is not a detach key: write a control key in caret notation, `^` \
                 and one of A-Z, @, [, \\, ], ^ or _ (e.g. `^X` for Ctrl-X, `^\\` for Ctrl-\\)"
            )
        };
        let mut chars = text.chars();
        let (Some('^'), Some(key), None) = (chars.next(), chars.next(), chars.next()) else {
            return Err(wrong());
        };
        let key = key.to_ascii_uppercase();
        if !('@'..='_').contains(&key) {
            return Err(wrong());
        }
        // Ctrl clears bit 6: `^@` is 0, `^A` is 1, ..., `^_` is 31.
        Ok(DetachKey(key as u8 & 0x1f))
    }

    /// The byte the terminal sends for the key.
    pub(crate) fn byte(self) -> u8 {
        self.0
    }

    /// How a person names the key: `Ctrl-\`, `Ctrl-X`.
    pub(crate) fn name(self) -> String {
        format!("Ctrl-{}", char::from(self.0 | 0x40))
    }
}
