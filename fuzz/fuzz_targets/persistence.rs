//! What herd-persistence reads back from disk, from arbitrary bytes: the checkpoint
//! (`processes.json`), a pending checkpoint entry, a result receipt of a release
//! before the store (imported into `state.db`), a shim's info
//! and exit records, a ledger row whose event (or any column) is arbitrary, and a
//! ledger database file with arbitrary bytes patched in. The crate has no public
//! parse-from-bytes functions, so each input is written where the file lives in a
//! fresh home and read through the public API, as a restarted daemon reads it.
//!
//! Property: no panic, and what is read back is what the API promises (a receipt
//! loaded for an id is that id's).
//!
//! Input format: byte 0 picks the file (modulo 8), the rest is its content (for the
//! ledger file: little-endian `u16` offset and a byte, repeated, patched into a
//! real ledger).

#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use herd_persistence::{
    CheckpointStore, CompletionRecord, Home, Ledger, ReceiptStore, ShimDir, parse_stat_start_time,
};
use libfuzzer_sys::fuzz_target;

const ID: &str = "proc_fuzz00000000";

/// Where the fuzz homes go: memory, when the machine has it, since the ledger
/// fsyncs.
fn scratch_root() -> &'static Path {
    static ROOT: OnceLock<tempfile::TempDir> = OnceLock::new();
    ROOT.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let builder = tempfile::Builder::new().prefix("herd-fuzz").tempdir_in(shm);
        builder
            .or_else(|_| tempfile::Builder::new().prefix("herd-fuzz").tempdir())
            .expect("a temp dir can be made")
    })
    .path()
}

/// A fresh, empty home.
fn fresh_home() -> (tempfile::TempDir, Home) {
    let dir = tempfile::Builder::new()
        .prefix("h")
        .tempdir_in(scratch_root())
        .expect("a temp dir can be made");
    let root = dir.path().join("home");
    std::fs::create_dir(&root).expect("the temp dir is writable");
    (dir, Home::new(root))
}

fn record(n: usize) -> CompletionRecord {
    CompletionRecord {
        completion_id: format!("c{n}"),
        session_id: ID.to_owned(),
        owner_task_id: "owner".to_owned(),
        task_id: "task".to_owned(),
        session_key: "key".to_owned(),
        event: serde_json::json!({"kind": "completion", "exit_code": 0, "n": n}),
        created_at: 1.0e9,
    }
}

/// The bytes of a real ledger holding two completions, one delivered (made once).
fn pristine_ledger() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let (_dir, home) = fresh_home();
        {
            let ledger = Ledger::create(&home).expect("a ledger can be created");
            ledger.commit(&record(1)).expect("commit");
            ledger.commit(&record(2)).expect("commit");
            ledger.mark_delivered("c1").expect("mark");
        }
        std::fs::read(home.ledger_path()).expect("the ledger was written")
    })
}

fn write(path: &Path, bytes: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("the home is writable");
    }
    std::fs::write(path, bytes).expect("the home is writable");
}

/// Reads everything an opened ledger offers; errors are fine, panics are not.
fn exercise(home: &Home) {
    if let Ok(Some(ledger)) = Ledger::open(home) {
        let _ = ledger.undelivered();
        let _ = ledger.is_delivered("c1");
        let _ = ledger.is_delivered("c2");
        let _ = ledger.mark_delivered("c2");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, content)) = data.split_first() else {
        return;
    };
    let (_dir, home) = fresh_home();
    match selector % 8 {
        0 => {
            write(&home.checkpoint_path(), content);
            if let Ok(loaded) = CheckpointStore::new(&home).load() {
                for entry in &loaded.entries {
                    assert!(!entry.session.id.is_empty(), "{loaded:?}");
                }
            }
        }
        1 => {
            write(
                &home.checkpoint_pending_dir().join(format!("{ID}.json")),
                content,
            );
            let _ = CheckpointStore::new(&home).load();
        }
        2 => {
            // A receipt of a release before the store, imported into `state.db`
            // when the store is first opened.
            write(&home.results_dir().join(format!("{ID}.json")), content);
            let store = ReceiptStore::new(&home);
            if let Ok(Some(receipt)) = store.load(ID) {
                assert_eq!(receipt.id, ID, "a receipt loaded for {ID} is another's");
            }
            let _ = store.prune();
        }
        3 | 4 => {
            let shim = ShimDir::new(&home, ID).expect("a valid id");
            if selector % 8 == 3 {
                write(&shim.info_path(), content);
                let _ = shim.read_info();
            } else {
                write(&shim.exit_path(), content);
                let _ = shim.read_exit();
            }
        }
        5 => {
            // A row written by something else than herd: any text or blob in the
            // event column, any value in the others.
            write(&home.ledger_path(), pristine_ledger());
            let text = String::from_utf8_lossy(content);
            {
                let conn = rusqlite::Connection::open(home.ledger_path()).expect("opens");
                let event: rusqlite::types::Value = match content.first() {
                    Some(b) if b % 3 == 0 => rusqlite::types::Value::Blob(content.to_vec()),
                    Some(b) if b % 3 == 1 => rusqlite::types::Value::Integer(i64::from(*b)),
                    _ => rusqlite::types::Value::Text(text.clone().into_owned()),
                };
                let created_at: rusqlite::types::Value = match content.get(1) {
                    Some(b) if b % 2 == 0 => rusqlite::types::Value::Text(text.into_owned()),
                    _ => rusqlite::types::Value::Real(f64::from(content.len() as u32)),
                };
                let _ = conn.execute(
                    "INSERT INTO completions (completion_id, session_id, owner_task_id, task_id, \
                     session_key, event, created_at) VALUES ('c3', ?1, 'o', 't', 'k', ?2, ?3)",
                    rusqlite::params![
                        String::from_utf8_lossy(content.get(2..10).unwrap_or_default()),
                        event,
                        created_at
                    ],
                );
            }
            exercise(&home);
        }
        6 => {
            let mut bytes = pristine_ledger().to_vec();
            for patch in content.chunks_exact(3) {
                let at = usize::from(u16::from_le_bytes([patch[0], patch[1]]));
                if let Some(b) = bytes.get_mut(at % pristine_ledger().len()) {
                    *b = patch[2];
                }
            }
            write(&home.ledger_path(), &bytes);
            exercise(&home);
        }
        _ => {
            let _ = parse_stat_start_time(&String::from_utf8_lossy(content));
        }
    }
});
