//! The memory limit a scoped worker gets, and the readers of the two host facts it is
//! computed from (physical RAM, the service's own cgroup limit).
//!
//! A scope escapes the service's cgroup, and with it the service's `MemoryMax`. Without a
//! limit of its own, one runaway job could take the whole machine; so every worker gets
//! min(the service's own limit, half of RAM capped at 4 GiB), never less than 64 MiB (a
//! smaller limit only makes jobs die mysteriously). A configured value wins when it is
//! tighter. When RAM cannot be read it counts as 2 GiB, which gives 1 GiB. The service
//! limit comes from cgroup v2 `memory.max`, or on v1 and hybrid hosts from the memory
//! controller's `memory.limit_in_bytes`.

use std::path::Path;

/// The smallest `MemoryMax` a worker gets.
pub(crate) const MIN_MEMORY_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// The largest `MemoryMax` a worker gets from the RAM rule.
pub(crate) const MEMORY_MAX_CAP_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// What physical RAM counts as when `/proc/meminfo` cannot be read.
pub(crate) const FALLBACK_TOTAL_RAM_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// The `MemoryMax` for scoped workers: min(`service_cgroup_max`, half of `total_ram`
/// capped at 4 GiB), a tighter `configured` value winning, and never below 64 MiB.
pub fn memory_max(service_cgroup_max: Option<u64>, total_ram: u64, configured: Option<u64>) -> u64 {
    let mut limit = (total_ram / 2).min(MEMORY_MAX_CAP_BYTES);
    if let Some(service) = service_cgroup_max {
        limit = limit.min(service);
    }
    if let Some(configured) = configured {
        limit = limit.min(configured);
    }
    limit.max(MIN_MEMORY_MAX_BYTES)
}

/// `MemTotal` from the text of `/proc/meminfo`, in bytes.
pub(crate) fn parse_meminfo_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let mut fields = line["MemTotal:".len()..].split_whitespace();
    let value: u64 = fields.next()?.parse().ok()?;
    match fields.next() {
        Some("kB") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// Physical RAM in bytes from `/proc/meminfo`; `None` when it cannot be read.
pub(crate) fn read_total_ram_bytes() -> Option<u64> {
    parse_meminfo_total(&crate::sys::procfs::meminfo()?)
}

/// The cgroup v2 path (the `0::<path>` line) from the text of `/proc/self/cgroup`.
pub(crate) fn parse_cgroup_v2_path(proc_cgroup: &str) -> Option<&str> {
    proc_cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::trim)
        .filter(|path| path.starts_with('/'))
}

/// The limit in the text of a `memory.max` file; `"max"` (no limit) and garbage are `None`.
pub(crate) fn parse_memory_max(text: &str) -> Option<u64> {
    match text.trim() {
        "max" => None,
        number => number.parse().ok(),
    }
}

/// The memory-controller path from the text of `/proc/self/cgroup` on a cgroup v1 (or
/// hybrid) host: the `N:…memory…:<path>` line.
pub(crate) fn parse_cgroup_v1_memory_path(proc_cgroup: &str) -> Option<&str> {
    proc_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let _hierarchy = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?.trim();
        (controllers.split(',').any(|c| c == "memory") && path.starts_with('/')).then_some(path)
    })
}

/// The limit in the text of a cgroup v1 `memory.limit_in_bytes`; the kernel writes a value
/// near `i64::MAX` (rounded to pages) for "no limit", so anything from 2^62 up is none.
pub(crate) fn parse_memory_limit_in_bytes(text: &str) -> Option<u64> {
    text.trim()
        .parse()
        .ok()
        .filter(|&limit: &u64| limit < 1 << 62)
}

/// The effective memory limit of this process's cgroup: `memory.max` on cgroup v2 (under
/// `/sys/fs/cgroup`), else `memory.limit_in_bytes` of the v1 memory controller (under
/// `/sys/fs/cgroup/memory`); the smallest limit on the path up to the root. `None` when
/// unlimited or unreadable.
pub(crate) fn read_service_memory_max_bytes() -> Option<u64> {
    let (own_cgroup, root) = crate::sys::procfs::own_cgroup_file_and_root();
    read_service_memory_max_at(own_cgroup, root)
}

/// [`read_service_memory_max_bytes`] with the two roots given (tests use a temp dir).
pub(crate) fn read_service_memory_max_at(proc_cgroup: &Path, cgroup_root: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(proc_cgroup).ok()?;
    if let Some(path) = parse_cgroup_v2_path(&text) {
        let v2 = smallest_limit_up(cgroup_root, path, "memory.max", parse_memory_max);
        if v2.is_some() || path != "/" {
            return v2;
        }
    }
    // A hybrid host puts v2 at the root ("0::/") and the memory controller on v1.
    let path = parse_cgroup_v1_memory_path(&text)?;
    smallest_limit_up(
        &cgroup_root.join("memory"),
        path,
        "memory.limit_in_bytes",
        parse_memory_limit_in_bytes,
    )
}

/// The smallest limit in `file` from `root/path` up to `root`: a limit on a parent slice
/// binds the service as much as its own.
fn smallest_limit_up(
    root: &Path,
    path: &str,
    file: &str,
    parse: fn(&str) -> Option<u64>,
) -> Option<u64> {
    let mut dir = root.join(path.trim_start_matches('/'));
    let mut smallest: Option<u64> = None;
    loop {
        if let Some(limit) = std::fs::read_to_string(dir.join(file))
            .ok()
            .as_deref()
            .and_then(parse)
        {
            smallest = Some(smallest.map_or(limit, |s| s.min(limit)));
        }
        if dir == root || !dir.pop() || !dir.starts_with(root) {
            break;
        }
    }
    smallest
}
