//! Reading a file by mapping it, safe against the file shrinking under the map.
//!
//! A log read out (`registry::readout`) is scanned once by the redactor and its
//! unchanged parts are sent from the file by `sendfile`: a copy of it in the
//! daemon's memory is read once and thrown away. Mapping the file's pages saves
//! that copy (a sixth of the read-out's CPU, measured). But a mapped file that
//! shrinks (another process of the user truncates a log) turns every read of the
//! pages past its new end into `SIGBUS`, which kills the process.
//!
//! So a map is only made once [`guard`] has installed a `SIGBUS` handler: a fault
//! inside a live map ([`Mapped`]) maps a page of zeros over the faulting page and
//! marks the map [`Mapped::shrank`], and the read goes on; its reader drops what
//! it read from the map and reads the file again. A fault anywhere else goes to the
//! handler that was there before (Rust's own, which tells a stack overflow from the
//! rest and leaves the rest to the default action, a core dump): nothing that would
//! have died lives on.
//!
//! A signal handler reaches only statics, so the live maps are a fixed table of
//! address ranges ([`SLOTS`] of them, each claimed by one map for its life and
//! read by the handler with atomics only); with every slot taken, [`Mapped::new`]
//! answers `None` and the caller reads the file as it always did.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// How many maps may live at once.
const SLOTS: usize = 256;

/// A slot's states: the low bits of its tag, whose other bits count its claims
/// (so the handler can tell a slot that was freed and claimed again while it read
/// the range, as a seqlock does).
const FREE: u64 = 0;
const CLAIMED: u64 = 1;
const LIVE: u64 = 2;
const STATE_BITS: u64 = 3;
const CLAIM: u64 = 4;

/// One live map: the address range the handler answers for, and whether it did.
struct Slot {
    state: AtomicU64,
    start: AtomicUsize,
    end: AtomicUsize,
    shrank: AtomicBool,
}

#[expect(
    clippy::declare_interior_mutable_const,
    reason = "the initialiser of the table's slots, each its own"
)]
const EMPTY: Slot = Slot {
    state: AtomicU64::new(FREE),
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    shrank: AtomicBool::new(false),
};

/// The live maps, keyed by their address ranges: the only state a `SIGBUS`
/// handler can reach.
static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];

/// The `SIGBUS` disposition found when [`guard`] installed its own: where a fault
/// outside every map goes. Set once, before the handler is installed.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// Whether [`guard`] installed the handler (maps are made only then).
static GUARDED: AtomicBool = AtomicBool::new(false);

/// The page size, read once by [`guard`] (the handler calls nothing that is not
/// async-signal-safe).
static PAGE: AtomicUsize = AtomicUsize::new(4096);

/// Installs the `SIGBUS` handler that lets files be read by mapping them (see the
/// module docs); once per process, later calls answer as the first did.
///
/// # Errors
/// The OS error of `sigaction`: then no file is mapped.
pub(crate) fn guard() -> std::io::Result<()> {
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
    let done = INSTALLED.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if let Ok(page) = usize::try_from(page)
            && page.is_power_of_two()
        {
            PAGE.store(page, Ordering::Relaxed);
        }
        // SAFETY: a zeroed sigaction is a valid out-parameter; a null new action
        // only reads the current one.
        let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: `previous` is a valid sigaction to write.
        if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &raw mut previous) } != 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        let _ = PREVIOUS.set(previous);
        // SAFETY: a zeroed sigaction is valid; its handler and flags are set below.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_sigbus as *const () as usize;
        // On the thread's alternate stack where it has one (Rust gives its threads
        // one): a fault from a stack overflow must reach the handler before it.
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `action.sa_mask` is a valid sigset to empty.
        unsafe { libc::sigemptyset(&raw mut action.sa_mask) };
        // SAFETY: `action` is a complete sigaction whose handler is async-signal-safe.
        if unsafe { libc::sigaction(libc::SIGBUS, &raw const action, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        GUARDED.store(true, Ordering::Release);
        Ok(())
    });
    done.map_err(std::io::Error::from_raw_os_error)
}

/// Whether maps are made ([`guard`] installed its handler).
pub(crate) fn guarded() -> bool {
    GUARDED.load(Ordering::Acquire)
}

/// The `SIGBUS` handler: a fault in a live map gets a page of zeros and marks
/// the map; any other goes to the previous disposition. Async-signal-safe: atomic
/// loads and stores, `mmap`, `sigaction`.
extern "C" fn on_sigbus(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel hands a SA_SIGINFO handler a valid siginfo.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    if code <= 0 {
        // Sent (`kill`, `tgkill`, `sigqueue`), not a fault: `si_addr` is no
        // address. It ends the process, as it would have without a handler.
        die_of(signal);
        return;
    }
    for slot in &TABLE {
        let tag = slot.state.load(Ordering::Acquire);
        if tag & STATE_BITS != LIVE {
            continue;
        }
        let (start, end) = (
            slot.start.load(Ordering::Relaxed),
            slot.end.load(Ordering::Relaxed),
        );
        std::sync::atomic::fence(Ordering::Acquire);
        if slot.state.load(Ordering::Relaxed) != tag {
            // Freed (and perhaps claimed again) while read: not the faulting
            // thread's map, which lives until its reader is done.
            continue;
        }
        if (start..end).contains(&addr) {
            let page = addr & !(page_size() - 1);
            // SAFETY: the page lies in a live map this process made (the slot is
            // LIVE until just before its unmap): replacing it with zeros changes
            // only what the map's reader sees, and the reader is told.
            let zeros = unsafe {
                libc::mmap(
                    page as *mut libc::c_void,
                    page_size(),
                    libc::PROT_READ,
                    libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if zeros != libc::MAP_FAILED {
                slot.shrank.store(true, Ordering::Release);
                return;
            }
            break;
        }
    }
    pass_on(signal, info, context);
}

/// Hands a fault no map answers for to the disposition that was there before: its
/// handler, or (default or ignored) the default, put back so the fault, raised
/// again when this returns, ends the process as it would have.
fn pass_on(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    if let Some(previous) = PREVIOUS.get() {
        let handler = previous.sa_sigaction;
        if handler != libc::SIG_DFL && handler != libc::SIG_IGN {
            if previous.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: a SA_SIGINFO handler has this signature.
                let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(handler) };
                handler(signal, info, context);
            } else {
                // SAFETY: a plain handler has this signature.
                let handler: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
                handler(signal);
            }
            return;
        }
    }
    to_default(signal);
}

/// Puts `signal`'s default disposition back.
fn to_default(signal: libc::c_int) {
    // SAFETY: a zeroed sigaction is SIG_DFL with an empty mask.
    let mut default: libc::sigaction = unsafe { std::mem::zeroed() };
    default.sa_sigaction = libc::SIG_DFL;
    // SAFETY: `default` is a complete sigaction.
    unsafe { libc::sigaction(signal, &raw const default, std::ptr::null_mut()) };
}

/// Ends the process by `signal`'s default action: the disposition put back and
/// the signal raised again (blocked while its handler runs, it is delivered as
/// the handler returns).
fn die_of(signal: libc::c_int) {
    to_default(signal);
    // SAFETY: raise is async-signal-safe.
    unsafe { libc::raise(signal) };
}

fn page_size() -> usize {
    PAGE.load(Ordering::Relaxed)
}

/// `len` bytes of a file from offset `at`, mapped read-only (see the module docs).
///
/// The bytes are the file's pages: another process that writes the file changes
/// them under a reader, which Rust's `&[u8]` does not expect. So they are read as
/// plain bytes (searched for line ends, copied), never handed out as text: the
/// read-out copies each block into memory of its own before it checks it is
/// UTF-8 and redacts it (`herd_hooks::LogText::may_change`).
#[derive(Debug)]
pub(crate) struct Mapped {
    /// The map's start (page-aligned) and length.
    base: *mut libc::c_void,
    map_len: usize,
    /// Where the bytes asked for start in the map.
    skew: usize,
    len: usize,
    slot: usize,
}

// SAFETY: the map is read-only memory owned by this value; reading it from any
// thread is as safe as reading a `&[u8]`.
unsafe impl Send for Mapped {}
// SAFETY: as above: shared reads only.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// Maps `len` bytes of `file` from `at`, its pages filled in now. `None` when
    /// [`guard`] has not run, every slot is taken, `len` is 0 or the map fails:
    /// the caller reads the file instead.
    pub(crate) fn new(file: &File, at: u64, len: usize) -> Option<Mapped> {
        if len == 0 || !guarded() {
            return None;
        }
        let page = page_size() as u64;
        let offset = at - at % page;
        let skew = usize::try_from(at - offset).ok()?;
        let map_len = skew.checked_add(len)?;
        let file_offset = libc::off_t::try_from(offset).ok()?;
        let slot = claim(&TABLE)?;
        // SAFETY: a fresh read-only shared map of a file open for reading, at a
        // page-aligned offset; the kernel picks the address.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                file.as_raw_fd(),
                file_offset,
            )
        };
        let entry = &TABLE[slot];
        let claimed = entry.state.load(Ordering::Relaxed);
        if base == libc::MAP_FAILED {
            entry
                .state
                .store(claimed & !STATE_BITS | FREE, Ordering::Release);
            return None;
        }
        entry.start.store(base as usize, Ordering::Relaxed);
        entry.end.store(base as usize + map_len, Ordering::Relaxed);
        entry
            .state
            .store(claimed & !STATE_BITS | LIVE, Ordering::Release);
        Some(Mapped {
            base,
            map_len,
            skew,
            len,
            slot,
        })
    }

    /// Whether a read of the map met a page the file no longer has (it shrank, or
    /// the page could not be read): the bytes read from there on are zeros, not
    /// the file's.
    pub(crate) fn shrank(&self) -> bool {
        TABLE[self.slot].shrank.load(Ordering::Acquire)
    }
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the map holds `skew + len` readable bytes for this value's life
        // (a page the file lost reads as zeros, see the handler).
        unsafe { std::slice::from_raw_parts(self.base.cast::<u8>().add(self.skew), self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // The slot first: the handler must not answer for the range once another
        // map may be given it.
        let slot = &TABLE[self.slot].state;
        slot.store(
            slot.load(Ordering::Relaxed) & !STATE_BITS | FREE,
            Ordering::Release,
        );
        // SAFETY: the map this value made, unmapped once; no borrow of it outlives
        // the value.
        unsafe { libc::munmap(self.base, self.map_len) };
    }
}

/// Claims a free slot of `table`.
fn claim(table: &[Slot]) -> Option<usize> {
    table.iter().position(|slot| {
        let tag = slot.state.load(Ordering::Relaxed);
        let won = tag & STATE_BITS == FREE
            && slot
                .state
                .compare_exchange(
                    tag,
                    (tag & !STATE_BITS).wrapping_add(CLAIM) | CLAIMED,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_ok();
        if won {
            slot.shrank.store(false, Ordering::Relaxed);
        }
        won
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_of(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("log");
        std::fs::write(&path, bytes).expect("the file");
        (dir, path)
    }

    #[test]
    fn b5_a_mapped_read_gives_the_files_bytes_from_any_offset() {
        guard().expect("the handler");
        let page = page_size();
        let bytes: Vec<u8> = (0..5 * page + 123).map(|i| (i % 251) as u8).collect();
        let (_dir, path) = file_of(&bytes);
        let file = File::open(&path).expect("open");
        for (at, len) in [
            (0, bytes.len()),
            (page, page),
            (page + 904, page + 2904),
            (5 * page - 20, 143),
        ] {
            let map = Mapped::new(&file, at as u64, len).expect("a map");
            assert_eq!(map.as_ref(), &bytes[at..at + len], "{len} bytes at {at}");
            assert!(!map.shrank());
        }
        assert!(Mapped::new(&file, 0, 0).is_none(), "nothing to map");
    }

    #[test]
    fn b5_a_file_cut_short_under_its_map_reads_as_zeros_and_is_marked_not_a_crash() {
        guard().expect("the handler");
        let page = page_size();
        let bytes = vec![b'x'; 8 * page];
        let (_dir, path) = file_of(&bytes);
        let file = File::open(&path).expect("open");
        let map = Mapped::new(&file, 0, bytes.len()).expect("a map");
        // Another process of the user cuts the log short while it is mapped.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(page as u64 + 10))
            .expect("truncate");
        let seen = map.as_ref();
        assert_eq!(&seen[..page + 10], &bytes[..page + 10], "the bytes kept");
        assert!(
            seen[page + 10..].iter().all(|&b| b == 0),
            "the bytes the file lost read as zeros (in its last page too, unfaulted)"
        );
        assert!(map.shrank(), "the map says the file shrank under it");
        drop(map);
        // The slot is free again and a new map of the same file is clean.
        let again = Mapped::new(&file, 0, page).expect("a map");
        assert_eq!(again.as_ref(), &bytes[..page]);
        assert!(!again.shrank());
    }

    /// Set in the children the tests below start: how each meets `SIGBUS`.
    const SIGBUS_CHILD: &str = "HERD_TEST_MAPPED_SIGBUS_CHILD";

    /// Runs the test `name` of this binary as a child with [`SIGBUS_CHILD`] set
    /// (no core file); the signal that ended it.
    #[expect(
        clippy::disallowed_methods,
        reason = "the test binary runs itself as the child that meets the signal"
    )]
    fn child_ends_by(name: &str) -> Option<i32> {
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        let mut child =
            std::process::Command::new(std::env::current_exe().expect("the test binary"));
        child
            .args([
                "--exact",
                &format!("sys::mapped::tests::{name}"),
                "--test-threads=1",
            ])
            .env(SIGBUS_CHILD, "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: setrlimit is async-signal-safe; no core file is left behind.
        unsafe {
            child.pre_exec(|| {
                let none = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &raw const none);
                Ok(())
            });
        }
        child.status().expect("the child runs").signal()
    }

    #[test]
    fn b5_a_fault_outside_every_map_still_ends_the_process() {
        if std::env::var_os(SIGBUS_CHILD).is_some() {
            guard().expect("the handler");
            let page = page_size();
            let (_dir, path) = file_of(&vec![b'z'; 2 * page]);
            let file = File::open(&path).expect("open");
            // A map of its own, not in the table: the handler must not answer for it.
            // SAFETY: a fresh read-only map of a file open for reading.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    2 * page,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    file.as_raw_fd(),
                    0,
                )
            };
            assert_ne!(base, libc::MAP_FAILED);
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(0))
                .expect("truncate");
            // SAFETY: the map is live; the read faults (the file lost the page), which
            // is what this child is for.
            let byte = unsafe { std::ptr::read_volatile(base.cast::<u8>().add(page)) };
            // Not reached when the fault ends the process, as it must.
            std::process::exit(i32::from(byte) + 1);
        }
        assert_eq!(
            child_ends_by("b5_a_fault_outside_every_map_still_ends_the_process"),
            Some(libc::SIGBUS),
            "a fault no map answers for ends the process"
        );
    }

    #[test]
    fn b5_a_sigbus_sent_to_a_guarded_process_still_ends_it() {
        if std::env::var_os(SIGBUS_CHILD).is_some() {
            guard().expect("the handler");
            // A live map, so the handler has a range it could wrongly match.
            let (_dir, path) = file_of(&[b'q'; 100]);
            let file = File::open(&path).expect("open");
            let _map = Mapped::new(&file, 0, 100).expect("a map");
            // SAFETY: raise has no preconditions.
            unsafe { libc::raise(libc::SIGBUS) };
            // Not reached when the signal ends the process, as it must.
            std::process::exit(3);
        }
        assert_eq!(
            child_ends_by("b5_a_sigbus_sent_to_a_guarded_process_still_ends_it"),
            Some(libc::SIGBUS),
            "a sent SIGBUS ends the process as its default action does"
        );
    }

    #[test]
    fn b5_a_full_table_refuses_a_map_and_a_freed_slot_is_claimed_again() {
        let table = [EMPTY; 3];
        assert_eq!(
            (claim(&table), claim(&table), claim(&table)),
            (Some(0), Some(1), Some(2))
        );
        assert_eq!(
            claim(&table),
            None,
            "every slot taken: no map, the file is read"
        );
        table[1].shrank.store(true, Ordering::Relaxed);
        let first = table[1].state.load(Ordering::Relaxed);
        table[1]
            .state
            .store(first & !STATE_BITS | FREE, Ordering::Release);
        assert_eq!(claim(&table), Some(1));
        assert_ne!(
            table[1].state.load(Ordering::Relaxed) & !STATE_BITS,
            first & !STATE_BITS,
            "a claim counts: the handler tells a slot claimed again"
        );
        assert!(
            !table[1].shrank.load(Ordering::Relaxed),
            "a claimed slot starts clean"
        );
    }
}
