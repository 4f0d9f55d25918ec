//! Answers kept as the daemon wrote them: for a caller that reads a long answer
//! (a `list` of thousands of rows) into its own types, or prints it, with no `Value`
//! of it built.

use herd_protocol::Method;
use serde_json::Value;

use super::{CallError, Client, Line, MAX_RESPONSE_BYTES, liveness, params_of, protocol};
use crate::protocol::RpcError;

impl Client {
    /// Method `M` with typed params; its answer as the bytes the daemon wrote (the
    /// line's `result`), for a caller that reads a long answer into its own types
    /// or prints it, with no `Value` of it built.
    ///
    /// # Errors
    /// As [`Client::request`]'s.
    pub(crate) async fn ask_raw<M: Method>(
        &mut self,
        params: &M::Params,
    ) -> anyhow::Result<Box<serde_json::value::RawValue>> {
        let params = params_of(params)?;
        let daemon = self.daemon.clone();
        let deadline = liveness::deadline_for(M::NAME, &params);
        let answer = tokio::select! {
            answer = self.call_raw(M::NAME, params) => answer,
            why = liveness::watch(&daemon, M::NAME, deadline) => {
                Err(CallError::Io(std::io::Error::new(std::io::ErrorKind::TimedOut, why)))
            }
        };
        answer.map_err(CallError::into_anyhow)
    }

    /// [`Client::call_unwatched`], the result left as the daemon wrote it.
    async fn call_raw(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<Box<serde_json::value::RawValue>, CallError> {
        let id = self.send(method, params).await.map_err(CallError::Io)?;
        loop {
            let line = protocol::read_line(&mut self.reader, &mut self.buf, MAX_RESPONSE_BYTES)
                .await
                .map_err(CallError::Io)?;
            match line {
                Line::Complete => {}
                Line::Eof => {
                    return Err(CallError::Io(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the daemon closed the connection",
                    )));
                }
                Line::TooLong => {
                    return Err(CallError::Io(std::io::Error::other(
                        "the daemon sent an oversized line",
                    )));
                }
            }
            let message: RawResponse =
                serde_json::from_slice(&self.buf).map_err(|e| CallError::Io(e.into()))?;
            let ours = message.id == id || (message.id.is_null() && message.error.is_some());
            if message.method.is_some() || !ours {
                continue;
            }
            if let Some(error) = message.error {
                return Err(CallError::Rpc(error));
            }
            return message.result.ok_or_else(|| {
                CallError::Io(std::io::Error::other("the daemon's answer has no result"))
            });
        }
    }
}

/// A response line whose result is kept as the daemon wrote it.
#[derive(Debug, serde::Deserialize)]
struct RawResponse {
    #[serde(default)]
    id: Value,
    #[serde(default)]
    result: Option<Box<serde_json::value::RawValue>>,
    #[serde(default)]
    error: Option<RpcError>,
    #[serde(default)]
    method: Option<String>,
}
