//! A read-only home and a full disk: each store gives a clear error and
//! nothing already stored is lost.
//!
//! How the fault is made depends on who runs the tests. As a normal user the
//! home is `chmod 0500`. Root ignores permission bits, so as root the home is
//! a tiny tmpfs mounted on a temp dir (remounted read-only, or filled up).
//! When root cannot mount (a container without CAP_SYS_ADMIN), the tests fall
//! back to a home whose path runs through a regular file, which no writer can
//! create anything under, and check that failure instead; they say which
//! fault they used in their assertion messages.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use herd_persistence::{
    CheckpointStore, CompletionRecord, Error, Home, Ledger, Mode, ReceiptStore, ResultReceipt,
    SessionRecord, Writer,
};

use crate::support;

/// A tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size_kib` on `dir`; `None` when mounting is not
    /// permitted here.
    fn mount(dir: &Path, size_kib: u32) -> Option<Tmpfs> {
        let status = support::command("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={size_kib}k,mode=0700"))
            .arg("tmpfs")
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        status.success().then(|| Tmpfs {
            dir: dir.to_path_buf(),
        })
    }

    fn remount(&self, option: &str) {
        let status = support::command("mount")
            .args(["-o", &format!("remount,{option}")])
            .arg(&self.dir)
            .status()
            .expect("run mount");
        assert!(status.success(), "remount {option} {}", self.dir.display());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = support::command("umount").arg("-l").arg(&self.dir).status();
    }
}

/// Whether this process runs as root: a file it creates is owned by uid 0.
fn is_root(scratch: &Path) -> bool {
    let probe = scratch.join("uid-probe");
    File::create(&probe).expect("create probe file");
    let uid = fs::metadata(&probe).expect("stat probe").uid();
    fs::remove_file(&probe).expect("remove probe file");
    uid == 0
}

fn session(n: u32) -> SessionRecord {
    SessionRecord {
        id: format!("proc_{n:012x}"),
        command: "sleep 1000".to_owned(),
        pid: 4000 + i32::try_from(n).expect("small"),
        pgid: 4000 + i32::try_from(n).expect("small"),
        start_time: Some(99),
        task_id: "task".to_owned(),
        owner_task_id: "owner".to_owned(),
        session_key: "key with some length to fill the disk faster".to_owned(),
        mode: Mode::Pipe,
        notify: true,
        watch_patterns: vec!["pattern".repeat(20)],
        heartbeat_seconds: 0,
        completion_output_chars: 0,
        persist_on_release: false,
        log_path: PathBuf::from(format!("/h/logs/sessions/proc_{n:012x}.log")),
        cwd: None,
        started_at: 1.0,
        shim: None,
        name: None,
        options: None,
        command_given: None,
        runs: None,
    }
}

fn completion(n: u32, payload: &str) -> CompletionRecord {
    CompletionRecord {
        completion_id: format!("cmp_{n}"),
        session_id: format!("proc_{n:012x}"),
        owner_task_id: "owner".to_owned(),
        task_id: "task".to_owned(),
        session_key: String::new(),
        event: serde_json::json!({"type": "completion", "output": payload}),
        created_at: 1.0,
    }
}

fn receipt(id: &str, output: String) -> ResultReceipt {
    // Finished now: a receipt older than the result TTL is evicted at once.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    let mut receipt = ResultReceipt::exited(id, "make", 0, now);
    receipt.output = output;
    receipt
}

/// Stores one of everything; returns the checkpoint's session count.
fn store_some(home: &Home) {
    let me = Writer::current();
    CheckpointStore::new(home)
        .write_own(&me, &[session(1), session(2)], &[])
        .expect("write checkpoint");
    let ledger = Ledger::create(home).expect("create ledger");
    ledger.commit(&completion(1, "one")).expect("commit 1");
    ledger.commit(&completion(2, "two")).expect("commit 2");
    ledger.mark_delivered("cmp_1").expect("deliver 1");
    ReceiptStore::new(home)
        .store(&receipt("proc_00000000000a", "done\n".to_owned()))
        .expect("store receipt");
}

/// Everything [`store_some`] stored is still there (only when `readable`: the
/// running sessions and the result store live in `state.db`, which a read-only
/// home cannot open, as the ledger's replay cannot).
fn assert_intact(home: &Home, fault: &str, readable: bool) {
    if !readable {
        return;
    }
    let loaded = CheckpointStore::new(home).load().expect("load checkpoint");
    let ids: Vec<&str> = loaded
        .entries
        .iter()
        .map(|e| e.session.id.as_str())
        .collect();
    assert_eq!(ids, ["proc_000000000001", "proc_000000000002"], "{fault}");
    assert_eq!(loaded.moved_aside, None, "{fault}");
    let receipt = ReceiptStore::new(home)
        .load("proc_00000000000a")
        .expect("load receipt")
        .expect("receipt kept");
    assert_eq!(receipt.output, "done\n", "{fault}");
}

fn assert_ledger_intact(home: &Home, fault: &str) {
    let ledger = Ledger::open(home)
        .expect("open ledger")
        .expect("ledger kept");
    let pending: Vec<String> = ledger
        .undelivered()
        .expect("list")
        .into_iter()
        .map(|r| r.completion_id)
        .collect();
    assert_eq!(pending, ["cmp_2"], "{fault}");
    assert_eq!(
        ledger.is_delivered("cmp_1").expect("look up"),
        Some(true),
        "{fault}"
    );
}

/// The fallback when root cannot mount: a home below a regular file. Every
/// writer refuses with `HomeMissing` and creates nothing; readers find nothing.
fn assert_home_under_a_file_is_refused(scratch: &Path) {
    let file = scratch.join("not-a-dir");
    fs::write(&file, b"x").expect("plant a regular file");
    let home = Home::new(file.join("home"));
    let fault = "fault: home path runs through a regular file (root without mount)";
    let err = CheckpointStore::new(&home)
        .write_own(&Writer::current(), &[session(1)], &[])
        .unwrap_err();
    assert!(matches!(err, Error::HomeMissing { .. }), "{fault}: {err}");
    let err = Ledger::create(&home).unwrap_err();
    assert!(matches!(err, Error::HomeMissing { .. }), "{fault}: {err}");
    let err = ReceiptStore::new(&home)
        .store(&receipt("proc_00000000000a", String::new()))
        .unwrap_err();
    assert!(matches!(err, Error::HomeMissing { .. }), "{fault}: {err}");
    assert!(Ledger::open(&home).expect("open").is_none(), "{fault}");
    assert_eq!(fs::read(&file).expect("read"), b"x", "{fault}");
}

#[test]
fn b27_b29_b38_read_only_home_gives_clear_errors_and_keeps_data() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("home");
    fs::create_dir(&dir).expect("create home");
    let root = is_root(tmp.path());
    let tmpfs = if root {
        match Tmpfs::mount(&dir, 1024) {
            Some(mount) => Some(mount),
            None => return assert_home_under_a_file_is_refused(tmp.path()),
        }
    } else {
        None
    };
    let fault = if root {
        "fault: tmpfs remounted read-only (running as root)"
    } else {
        "fault: home chmod 0500 (running as a normal user)"
    };
    let home = Home::new(&dir);
    store_some(&home);
    match &tmpfs {
        Some(mount) => mount.remount("ro"),
        None => {
            fs::set_permissions(home.root(), fs::Permissions::from_mode(0o500))
                .expect("chmod 0500");
        }
    }

    let err = CheckpointStore::new(&home)
        .write_own(&Writer::current(), &[session(3)], &[])
        .unwrap_err();
    assert!(matches!(err, Error::LedgerOpen { .. }), "{fault}: {err}");
    assert!(err.to_string().contains("writable"), "{fault}: {err}");
    let err = ReceiptStore::new(&home)
        .store(&receipt("proc_00000000000b", "x".to_owned()))
        .unwrap_err();
    assert!(matches!(err, Error::LedgerOpen { .. }), "{fault}: {err}");
    assert!(err.to_string().contains("writable"), "{fault}: {err}");
    let err = Ledger::create(&home).unwrap_err();
    assert!(matches!(err, Error::LedgerOpen { .. }), "{fault}: {err}");
    assert!(err.to_string().contains("writable"), "{fault}: {err}");
    assert_intact(&home, fault, false);
    // Replaying needs the WAL index (state.db-shm), which cannot be created
    // on a read-only home: the reader says so rather than guessing.
    let err = Ledger::open(&home).unwrap_err();
    assert!(matches!(err, Error::LedgerOpen { .. }), "{fault}: {err}");

    match &tmpfs {
        Some(mount) => mount.remount("rw"),
        None => {
            fs::set_permissions(home.root(), fs::Permissions::from_mode(0o700))
                .expect("chmod 0700");
        }
    }
    assert_intact(&home, fault, true);
    assert_ledger_intact(&home, fault);
}

#[test]
fn b27_b29_b38_full_disk_gives_clear_errors_and_keeps_data() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("home");
    fs::create_dir(&dir).expect("create home");
    // Only root can make a small file system here; a normal user cannot fill
    // the real disk politely, so it checks the fallback fault instead.
    let mount = if is_root(tmp.path()) {
        Tmpfs::mount(&dir, 512)
    } else {
        None
    };
    let Some(_mount) = mount else {
        return assert_home_under_a_file_is_refused(tmp.path());
    };
    let fault = "fault: 512 KiB tmpfs filled up (running as root)";
    let home = Home::new(&dir);
    store_some(&home);
    let ledger = Ledger::open(&home).expect("open").expect("exists");

    // Fill the file system to the last page.
    let filler = dir.join("filler");
    let mut file = File::create(&filler).expect("create filler");
    let chunk = vec![0u8; 4096];
    let full = loop {
        if let Err(e) = file.write_all(&chunk).and_then(|()| file.sync_all()) {
            break e;
        }
    };
    assert_eq!(full.raw_os_error(), Some(28), "ENOSPC, got {full}");

    let many: Vec<SessionRecord> = (16..400).map(session).collect();
    let err = CheckpointStore::new(&home)
        .write_own(&Writer::current(), &many, &[])
        .unwrap_err();
    assert!(matches!(err, Error::StoreQuery { .. }), "{fault}: {err}");
    assert!(err.to_string().contains("free space"), "{fault}: {err}");
    let err = ledger
        .commit(&completion(3, &"y".repeat(256 * 1024)))
        .unwrap_err();
    assert!(matches!(err, Error::LedgerQuery { .. }), "{fault}: {err}");
    let err = ReceiptStore::new(&home)
        .store(&receipt("proc_00000000000b", "z".repeat(150_000)))
        .unwrap_err();
    assert!(matches!(err, Error::StoreQuery { .. }), "{fault}: {err}");
    assert!(err.to_string().contains("free space"), "{fault}: {err}");
    assert_intact(&home, fault, true);
    assert!(
        !support::dir_names(&dir).iter().any(|n| n.contains(".tmp-")),
        "{fault}: failed writes leave no temp files"
    );
    drop(ledger);
    // Reopening a WAL database creates its shared-memory index (32 KiB), which a
    // disk filled to the last page may or may not have room for, depending on how
    // much the closed connection's WAL gave back: a few pages are freed first, so
    // the check is of the data, not of that race.
    file.set_len(
        file.metadata()
            .expect("filler metadata")
            .len()
            .saturating_sub(128 * 1024),
    )
    .expect("shrink the filler");
    assert_ledger_intact(&home, fault);

    // With space again, everything works.
    drop(file);
    fs::remove_file(&filler).expect("remove filler");
    CheckpointStore::new(&home)
        .write_own(&Writer::current(), &many, &[])
        .expect("write after space is freed");
    assert_eq!(
        CheckpointStore::new(&home)
            .load()
            .expect("load")
            .entries
            .len(),
        many.len() + 2
    );
}
