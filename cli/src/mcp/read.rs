//! Reading only what is new: `process(action="read")` answers the output a
//! session printed since this owner's last read of it, and `write`/`submit` wait
//! `yield_ms` and answer the output produced meanwhile, so one call is one exchange.
//!
//! The cursor (lines read, per session) is herd's, kept per owner in
//! `<home>/run/owners/<owner>.read.json`, so a server started per call or after a
//! restart reads on where the last one stopped.

use super::log_page;
use herd_protocol::answers::SessionStatus;
use herd_protocol::methods as m;
use herd_protocol::params::{IdParams, StdinParams};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::Server;
use super::budget::compose_from;
use super::results::{self, Common, ProcessResult};

/// Lines fetched for the head, and for the tail, of what is new.
const HEAD_LINES: usize = 60;
const TAIL_LINES: usize = 600;

/// The longest `yield_ms` a write may ask, and the default.
pub(super) const YIELD_MAX_MS: u64 = 30_000;
pub(super) const YIELD_DEFAULT_MS: u64 = 500;

/// The most sessions a cursor file remembers (the newest reads are kept).
const CURSORS_KEPT: usize = 500;

impl Server {
    fn cursor_path(&self) -> PathBuf {
        let safe = super::owner::file_safe(&self.owner);
        super::owner::owners_dir(&self.home).join(format!("{safe}.read.json"))
    }

    /// The cursors of this owner: lines read, by session id.
    fn cursors(&self) -> BTreeMap<String, (u64, u64)> {
        std::fs::read(self.cursor_path())
            .ok()
            .and_then(|raw| serde_json::from_slice(&raw).ok())
            .unwrap_or_default()
    }

    fn save_cursor(&self, session_id: &str, lines: u64) {
        let mut cursors = self.cursors();
        let stamp = cursors.values().map(|(_, s)| *s).max().unwrap_or(0) + 1;
        cursors.insert(session_id.to_owned(), (lines, stamp));
        if cursors.len() > CURSORS_KEPT {
            let mut stamps: Vec<u64> = cursors.values().map(|(_, s)| *s).collect();
            stamps.sort_unstable();
            let floor = stamps[stamps.len() - CURSORS_KEPT];
            cursors.retain(|_, (_, s)| *s >= floor);
        }
        let path = self.cursor_path();
        let written = self
            .home
            .ensure_dir(&super::owner::owners_dir(&self.home))
            .map_err(anyhow::Error::from)
            .and_then(|_| {
                let tmp = path.with_extension("json.tmp");
                std::fs::write(&tmp, serde_json::to_vec(&cursors)?)?;
                std::fs::rename(&tmp, &path)?;
                Ok(())
            });
        if let Err(err) = written {
            tracing::warn!(error = %err, path = %path.display(), "the read cursor was not kept");
        }
    }

    /// The output of `session_id` since this owner's last read, within the budget,
    /// with its status; the cursor moves to the end. The error answer when the
    /// session or its log cannot be read.
    pub(super) async fn read_new(&self, session_id: &str) -> Result<ProcessResult, Value> {
        let polled = self.ask_for::<m::Poll>(&IdParams::new(session_id)).await?;
        let from = self
            .cursors()
            .get(session_id)
            .map_or(0, |(lines, _)| *lines) as usize;
        let head = self
            .ask_for::<m::Log>(&log_page(session_id, Some(from), HEAD_LINES))
            .await;
        let tail = self
            .ask_for::<m::Log>(&log_page(session_id, None, TAIL_LINES))
            .await;
        let (head, tail) = (head?, tail?);
        let total = tail.total_lines;
        // A log that shrank (a restored tail) reads from its start.
        let from = if from > total { 0 } else { from };
        let tail_offset = tail.offset;
        let head_lines: Vec<&str> = head.output.lines().collect();
        let tail_all: Vec<&str> = tail.output.lines().collect();
        let skip = from.saturating_sub(tail_offset).min(tail_all.len());
        let tail_start = tail_offset.max(from) - from;
        let (output, gap) = compose_from(
            from,
            &head_lines,
            &tail_all[skip..],
            tail_start,
            total - from,
            session_id,
        );
        // An unfinished last line (a prompt, a line half written or held back) is not
        // read yet: the cursor stays before it, so the next read shows it whole.
        let open = tail.last_line_open;
        self.save_cursor(
            session_id,
            (total - usize::from(open && total > from)) as u64,
        );
        Ok(ProcessResult {
            output: Some(output),
            common: Common {
                status: Some(polled.status.as_str().to_owned()),
                session_id: Some(session_id.to_owned()),
                total_lines: Some(total as u64),
                exit_code: polled.exit_code.map(Value::from),
                signal: polled.signal.map(Value::from),
                completion_reason: polled.completion_reason.map(|r| Value::from(r.as_str())),
                omitted_lines: gap.map(|(a, b)| (b - a) as u64),
                ..Common::default()
            },
            new_lines: Some((total - from) as u64),
            ..ProcessResult::default()
        })
    }

    /// `write`/`submit`: the bytes go in, then after `yield_ms` the output since the
    /// last read comes back in the same answer.
    pub(super) async fn write_and_read(
        &self,
        action: &str,
        session_id: &str,
        data: &str,
        yield_ms: u64,
    ) -> (Value, bool) {
        // A finished job takes no input: say how it ended.
        let polled = match self.ask_for::<m::Poll>(&IdParams::new(session_id)).await {
            Ok(polled) => polled,
            Err(failed) => return (failed, true),
        };
        if polled.status != SessionStatus::Running {
            let how = match (polled.exit_code, polled.signal) {
                (Some(code), _) => format!("exited with code {code}"),
                (None, Some(signal)) => format!("killed by signal {signal}"),
                (None, None) => format!("is {}", polled.status.as_str()),
            };
            let ended = Common {
                session_id: Some(session_id.to_owned()),
                ..Common::failed(format!(
                    "{session_id} has already ended ({how}): nothing was written; start it again with terminal"
                ))
            };
            return (results::to_value(&ended), true);
        }
        let params = StdinParams {
            id: session_id.to_owned(),
            data: data.to_owned(),
        };
        let written = match action {
            "submit" => self.ask_kept::<m::Submit>(&params).await,
            _ => self.ask_kept::<m::Write>(&params).await,
        };
        let written = match written {
            Ok((answer, _)) if yield_ms == 0 => return (answer, false),
            Ok((_, written)) => written,
            Err(failed) => return (failed, true),
        };
        #[expect(
            clippy::disallowed_methods,
            reason = "yield_ms is the time the caller asked to let the job answer, not a wait on a condition"
        )]
        tokio::time::sleep(Duration::from_millis(yield_ms)).await;
        match self.read_new(session_id).await {
            Ok(read) => {
                let read = ProcessResult {
                    bytes_written: written.bytes_written.map(|n| n as u64),
                    ..read
                };
                (results::to_value(&read), false)
            }
            Err(failed) => (failed, true),
        }
    }
}
