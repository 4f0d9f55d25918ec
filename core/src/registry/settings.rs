//! The registry's settings as its rooms read them: the [`RegistryConfig`] it was
//! built with, without the output pipeline.
//!
//! Invariant: no room but the hooks room (`hooks_room`) reaches the pipeline.
//! The config a registry is given carries it, so the hooks room keeps that config
//! behind a private field and every other room reads its settings from here: a
//! copy of the fields they use, taken once at construction. [`Settings::of`]
//! names every field of the config, so a field added there does not compile
//! until it is either copied here or named as not read by the rooms.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::RegistryConfig;

/// What the rooms read of the registry's config (see the module docs).
#[derive(Debug)]
pub(crate) struct Settings {
    pub(super) shell: Vec<String>,
    pub(super) direct_exec: bool,
    pub(super) buffer_bytes: usize,
    pub(super) log_cap_bytes: u64,
    pub(super) result_ttl: Duration,
    pub(super) completion_output_chars: usize,
    pub(super) env_deny: crate::spawn::DenyList,
    pub(super) kill_grace: Duration,
    pub(super) kill_leftovers: bool,
    pub(super) default_limits: crate::Limits,
    pub(super) wait_cap: Duration,
    pub(super) idle_drain: Duration,
    pub(super) guard: Option<herd_guards::Host>,
    pub(super) heartbeat_floor: Duration,
    pub(super) pty_unavailable: bool,
    pub(super) dispatcher: Option<Arc<crate::Dispatcher>>,
    pub(super) tools_env: Option<std::collections::HashMap<String, String>>,
    pub(super) require_restart_safe_scope: bool,
    pub(super) shim: Option<PathBuf>,
}

impl Settings {
    /// The settings of `config`, its pipeline left out.
    pub(super) fn of(config: &RegistryConfig) -> Settings {
        let RegistryConfig {
            shell,
            direct_exec,
            buffer_bytes,
            log_cap_bytes,
            result_ttl,
            completion_output_chars,
            env_deny,
            kill_grace,
            kill_leftovers,
            default_limits,
            wait_cap,
            idle_drain,
            guard,
            // The hooks room's alone.
            pipeline: _,
            heartbeat_floor,
            pty_unavailable,
            dispatcher,
            tools_env,
            require_restart_safe_scope,
            shim,
            // Read by the rooms' constructors only, from the config itself.
            log_budget_bytes: _,
            finished_ttl: _,
            finished_cap: _,
            clock: _,
            notifications: _,
            running_store: _,
            ledger: _,
            result_store: _,
            queue_store: _,
            queue_cap: _,
        } = config;
        Settings {
            shell: shell.clone(),
            direct_exec: *direct_exec,
            buffer_bytes: *buffer_bytes,
            log_cap_bytes: *log_cap_bytes,
            result_ttl: *result_ttl,
            completion_output_chars: *completion_output_chars,
            env_deny: crate::spawn::DenyList::new(env_deny),
            kill_grace: *kill_grace,
            kill_leftovers: *kill_leftovers,
            default_limits: *default_limits,
            wait_cap: *wait_cap,
            idle_drain: *idle_drain,
            guard: guard.clone(),
            heartbeat_floor: *heartbeat_floor,
            pty_unavailable: *pty_unavailable,
            dispatcher: dispatcher.clone(),
            tools_env: tools_env.clone(),
            require_restart_safe_scope: *require_restart_safe_scope,
            shim: shim.clone(),
        }
    }
}
