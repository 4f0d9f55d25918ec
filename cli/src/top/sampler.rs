//! The `/proc` sampler: tree CPU and memory of every running session, once a
//! second, on its own thread (never on the UI's).
//!
//! One sample reads `/proc/<pid>/stat` of every process once (its parent, start
//! time, CPU ticks and resident pages) and builds the parent → children map, so
//! a session's tree is its pid and every descendant, however many sessions there
//! are: the cost is one read per process on the host, not one per session. A
//! process that left its session's tree on purpose (a double fork to init) is not
//! counted, as in `ps`.
//!
//! CPU is the ticks a process used since the previous sample (a process is known
//! by pid and start time, so a reused pid starts from zero) over the wall time
//! between the samples; a tree's figure is the sum over its processes. Memory is
//! the sum of resident set sizes, so pages shared between them count once per
//! process, as `top` shows them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::model::Usage;

/// How often a sample is taken.
pub(crate) const INTERVAL: Duration = Duration::from_secs(1);

/// The sessions to sample: (session id, pid), set by the UI after each listing.
pub(crate) type Targets = Arc<Mutex<Vec<(String, i32)>>>;

/// One process as its `stat` file says.
#[derive(Debug, Clone, Copy)]
struct Stat {
    ppid: i32,
    start_ticks: u64,
    cpu_ticks: u64,
    rss_pages: u64,
}

/// Parses the fields of `/proc/<pid>/stat` that the sampler uses. The command
/// name (field 2) may hold spaces and parentheses, so fields are counted after
/// its last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = text.get(text.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| fields.get(i)?.parse::<u64>().ok();
    Some(Stat {
        ppid: fields.get(1)?.parse().ok()?,
        cpu_ticks: num(11)? + num(12)?,
        start_ticks: num(19)?,
        rss_pages: num(21)?,
    })
}

/// Every process on the host, by pid.
fn scan() -> HashMap<i32, Stat> {
    let mut all = HashMap::new();
    for pid in crate::sys::pids() {
        // A process that exits between the listing and the read is simply gone.
        if let Some(stat) = crate::sys::stat(pid).as_deref().and_then(parse_stat) {
            all.insert(pid, stat);
        }
    }
    all
}

/// Successive samples; each compares with the one before.
#[derive(Debug)]
pub(crate) struct Sampler {
    /// Ticks by (pid, start time) at the previous sample.
    previous: HashMap<(i32, u64), u64>,
    previous_at: Option<Instant>,
    ticks_per_second: f64,
    page_bytes: u64,
}

impl Sampler {
    /// A sampler with no history (the first sample's CPU is 0).
    pub(crate) fn new() -> Sampler {
        use nix::unistd::{SysconfVar, sysconf};
        let conf = |var, fallback: i64| {
            sysconf(var)
                .ok()
                .flatten()
                .filter(|v| *v > 0)
                .unwrap_or(fallback)
        };
        Sampler {
            previous: HashMap::new(),
            previous_at: None,
            // The kernel's USER_HZ is 100 on every Linux architecture herd runs on.
            ticks_per_second: conf(SysconfVar::CLK_TCK, 100) as f64,
            page_bytes: u64::try_from(conf(SysconfVar::PAGE_SIZE, 4096)).unwrap_or(4096),
        }
    }

    /// Samples the trees of `targets` at `now`.
    pub(crate) fn sample(
        &mut self,
        targets: &[(String, i32)],
        now: Instant,
    ) -> HashMap<String, Usage> {
        let all = scan();
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for (&pid, stat) in &all {
            children.entry(stat.ppid).or_default().push(pid);
        }
        let elapsed_ticks = self
            .previous_at
            .map(|at| now.saturating_duration_since(at).as_secs_f64() * self.ticks_per_second);
        let mut current = HashMap::with_capacity(all.len());
        let mut usage = HashMap::with_capacity(targets.len());
        for (id, pid) in targets {
            let mut tree = Usage::default();
            let mut used_ticks = 0u64;
            let mut stack = vec![*pid];
            // A pid is visited once even if the map had a cycle (it cannot, but
            // a host's /proc is read while it changes).
            let mut seen = std::collections::HashSet::new();
            while let Some(p) = stack.pop() {
                if !seen.insert(p) {
                    continue;
                }
                let Some(stat) = all.get(&p) else { continue };
                let key = (p, stat.start_ticks);
                let before = self.previous.get(&key).copied().unwrap_or(stat.cpu_ticks);
                used_ticks += stat.cpu_ticks.saturating_sub(before);
                current.insert(key, stat.cpu_ticks);
                tree.rss_bytes += stat.rss_pages * self.page_bytes;
                tree.n_processes += 1;
                if let Some(kids) = children.get(&p) {
                    stack.extend(kids);
                }
            }
            if tree.n_processes == 0 {
                continue;
            }
            if let Some(elapsed) = elapsed_ticks.filter(|t| *t > 0.0) {
                tree.cpu_percent = used_ticks as f64 / elapsed * 100.0;
            }
            usage.insert(id.clone(), tree);
        }
        self.previous = current;
        self.previous_at = Some(now);
        usage
    }
}

/// Starts the sampling thread: every [`INTERVAL`] it samples `targets` and
/// sends the figures; it ends when the receiver is gone or `stop` is dropped.
///
/// # Errors
/// When the thread cannot be started.
pub(crate) fn spawn(
    targets: Targets,
    tx: tokio::sync::mpsc::UnboundedSender<HashMap<String, Usage>>,
    stop: std::sync::mpsc::Receiver<()>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("herd-top-sampler".into())
        .spawn(move || {
            let mut sampler = Sampler::new();
            loop {
                let now_targets = targets.lock().map(|t| t.clone()).unwrap_or_default();
                let usage = sampler.sample(&now_targets, Instant::now());
                if tx.send(usage).is_err() {
                    return;
                }
                // The interval is a wait on the stop channel: a quit ends it at once.
                match stop.recv_timeout(INTERVAL) {
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
            }
        })
}
