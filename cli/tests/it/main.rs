//! End-to-end tests of the `herd` binary: the real daemon, real sockets, real jobs.
//!
//! Every test gets its own temporary home and a [`support::Env`] whose `Drop`
//! stops the daemon it started, so no test leaves a daemon behind.

mod attach;
mod clients;
mod contain;
mod daemon;
mod delegate;
mod dispatch;
mod exactly_once;
mod full_disk;
mod guard;
mod home_path;
mod hosts;
mod hosts_blips;
mod hosts_ssh;
mod hosts_whole;
mod hygiene;
mod jobs;
mod lifecycle;
mod linkage;
mod logs_frames;
mod logs_raw;
mod logs_splice;
mod mcp;
mod mcp_budget;
mod mcp_owners;
mod mcp_tools;
mod netns;
mod people;
mod pipelined;
mod plugins;
mod podman;
mod pool;
mod props;
mod protocol1;
mod queue;
mod ready;
mod remote;
mod restarts;
mod restore;
mod retention;
mod secrets;
mod service;
mod shim;
mod spawn_limits;
mod sshd;
mod store;
mod store_live;
// Minutes long: built only with --release, for `cargo xtask soak`.
#[cfg(not(debug_assertions))]
mod soak;
#[cfg(not(debug_assertions))]
mod soak_store;
mod support;
mod tools;
mod top;
mod top_far;
mod wire_schema;
mod wire_schema_daemon;
