//! TEMPORARY stub of the daemon methods until herd-core lands.

use std::sync::Arc;

use herd_persistence::Home;
use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::Notify;

use crate::config::Config;
use crate::protocol::{RpcError, UNSUPPORTED};

#[derive(Debug)]
pub(crate) struct State {
    home: Home,
    stop: Arc<Notify>,
}

#[derive(Debug)]
pub(crate) enum Reply {
    Value(Value),
    Error(RpcError),
    Stream(Stream),
}

#[derive(Debug)]
pub(crate) enum Stream {}

impl Stream {
    pub(crate) async fn run(
        self,
        _state: &State,
        _reader: &mut BufReader<OwnedReadHalf>,
        _writer: &mut OwnedWriteHalf,
        _id: Value,
    ) {
        match self {}
    }
}

impl State {
    pub(crate) fn new(home: Home, config: &Config, stop: Arc<Notify>) -> anyhow::Result<State> {
        let _ = crate::guard::host(&config.guard_host_images, None);
        Ok(State { home, stop })
    }
    pub(crate) fn home(&self) -> &Home {
        &self.home
    }
    pub(crate) async fn shutdown(&self) {}
    pub(crate) async fn handle(&self, method: &str, _params: Value) -> Reply {
        match method {
            "status" => Reply::Value(json!({"pid": std::process::id()})),
            "shutdown" => {
                self.stop.notify_one();
                Reply::Value(json!({"status": "stopping"}))
            }
            _ => Reply::Error(RpcError::new(UNSUPPORTED, "stub")),
        }
    }
}
