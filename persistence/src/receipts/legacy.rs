//! Receipts of herd releases before the store: `<home>/results/<id>.json`, one
//! JSON object per file (the [`ResultReceipt`] fields plus `"version": 1`).
//! Imported into the `results` table when the store is first opened, in one
//! transaction; each file is removed once that transaction committed, and the
//! directory once empty. A file that is not a receipt of this id is left in place
//! with a warning (it only concerns that one session).

use std::fs;
use std::path::Path;

use rusqlite::Connection;
use serde::Deserialize;

use super::{RECEIPT_VERSION, ResultReceipt, is_legacy_file, tail_start, validate_id};
use crate::Home;

/// The on-disk shape of a receipt file.
#[derive(Deserialize)]
struct FileV1 {
    version: u64,
    #[serde(flatten)]
    receipt: ResultReceipt,
}

/// Imports `<home>/results/*.json` into `conn`'s `results` table. Failures are
/// logged: the files stay and the next open tries again.
pub(super) fn import(home: &Home, conn: &Connection, db: &Path) {
    let dir = home.results_dir();
    let Ok(entries) = fs::read_dir(&dir) else {
        return;
    };
    let mut found: Vec<(std::path::PathBuf, ResultReceipt)> = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
            // A temp file of an interrupted write: never a committed receipt.
            if name.to_str().is_some_and(|n| n.starts_with('.')) {
                let _ = fs::remove_file(&path);
            }
            continue;
        };
        if !is_legacy_file(&path) || validate_id(id).is_err() {
            continue;
        }
        match read(&path, id) {
            Ok(receipt) => found.push((path, receipt)),
            Err(why) => {
                tracing::warn!(path = %path.display(), why, "result receipt file not imported; it is left in place");
            }
        }
    }
    if found.is_empty() {
        let _ = fs::remove_dir(&dir);
        return;
    }
    if let Err(error) = insert(home, conn, &found) {
        tracing::warn!(db = %db.display(), %error, "result receipt files not imported; they stay and are imported at the next start");
        return;
    }
    tracing::info!(n = found.len(), db = %db.display(), "result receipt files imported into the state database");
    for (path, _) in &found {
        if let Err(error) = fs::remove_file(path) {
            tracing::warn!(path = %path.display(), %error, "imported result receipt file not removed");
        }
    }
    let _ = fs::remove_dir(&dir);
}

fn read(path: &Path, id: &str) -> Result<ResultReceipt, String> {
    let bytes = fs::read(path).map_err(|e| e.to_string())?;
    let file: FileV1 = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    if file.version != RECEIPT_VERSION {
        return Err(format!("unknown receipt version {}", file.version));
    }
    if file.receipt.id != id {
        return Err(format!("the receipt is for {}, not {id}", file.receipt.id));
    }
    Ok(file.receipt)
}

fn insert(
    home: &Home,
    conn: &Connection,
    found: &[(std::path::PathBuf, ResultReceipt)],
) -> rusqlite::Result<()> {
    let tx = conn.unchecked_transaction()?;
    {
        let mut stmt = tx.prepare(
            "INSERT OR IGNORE INTO results (session_id, name, owner_task_id, session_key,
                 started_at, finished_at, size_bytes, receipt, output, spawn)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, NULL)",
        )?;
        for (_, receipt) in found {
            let mut r = receipt.clone();
            let mut output = std::mem::take(&mut r.output);
            if let Some(start) = tail_start(&output, super::MAX_RECEIPT_OUTPUT_CHARS) {
                output.drain(..start);
                r.output_cut = true;
            }
            let log = fs::metadata(home.session_log_path(&r.id)).map_or(0, |m| m.len());
            let size = i64::try_from(log.saturating_add(output.len() as u64)).unwrap_or(i64::MAX);
            let json = serde_json::to_string(&r).unwrap_or_default();
            stmt.execute(rusqlite::params![
                r.id,
                r.name,
                r.owner_task_id,
                r.session_key,
                r.started_at,
                r.finished_at,
                size,
                json,
                output,
            ])?;
        }
    }
    tx.commit()
}
