//! A PTY request that could not get a PTY runs on pipes: the note its answer
//! carries and the environment of the pipe child.

use std::ffi::OsString;

/// A PTY that could not be opened: the note the answer carries and the environment
/// of the pipe child that runs instead (without the PTY entries it behaves as it would
/// have without asking for a PTY).
pub(super) fn pipe_fallback(
    error: &dyn std::fmt::Display,
    env: &std::collections::BTreeMap<OsString, OsString>,
    overrides: &[(String, String)],
) -> (String, std::collections::BTreeMap<OsString, OsString>) {
    tracing::warn!(%error, "no PTY available; running on pipes instead");
    (
        format!("a PTY could not be opened ({error}); the command runs on pipes instead"),
        without_pty_entries(env.clone(), overrides),
    )
}

/// The environment of a PTY request that fell back to pipes: the PTY-only defaults
/// go unless the caller set them.
fn without_pty_entries(
    mut env: std::collections::BTreeMap<OsString, OsString>,
    overrides: &[(String, String)],
) -> std::collections::BTreeMap<OsString, OsString> {
    for name in ["PAGER", "GIT_PAGER", "TERM"] {
        let set_by_caller = overrides.iter().any(|(k, _)| k == name);
        let inherited = std::env::var_os(name);
        if !set_by_caller {
            match inherited {
                Some(v) => {
                    env.insert(name.into(), v);
                }
                None => {
                    env.remove(&OsString::from(name));
                }
            }
        }
    }
    env
}
