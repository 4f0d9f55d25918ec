//! A launcher execs itself afresh every [`GENERATION_FORKS`] forks.
//!
//! Every process a launcher image forks shares that image's anonymous memory
//! mappings (copy-on-write), and the kernel keeps one lock and one reverse-map tree
//! for all of them (the root `anon_vma`). With 10,000 supervisors forked from one
//! image, every fork, exec and exit of any of them (and of their jobs, until their
//! exec) takes that one lock for writing, and every reverse-map walk of their pages
//! (reclaim, page migration, DAMON's access checks) holds it while it walks a tree of
//! 10,000 entries: new spawns stalled for 30–70 ms at a time behind such walks. A
//! fresh image starts a fresh tree, so no tree or lock holds more than one
//! generation's supervisors; the exec costs about a millisecond per generation.
//!
//! The renewed image keeps the launcher's pid (its supervisors stay its children,
//! reaped by it), its stdin and stdout (the daemon's link), and is told on its
//! command line (`--renewed`, then `--pool-state`) what it cannot find again: the
//! pool's target, the members not yet taken, and the pipe they report takes on, whose
//! two descriptors cross the exec.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;

/// How many supervisors and pool members one launcher image forks before it execs
/// itself afresh.
pub(super) const GENERATION_FORKS: u64 = 128;

/// The argument that marks a renewed launcher image (it does not detach again).
const RENEWED: &str = "--renewed";
/// The argument before the pool's state: `TARGET,READ_FD,WRITE_FD[,MEMBER_PID...]`.
const POOL_STATE: &str = "--pool-state";
/// The argument before the pipe children announce their end on: `READ_FD,WRITE_FD`.
const ENDED: &str = "--ended";

/// The pool's state handed to the next image.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct PoolState {
    pub(super) target: usize,
    pub(super) taken_read: i32,
    pub(super) taken_write: i32,
    pub(super) members: Vec<i32>,
}

/// Whether `args` (after `--launcher`) are a renewed image's.
pub(super) fn is_renewed(args: &[String]) -> bool {
    args.iter().any(|a| a == RENEWED)
}

/// The pool state a renewed image was handed; `None` when there is none (no pool),
/// or when it does not parse.
pub(super) fn pool_state(args: &[String]) -> Option<PoolState> {
    let text = args
        .iter()
        .position(|a| a == POOL_STATE)
        .and_then(|at| args.get(at + 1))?;
    let numbers: Vec<i64> = text
        .split(',')
        .map(str::parse::<i64>)
        .collect::<Result<_, _>>()
        .ok()?;
    let [target, taken_read, taken_write, members @ ..] = numbers.as_slice() else {
        return None;
    };
    let target = usize::try_from(*target).ok()?;
    let taken_read = i32::try_from(*taken_read).ok()?;
    let taken_write = i32::try_from(*taken_write).ok()?;
    let members = members
        .iter()
        .map(|&pid| i32::try_from(pid).ok().filter(|&p| p > 0))
        .collect::<Option<Vec<i32>>>()?;
    (target >= 1 && taken_read > 2 && taken_write > 2 && taken_read != taken_write).then_some(
        PoolState {
            target,
            taken_read,
            taken_write,
            members,
        },
    )
}

/// The pipe children announce their end on, as a renewed image was handed it.
pub(super) fn ended_pipe(args: &[String]) -> Option<(i32, i32)> {
    let text = args
        .iter()
        .position(|a| a == ENDED)
        .and_then(|at| args.get(at + 1))?;
    let (read, write) = text.split_once(',')?;
    let read = read.parse::<i32>().ok().filter(|&fd| fd > 2)?;
    let write = write
        .parse::<i32>()
        .ok()
        .filter(|&fd| fd > 2 && fd != read)?;
    Some((read, write))
}

/// The descriptors a renewed launcher must keep through its clean start: the pool's
/// pipe and the ended pipe. `args` is the whole command line.
pub(crate) fn kept_descriptors(args: &[String]) -> Vec<i32> {
    if args.get(1).map(String::as_str) != Some("--launcher") || !is_renewed(args) {
        return Vec::new();
    }
    let mut kept = pool_state(args).map_or_else(Vec::new, |s| vec![s.taken_read, s.taken_write]);
    if let Some((read, write)) = ended_pipe(args) {
        kept.extend([read, write]);
    }
    kept
}

/// Execs this program afresh as the same launcher. Returns only when the exec
/// failed; the launcher then runs on as it was (every descriptor as before).
pub(super) fn exec_afresh(
    args: &[String],
    pool: Option<(PoolState, [&OwnedFd; 2])>,
    ended: [&OwnedFd; 2],
) -> io::Error {
    let mut next: Vec<String> = Vec::with_capacity(args.len() + 4);
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            RENEWED => {}
            POOL_STATE | ENDED => {
                rest.next();
            }
            _ => next.push(arg.clone()),
        }
    }
    next.push(RENEWED.to_owned());
    next.push(ENDED.to_owned());
    next.push(format!("{},{}", ended[0].as_raw_fd(), ended[1].as_raw_fd()));
    if let Some((state, _)) = &pool {
        let mut text = format!(
            "{},{},{}",
            state.target, state.taken_read, state.taken_write
        );
        for pid in &state.members {
            text.push_str(&format!(",{pid}"));
        }
        next.push(POOL_STATE.to_owned());
        next.push(text);
    }
    let program = std::env::args_os()
        .next()
        .unwrap_or_else(|| OsString::from("herd-shim"));
    let argv: Result<Vec<CString>, _> = std::iter::once(program.into_vec())
        .chain(std::iter::once(b"--launcher".to_vec()))
        .chain(next.into_iter().map(String::into_bytes))
        .map(CString::new)
        .collect();
    let Ok(argv) = argv else {
        return io::Error::new(io::ErrorKind::InvalidInput, "an argument holds a NUL byte");
    };
    let mut handed: Vec<&OwnedFd> = pool.as_ref().map_or_else(Vec::new, |(_, fds)| fds.to_vec());
    handed.extend(ended);
    for fd in &handed {
        if let Err(error) = crate::sys::descriptors::set_close_on_exec(fd.as_fd(), false) {
            return error;
        }
    }
    let error = match nix::unistd::execv(&crate::sys::process::own_image(), &argv) {
        Err(errno) => io::Error::from(errno),
        Ok(never) => match never {},
    };
    for fd in handed {
        let _ = crate::sys::descriptors::set_close_on_exec(fd.as_fd(), true);
    }
    tracing::debug!(%error, "the launcher could not exec itself afresh");
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_renewed_launcher_reads_its_pool_state_and_keeps_its_pipe() {
        let line = args(&[
            "herd-shim",
            "--launcher",
            "--pool",
            "/h/run/pool.sock",
            "--renewed",
            "--ended",
            "9,10",
            "--pool-state",
            "3,7,8,101,102",
        ]);
        assert!(is_renewed(&line[2..]));
        assert_eq!(
            pool_state(&line[2..]),
            Some(PoolState {
                target: 3,
                taken_read: 7,
                taken_write: 8,
                members: vec![101, 102]
            })
        );
        assert_eq!(ended_pipe(&line[2..]), Some((9, 10)));
        assert_eq!(kept_descriptors(&line), vec![7, 8, 9, 10]);
    }

    #[test]
    fn a_first_launcher_or_a_bad_state_keeps_nothing() {
        assert!(kept_descriptors(&args(&["herd-shim", "--launcher", "--pool", "/p"])).is_empty());
        assert!(
            kept_descriptors(&args(&["herd-shim", "--pool-state", "1,7,8", "--renewed"]))
                .is_empty(),
            "only a launcher keeps descriptors"
        );
        for bad in [
            "",
            "0,7,8",
            "1,2,8",
            "1,7,7",
            "1,7",
            "1,7,8,x",
            "1,7,8,-4",
            "1,7,99999999999",
        ] {
            assert_eq!(
                pool_state(&args(&["--renewed", "--pool-state", bad])),
                None,
                "{bad:?}"
            );
        }
        for bad in ["", "9", "9,9", "2,9", "9,x", "9,10,11"] {
            assert_eq!(ended_pipe(&args(&["--ended", bad])), None, "{bad:?}");
        }
    }
}
