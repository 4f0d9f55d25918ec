//! Listening TCP sockets and the processes that hold them: readiness by port
//!. A port counts only when a socket listening on it, on a loopback or
//! wildcard address, is an open descriptor of a process in the session's own tree,
//! so a server of someone else already holding the port never makes a session
//! ready.
//!
//! Reads `/proc/net/tcp`, `/proc/net/tcp6` (of this process's network namespace,
//! which its jobs share), the tree's `/proc/<pid>/fd` links and, to find the tree,
//! the session's cgroup or the process table. Blocking: call it off every lock, on
//! the blocking pool.

use std::collections::HashSet;
use std::fs;
use std::path::Path;

/// The `st` column of a listening socket.
const LISTEN: &str = "0A";

/// The inodes of TCP sockets listening on `port` on 127.0.0.0/8, ::1 (or
/// `::ffff:127.x`) or a wildcard address.
pub(crate) fn listening_inodes(port: u16) -> HashSet<u64> {
    let mut inodes = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = fs::read_to_string(table) {
            inodes.extend(parse_listening(&text, port));
        }
    }
    inodes
}

/// The inodes of `text`'s (a `/proc/net/tcp{,6}` table) sockets listening on
/// `port` on a loopback or wildcard address.
pub(crate) fn parse_listening(text: &str, port: u16) -> Vec<u64> {
    let want_port = format!("{port:04X}");
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (addr, local_port) = fields.get(1)?.split_once(':')?;
            if fields.get(3)? != &LISTEN || !local_port.eq_ignore_ascii_case(&want_port) {
                return None;
            }
            if !is_local_or_any(addr) {
                return None;
            }
            fields.get(9)?.parse().ok()
        })
        .collect()
}

/// Whether a hex address of `/proc/net/tcp{,6}` (each 32-bit word in host byte
/// order, little-endian here) is a wildcard or loopback address.
fn is_local_or_any(addr: &str) -> bool {
    let addr = addr.to_ascii_uppercase();
    match addr.len() {
        // 127.x.x.x: the first octet is the word's low byte, printed last.
        8 => addr == "00000000" || addr.ends_with("7F"),
        32 => {
            addr == "00000000000000000000000000000000"
                || addr == "00000000000000000000000001000000"
                || (addr.starts_with("0000000000000000FFFF0000") && addr.ends_with("7F"))
        }
        _ => false,
    }
}

/// The pids of a session's tree: its cgroup's members when it has one, else
/// `root` and its descendants by parentage.
pub(crate) fn tree_pids(root: i32, cgroup: Option<&Path>) -> Vec<i32> {
    if let Some(dir) = cgroup.and_then(super::cgroup::SessionCgroup::existing) {
        let pids = dir.pids();
        if !pids.is_empty() {
            return pids;
        }
    }
    let table = super::process_table();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            table
                .iter()
                .filter(|p| p.ppid == parent && !p.is_dead())
                .map(|p| p.pid),
        );
        i += 1;
    }
    tree
}

/// Whether any of `pids` holds a socket whose inode is in `inodes`.
pub(crate) fn holds_any(pids: &[i32], inodes: &HashSet<u64>) -> bool {
    if inodes.is_empty() {
        return false;
    }
    pids.iter().any(|pid| {
        let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        dir.flatten().any(|entry| {
            fs::read_link(entry.path()).ok().is_some_and(|target| {
                target
                    .to_str()
                    .and_then(|t| t.strip_prefix("socket:["))
                    .and_then(|t| t.strip_suffix(']'))
                    .and_then(|n| n.parse::<u64>().ok())
                    .is_some_and(|inode| inodes.contains(&inode))
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0
   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0 100 0 0 10 0
   2: 0A00000A:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 333 1 0 100 0 0 10 0
   3: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 444 1 0 100 0 0 10 0
   4: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 555 1 0 100 0 0 10 0
";

    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 666 1 0 100 0 0 10 0
   1: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 888 1 0 100 0 0 10 0
   3: 20010DB8000000000000000000000001:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 999 1 0 100 0 0 10 0
";

    #[test]
    fn b45_only_listening_loopback_or_wildcard_sockets_on_the_port_count() {
        assert_eq!(parse_listening(TCP, 8080), [111, 222]);
        assert_eq!(parse_listening(TCP, 8081), [555]);
        assert_eq!(parse_listening(TCP6, 8080), [666, 777, 888]);
        assert!(parse_listening(TCP, 9).is_empty());
    }
}
