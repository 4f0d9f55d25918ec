//! What a far host's door adds to the protocol: `herd proxy` (the program a
//! door runs on the far side) adds `proxy` (who and what it is, [`ProxyInfo`]) and
//! `proxy_env` (the environment far jobs run in) to the far daemon's `hello`
//! answer, and `proxy` to the `data` of an error answering it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Who and what runs `herd proxy` on the far side. Every field is written
/// (`null` when unknown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProxyInfo {
    /// The far herd's version.
    pub version: String,
    /// The far herd's protocol version.
    pub protocol: u32,
    /// The far user's name, when it has one.
    #[serde(default)]
    pub user: Option<String>,
    /// The far user's uid.
    pub uid: u32,
    /// `linux`, ... (Rust's `std::env::consts::OS`).
    pub os: String,
    /// `x86_64`, `aarch64`, ... (Rust's `std::env::consts::ARCH`).
    pub arch: String,
    /// The far C library's glibc version, none on a system without glibc.
    #[serde(default)]
    pub glibc: Option<String>,
    /// The `herd-shim` beside the far herd, none when it is missing (or the far
    /// herd is older than the field).
    #[serde(default)]
    pub shim: Option<FarShim>,
    /// It serves many daemon connections over one door.
    #[serde(default)]
    pub mux: bool,
}

/// A far `herd-shim` as the far proxy saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FarShim {
    /// Where it is.
    pub path: String,
    /// Its size.
    pub bytes: u64,
    /// Its SHA-256 as `herd hosts install` checked and recorded it
    /// (`herd-shim.sha256`); none when it was put there otherwise.
    #[serde(default)]
    pub sha256: Option<String>,
}

/// What `herd proxy` adds to the far daemon's `hello` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProxyHello {
    /// Who and what runs the proxy.
    pub proxy: ProxyInfo,
    /// The environment far jobs run in (a near daemon's host link passes it as a
    /// far spawn's `caller_env`).
    pub proxy_env: BTreeMap<String, String>,
}

/// What `herd proxy` adds to the `data` of an error answering `hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProxyErrorData {
    /// Who and what runs the proxy.
    pub proxy: ProxyInfo,
}
