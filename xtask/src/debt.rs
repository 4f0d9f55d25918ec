//! Known violations of the size and module-cycle checks, each with what removes it
//! (in words: the change that splits the file or breaks the cycle). They are printed as "known, to be split" warnings and do not fail the
//! lint, so the checks could land before the splitting was done.
//!
//! The lists only shrink: anything over a limit or in a cycle that is not listed
//! fails, and so does a listed entry that no longer violates ("remove it from the
//! list"). Never add an entry to make a new violation pass.

/// Files and functions over the size limits: path, `file` or `fn NAME` (`Type::method`
/// for a method), what removes it.
pub(crate) const SIZES: &[(&str, &str, &str)] = &[];

/// Module cycles: crate, the modules of the cycle (siblings, sorted, as paths from
/// the crate root), what removes it. An entry matches a cycle among exactly these
/// modules.
pub(crate) const CYCLES: &[(&str, &[&str], &str)] = &[];

/// One violation a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    /// What a debt entry names to excuse it.
    pub(crate) key: String,
    /// What to print.
    pub(crate) message: String,
}

/// Findings sorted against the debt list.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Settled {
    /// Listed: the message and what removes it.
    pub(crate) known: Vec<(String, String)>,
    /// Not listed: these fail.
    pub(crate) new: Vec<String>,
    /// Listed but no longer found: these fail too. The key and what removes it.
    pub(crate) stale: Vec<(String, String)>,
}

/// Sorts `found` against the `listed` keys and what removes each.
pub(crate) fn settle(found: &[Finding], listed: &[(String, String)]) -> Settled {
    let mut settled = Settled::default();
    for f in found {
        match listed.iter().find(|(key, _)| *key == f.key) {
            Some((_, plan)) => settled.known.push((f.message.clone(), plan.clone())),
            None => settled.new.push(f.message.clone()),
        }
    }
    for (key, plan) in listed {
        if !found.iter().any(|f| f.key == *key) {
            settled.stale.push((key.clone(), plan.clone()));
        }
    }
    settled
}

impl Settled {
    /// Prints every known violation as a one-line warning.
    pub(crate) fn warn(&self) {
        for (message, plan) in &self.known {
            let first = message.lines().next().unwrap_or_default();
            crate::shell::say(&format!("warning: known, to be split ({plan}): {first}"));
        }
    }

    /// The failure message of `check`, if anything is new or stale; `fix` says what
    /// to do about a new violation.
    pub(crate) fn failure(&self, check: &str, fix: &str) -> Option<String> {
        if self.new.is_empty() && self.stale.is_empty() {
            return None;
        }
        let mut lines = self.new.clone();
        for (key, plan) in &self.stale {
            lines.push(format!(
                "{key} ({plan}) no longer violates: remove it from the list in xtask/src/debt.rs"
            ));
        }
        if !self.new.is_empty() {
            lines.push(format!("to fix a new one: {fix}"));
        }
        Some(format!("{check} check failed:\n  {}", lines.join("\n  ")))
    }
}

#[cfg(test)]
mod tests;
