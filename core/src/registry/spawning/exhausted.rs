//! A spawn the host refused for want of a process or a descriptor: the error names
//! the limit hit and what to do, instead of pointing at the command.
//!
//! The refusal may come from this process (an `io::Error` with its errno), or as
//! text from the shim launcher or a supervisor (their failure reports carry the OS
//! error's text, `… (os error 11)`), so both are recognised.

use crate::error::SpawnError;

/// The spawn error of `source`: [`SpawnError::Exhausted`] when it is a process or
/// descriptor limit, else [`SpawnError::Spawn`].
pub(super) fn spawn_error(command: String, source: std::io::Error) -> SpawnError {
    match limit_of(&source) {
        Some(limit) => SpawnError::Exhausted {
            command,
            limit: limit.to_owned(),
            source,
        },
        None => SpawnError::Spawn { command, source },
    }
}

/// The limit an OS error stands for, with what to do, if it is one.
fn limit_of(error: &std::io::Error) -> Option<&'static str> {
    let errno = errno_of(error)?;
    match errno {
        libc::EAGAIN => Some(
            "the host refused a new process or thread (EAGAIN): a process limit was reached — the pids.max of a cgroup herd runs in, RLIMIT_NPROC (`ulimit -u`), kernel.pid_max or kernel.threads-max; stop jobs you no longer need (`herd kill`) or raise that limit, then retry",
        ),
        libc::ENOMEM => Some(
            "the host is out of memory for a new process (ENOMEM): the memory limit of a cgroup herd runs in, or the machine's; stop jobs you no longer need (`herd kill`) or raise that limit, then retry",
        ),
        libc::EMFILE => Some(
            "the herd daemon or its supervisor ran out of file descriptors (EMFILE, RLIMIT_NOFILE): raise the hard limit (`ulimit -Hn`) in the shell that starts the daemon and restart it (`herd shutdown`), or stop jobs you no longer need (`herd kill`), then retry",
        ),
        libc::ENFILE => Some(
            "the host's table of open files is full (ENFILE, fs.file-max): raise fs.file-max or stop jobs you no longer need (`herd kill`), then retry",
        ),
        _ => None,
    }
}

/// The errno `error` carries: its own, or the last `(os error N)` in its text (a
/// report relayed from another process).
fn errno_of(error: &std::io::Error) -> Option<i32> {
    if let Some(errno) = error.raw_os_error() {
        return Some(errno);
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    let at = text.rfind("(os error ")?;
    let rest = &text[at + "(os error ".len()..];
    rest.split(')').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(error: std::io::Error) -> String {
        spawn_error("sleep 600".to_owned(), error).to_string()
    }

    #[test]
    fn a_process_limit_relayed_by_the_launcher_is_named() {
        let relayed = std::io::Error::other(
            "the launcher could not fork a supervisor: Resource temporarily unavailable (os error 11)",
        );
        let text = message(relayed);
        assert!(text.contains("process limit"), "{text}");
        assert!(text.contains("pids.max"), "{text}");
        assert!(!text.contains("check the shell"), "{text}");
    }

    #[test]
    fn a_descriptor_limit_of_this_process_is_named() {
        let text = message(std::io::Error::from_raw_os_error(libc::EMFILE));
        assert!(text.contains("file descriptors"), "{text}");
        assert!(text.contains("ulimit -Hn"), "{text}");
    }

    #[test]
    fn other_refusals_still_point_at_the_command() {
        let text = message(std::io::Error::from_raw_os_error(libc::ENOENT));
        assert!(text.contains("check the shell"), "{text}");
        let text = message(std::io::Error::other("no such program (os error 2)"));
        assert!(text.contains("check the shell"), "{text}");
    }
}
