//! Paths nobody else can steer: the home, its config, its plugins directory and a
//! configured shim program are reached only through directories that no other user
//! can change.
//!
//! The rule is OpenSSH's `StrictModes` (`safe_path`): walking from `/`, every
//! directory and the final file must be owned by the user or by root and not be
//! writable by others, and writable by its group only when that group has no
//! member but the user. The one exception is a sticky directory owned by root
//! (`/tmp`): others may write it, but they cannot rename or remove what they do not
//! own, so the entry taken from it must be the user's own. A symbolic link is
//! followed only when it is the user's or root's (and, in such a shared sticky
//! directory, the user's own).
//!
//! Nothing is checked by path and then used by path again: each directory is opened
//! relative to the one before it (`O_PATH | O_NOFOLLOW`), judged by `fstat` of the
//! descriptor held, and the next name is looked up under that descriptor; a file is
//! opened the same way and judged by `fstat` of the open file, which is what the
//! caller then reads (or executes, through `/proc/self/fd`). Since no component can
//! be renamed or replaced by anyone else, the real path returned stays the verified
//! one for as long as the checked modes hold.
//!
//! Why: a root whose home was a path in `/tmp` ran another user's program as uid 0:
//! she swapped a symlink of hers between root's real home and her own
//! directory, whose `config.toml` named her script as `shim_path`.

use std::collections::VecDeque;
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

/// How many symbolic links one walk follows before it gives up (Linux's own limit).
const MAX_LINKS: usize = 40;

/// Why a path was refused or could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// A component another user could change.
    #[error("refusing {path} (owner uid {owner}, mode {mode:o}): {why}; {fix}")]
    Unsafe {
        /// The component refused.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// Its mode bits (type bits removed).
        mode: u32,
        /// What is wrong with it.
        why: String,
        /// What to do.
        fix: String,
    },
    /// The path is not what it must be (a file where a directory goes, a loop).
    #[error("cannot use {path}: {why}")]
    Shape {
        /// The path.
        path: PathBuf,
        /// What it is instead.
        why: String,
    },
    /// A system call failed.
    #[error("cannot check {path}: {source}")]
    Io {
        /// The path being checked.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// What a walk ends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Dir,
    File,
}

/// A checked directory: a descriptor of it (`O_PATH`) and its real path, free of
/// symbolic links.
#[derive(Debug)]
pub struct CheckedDir {
    /// The directory itself, as judged.
    pub fd: OwnedFd,
    /// Its real path.
    pub real: PathBuf,
}

/// Checks every component of the absolute `path` for `uid` (see the module
/// documentation). `Ok(None)` when a component does not exist (what exists was
/// checked, so creating the rest is safe).
///
/// # Errors
/// [`PathError::Unsafe`] naming the component, its owner, its mode and the fix;
/// [`PathError::Shape`] for a relative path, a non-directory or a link loop.
pub fn check_dir(path: &Path, uid: u32) -> Result<Option<CheckedDir>, PathError> {
    Ok(walk(path, uid, Want::Dir)?.map(|(fd, real)| CheckedDir { fd, real }))
}

/// Opens the file at the absolute `path` for reading once it and every directory
/// leading to it pass the check for `uid`; the open file (judged by its own `fstat`)
/// and its real path. `Ok(None)` when it does not exist.
///
/// # Errors
/// As [`check_dir`]; also when the path names something other than a regular file.
pub fn open_file(path: &Path, uid: u32) -> Result<Option<(File, PathBuf)>, PathError> {
    Ok(walk(path, uid, Want::File)?.map(|(fd, real)| (File::from(fd), real)))
}

/// Checks everything under the checked directory `dir` down to `depth` levels (the
/// plugins directory: each plugin's directory, its manifest and its library): every
/// entry the user's or root's and not writable by others, and a symbolic link only
/// the user's or root's, its target checked from `/` like any path.
///
/// # Errors
/// As [`check_dir`], naming the first entry refused.
pub fn check_tree(dir: &CheckedDir, uid: u32, depth: usize) -> Result<(), PathError> {
    let mut pending = vec![(dir.real.clone(), depth)];
    while let Some((path, left)) = pending.pop() {
        let entries = std::fs::read_dir(&path).map_err(|source| io_error(&path, source))?;
        for entry in entries {
            let entry = entry.map_err(|source| io_error(&path, source))?;
            let here = entry.path();
            let meta =
                std::fs::symlink_metadata(&here).map_err(|source| io_error(&here, source))?;
            let stat = stat_of(&meta);
            if meta.file_type().is_symlink() {
                judge_link(&here, &stat, uid, false)?;
                let target = std::fs::metadata(&here).map_err(|source| io_error(&here, source))?;
                let want = if target.is_dir() {
                    Want::Dir
                } else {
                    Want::File
                };
                walk(&here, uid, want)?;
                continue;
            }
            judge(&here, &stat, uid, false, meta.is_dir())?;
            if meta.is_dir() && left > 1 {
                pending.push((here, left - 1));
            }
        }
    }
    Ok(())
}

/// The owner, group and mode of `meta` as the `stat` the judges read.
fn stat_of(meta: &std::fs::Metadata) -> libc::stat {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: an all-zero stat is valid; the fields the judges read are set below.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    stat.st_uid = meta.uid();
    stat.st_gid = meta.gid();
    stat.st_mode = meta.mode();
    stat
}

/// The walk shared by [`check_dir`] and [`open_file`].
fn walk(path: &Path, uid: u32, want: Want) -> Result<Option<(OwnedFd, PathBuf)>, PathError> {
    if !path.is_absolute() {
        return Err(PathError::Shape {
            path: path.to_path_buf(),
            why: "the path is not absolute".to_owned(),
        });
    }
    let root = open_at(None, OsStr::new("/"), crate::sys::DIR_HANDLE)
        .map_err(|source| io_error(Path::new("/"), source))?;
    let root_stat = fstat(&root).map_err(|source| io_error(Path::new("/"), source))?;
    judge(Path::new("/"), &root_stat, uid, false, true)?;
    // The verified directories from `/` down, each with whether others may write it
    // (a shared sticky directory, whose entries must be the user's own).
    let mut stack: Vec<(OwnedFd, PathBuf, bool)> = vec![(root, PathBuf::from("/"), false)];
    let mut pending: VecDeque<OsString> = components(path);
    let mut links = 0usize;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            if stack.len() > 1 {
                stack.pop();
            }
            continue;
        }
        let Some((dir, dir_path, shared)) = stack.last() else {
            break;
        };
        let here = dir_path.join(&name);
        let last = pending.is_empty();
        let stat = match fstatat_nofollow(dir, &name) {
            Ok(stat) => stat,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(source) => return Err(io_error(&here, source)),
        };
        match stat.st_mode & libc::S_IFMT {
            libc::S_IFLNK => {
                judge_link(&here, &stat, uid, *shared)?;
                links += 1;
                if links > MAX_LINKS {
                    return Err(PathError::Shape {
                        path: path.to_path_buf(),
                        why: format!("more than {MAX_LINKS} symbolic links"),
                    });
                }
                let target = read_link_at(dir, &name).map_err(|source| io_error(&here, source))?;
                let target = PathBuf::from(target);
                if target.is_absolute() {
                    stack.truncate(1);
                }
                for part in components(&target).into_iter().rev() {
                    pending.push_front(part);
                }
            }
            libc::S_IFDIR => {
                let shared_parent = *shared;
                let fd = match open_at(Some(dir), &name, crate::sys::DIR_HANDLE) {
                    Ok(fd) => fd,
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
                    Err(source) => return Err(io_error(&here, source)),
                };
                let held = fstat(&fd).map_err(|source| io_error(&here, source))?;
                let shared_here = judge(&here, &held, uid, shared_parent, true)?;
                stack.push((fd, here, shared_here));
            }
            libc::S_IFREG if last && want == Want::File => {
                let shared_parent = *shared;
                let fd = match open_at(Some(dir), &name, libc::O_RDONLY | libc::O_NONBLOCK) {
                    Ok(fd) => fd,
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
                    Err(source) => return Err(io_error(&here, source)),
                };
                let held = fstat(&fd).map_err(|source| io_error(&here, source))?;
                if held.st_mode & libc::S_IFMT != libc::S_IFREG {
                    return Err(shape(&here, "it is not a regular file"));
                }
                judge(&here, &held, uid, shared_parent, false)?;
                return Ok(Some((fd, here)));
            }
            _ => {
                return Err(shape(
                    &here,
                    if last && want == Want::Dir {
                        "it is not a directory"
                    } else if last {
                        "it is not a regular file"
                    } else {
                        "a component of the path is not a directory"
                    },
                ));
            }
        }
    }
    match want {
        Want::Dir => Ok(stack.pop().map(|(fd, real, _)| (fd, real))),
        Want::File => Err(shape(path, "it is a directory, not a file")),
    }
}

/// Judges a directory or file by the `fstat` of what is held; true when it is a
/// shared sticky directory (others may write it; its entries must be the user's).
fn judge(
    path: &Path,
    stat: &libc::stat,
    uid: u32,
    shared_parent: bool,
    is_dir: bool,
) -> Result<bool, PathError> {
    let owner = stat.st_uid;
    let mode = stat.st_mode & 0o7777;
    let refuse = |why: String, fix: String| PathError::Unsafe {
        path: path.to_path_buf(),
        owner,
        mode,
        why,
        fix,
    };
    if shared_parent && owner != uid {
        return Err(refuse(
            format!("it sits in a directory others can write, and is not yours (uid {uid})"),
            "use a directory of your own (set HERD_HOME), or have it owned by you".to_owned(),
        ));
    }
    if owner != uid && owner != 0 {
        return Err(refuse(
            format!("it is owned by another user, not by you (uid {uid}) or root"),
            format!(
                "use a directory of your own (set HERD_HOME), or `chown {uid} {}`",
                path.display()
            ),
        ));
    }
    let sticky_root_dir = is_dir && owner == 0 && mode & libc::S_ISVTX != 0;
    if mode & 0o002 != 0 {
        if sticky_root_dir {
            return Ok(true);
        }
        return Err(refuse(
            "it is writable by everyone".to_owned(),
            format!("run `chmod go-w {}`", path.display()),
        ));
    }
    if mode & 0o020 != 0 && !group_is_private(stat.st_gid, uid) {
        if sticky_root_dir {
            return Ok(true);
        }
        return Err(refuse(
            format!(
                "it is writable by its group (gid {}), which has other members",
                stat.st_gid
            ),
            format!("run `chmod go-w {}`", path.display()),
        ));
    }
    Ok(false)
}

/// A symbolic link is followed only when it is the user's or root's; in a shared
/// sticky directory only when it is the user's own.
fn judge_link(path: &Path, stat: &libc::stat, uid: u32, shared: bool) -> Result<(), PathError> {
    let owner = stat.st_uid;
    if owner == uid || (owner == 0 && !shared) {
        return Ok(());
    }
    Err(PathError::Unsafe {
        path: path.to_path_buf(),
        owner,
        mode: stat.st_mode & 0o7777,
        why: format!(
            "it is a symbolic link owned by another user (you are uid {uid}), who can point it anywhere"
        ),
        fix: "remove it, or point HERD_HOME at the real directory".to_owned(),
    })
}

/// Whether group `gid` has no member but `uid`: nobody else lists it as their
/// primary group in `/etc/passwd`, and `/etc/group` names no other member.
fn group_is_private(gid: u32, uid: u32) -> bool {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let group = std::fs::read_to_string("/etc/group").unwrap_or_default();
    let mut name = None;
    for line in passwd.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        let (Some(user), Some(Ok(u)), Some(Ok(g))) = (
            fields.first(),
            fields.get(2).map(|f| f.parse::<u32>()),
            fields.get(3).map(|f| f.parse::<u32>()),
        ) else {
            continue;
        };
        if u == uid {
            name = Some(*user);
        } else if g == gid {
            return false;
        }
    }
    let Some(name) = name else {
        return false;
    };
    group.lines().any(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        fields.get(2).and_then(|f| f.parse::<u32>().ok()) == Some(gid)
            && fields.get(3).is_none_or(|m| {
                m.split(',')
                    .all(|member| member.is_empty() || member == name)
            })
    })
}

/// The path's normal components (`.` and the root left out, `..` kept).
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

fn shape(path: &Path, why: &str) -> PathError {
    PathError::Shape {
        path: path.to_path_buf(),
        why: why.to_owned(),
    }
}

fn io_error(path: &Path, source: io::Error) -> PathError {
    PathError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC)`; `None` for an absolute name.
fn open_at(dir: Option<&OwnedFd>, name: &OsStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let name = c_name(name)?;
    let dirfd = dir.map_or(libc::AT_FDCWD, AsRawFd::as_raw_fd);
    // SAFETY: a valid descriptor (or AT_FDCWD) and a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dirfd,
            name.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat returned a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: an all-zero stat is a valid buffer for fstat to fill.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &raw mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stat)
}

fn fstatat_nofollow(dir: &OwnedFd, name: &OsStr) -> io::Result<libc::stat> {
    let name = c_name(name)?;
    // SAFETY: as in `fstat`.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor, NUL-terminated name and buffer.
    let done = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &raw mut stat,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stat)
}

fn read_link_at(dir: &OwnedFd, name: &OsStr) -> io::Result<OsString> {
    let name = c_name(name)?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: a valid descriptor, NUL-terminated name and a buffer of the given size.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    buf.truncate(n);
    Ok(OsString::from_vec(buf))
}

#[cfg(test)]
mod tests;
