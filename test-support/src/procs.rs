//! Processes as `/proc` shows them: whether one lives, its children, and the live
//! members of a process group (the check that a tree kill left nothing behind).
//! Zombies do not count as alive: an orphan re-parented to an init that does not
//! reap (as in some containers) stays a zombie after it died.

/// Whether process `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or_default()
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

/// The pids of process `pid`'s children.
pub fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The pids `/proc` lists now.
///
/// # Panics
/// When `/proc` is not mounted.
pub fn pids() -> impl Iterator<Item = i32> {
    std::fs::read_dir("/proc")
        .expect("/proc is mounted")
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
}

/// Live (non-zombie) members of process group `pgid`.
///
/// # Panics
/// When `/proc` is not mounted.
pub fn group_members(pgid: i32) -> Vec<i32> {
    pids()
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                return false;
            };
            let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
            fields.get(2).and_then(|f| f.parse::<i32>().ok()) == Some(pgid) && fields[0] != "Z"
        })
        .collect()
}
