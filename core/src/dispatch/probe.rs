//! Whether `systemd-run --user --scope` works on this host: the probe (a no-op run
//! through it with a timeout), its cached verdict, and the availability answer the
//! dispatch decision is made on.
//!
//! Invariant: one probe at a time per [`Dispatcher`]; concurrent first callers wait for it
//! and share its verdict, which is reused for the configured verdict TTL.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::bus::{UserBus, derive_user_bus, resolve_program};
use super::{Dispatcher, PROBE_DETAIL_CHARS, SYSTEMD_RUN};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ProbeKey {
    pub(super) program: Option<PathBuf>,
    pub(super) bus_path: PathBuf,
}

/// What a successful probe learned about the host's systemd-run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ScopeSupport {
    /// systemd-run accepts `--expand-environment=no` (systemd 254 and later). Those
    /// versions expand `$VAR` in the command line of a scope by default, which would
    /// rewrite every shell command herd runs (`$f` in a loop becomes an empty string);
    /// earlier versions neither expand nor know the switch.
    pub(super) no_expand: bool,
}

/// A probe run that failed: the detail for the operator, and systemd-run's stderr.
pub(super) struct ProbeFailure {
    pub(super) detail: String,
    pub(super) stderr: String,
}

#[derive(Debug, Clone)]
pub(super) struct CachedVerdict {
    pub(super) key: ProbeKey,
    pub(super) verdict: Result<ScopeSupport, String>,
    pub(super) at: Instant,
}

pub(super) enum Availability {
    NotUnderSystemd,
    Ready {
        program: PathBuf,
        bus: UserBus,
        support: ScopeSupport,
    },
    Unavailable {
        detail: String,
        bus_path: PathBuf,
    },
}

impl Dispatcher {
    pub(super) async fn availability_inner(
        &self,
        spawn_env: &HashMap<String, String>,
    ) -> Availability {
        if !self.is_under_systemd() {
            return Availability::NotUnderSystemd;
        }
        let bus = derive_user_bus(spawn_env, self.host.uid);
        if bus.env.is_none() {
            return Availability::Unavailable {
                detail: bus.problem,
                bus_path: bus.bus_path,
            };
        }
        let program = resolve_program(SYSTEMD_RUN, spawn_env);
        let key = ProbeKey {
            program: program.clone(),
            bus_path: bus.bus_path.clone(),
        };
        let verdict = match self.fresh_verdict(&key) {
            Some(verdict) => verdict,
            None => {
                let _gate = self.probe_gate.lock().await;
                // Another caller may have probed while we waited for the gate.
                match self.fresh_verdict(&key) {
                    Some(verdict) => verdict,
                    None => {
                        let verdict = match &program {
                            Some(program) => self.probe(program, spawn_env, &bus).await,
                            None => Err(format!("{SYSTEMD_RUN} was not found on the spawn PATH")),
                        };
                        *self.cache.lock().unwrap_or_else(PoisonError::into_inner) =
                            Some(CachedVerdict {
                                key,
                                verdict: verdict.clone(),
                                at: self.clock.now(),
                            });
                        verdict
                    }
                }
            }
        };
        match (verdict, program) {
            (Ok(support), Some(program)) => Availability::Ready {
                program,
                bus,
                support,
            },
            (Ok(_), None) => Availability::Unavailable {
                detail: format!("{SYSTEMD_RUN} was not found on the spawn PATH"),
                bus_path: bus.bus_path,
            },
            (Err(detail), _) => Availability::Unavailable {
                detail,
                bus_path: bus.bus_path,
            },
        }
    }

    pub(super) fn fresh_verdict(&self, key: &ProbeKey) -> Option<Result<ScopeSupport, String>> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let cached = cache.as_ref()?;
        let age = self.clock.now().saturating_duration_since(cached.at);
        (cached.key == *key && age < self.config.verdict_ttl).then(|| cached.verdict.clone())
    }

    /// Runs `/bin/sh -c 'exit 0'` through `systemd-run --user --scope`, first with
    /// `--expand-environment=no`, and again without it when this systemd-run predates it.
    pub(super) async fn probe(
        &self,
        program: &Path,
        spawn_env: &HashMap<String, String>,
        bus: &UserBus,
    ) -> Result<ScopeSupport, String> {
        let verdict = match self.probe_once(program, spawn_env, bus, true).await {
            Ok(()) => Ok(ScopeSupport { no_expand: true }),
            Err(failure) if failure.stderr.contains("expand-environment") => self
                .probe_once(program, spawn_env, bus, false)
                .await
                .map(|()| ScopeSupport { no_expand: false })
                .map_err(|failure| failure.detail),
            Err(failure) => Err(failure.detail),
        };
        tracing::debug!(ok = verdict.is_ok(), "systemd scope probe finished");
        verdict
    }

    pub(super) async fn probe_once(
        &self,
        program: &Path,
        spawn_env: &HashMap<String, String>,
        bus: &UserBus,
        no_expand: bool,
    ) -> Result<(), ProbeFailure> {
        self.n_probes.fetch_add(1, Ordering::SeqCst);
        let failure = |detail: String| ProbeFailure {
            detail,
            stderr: String::new(),
        };
        let unit = format!(
            "herd-probe-{}-{:08x}",
            std::process::id(),
            fastrand::u32(..)
        );
        let mut command = tokio::process::Command::new(program);
        command.args(["--user", "--scope", "--quiet", "--collect"]);
        if no_expand {
            command.arg("--expand-environment=no");
        }
        command
            .args(["--unit", &unit, "--", "/bin/sh", "-c", "exit 0"])
            .env_clear()
            .envs(spawn_env)
            .envs(bus.env.iter().flatten().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let child = command
            .spawn()
            .map_err(|err| failure(format!("could not start {}: {err}", program.display())))?;
        match tokio::time::timeout(self.config.probe_timeout, child.wait_with_output()).await {
            Err(_elapsed) => Err(failure(format!(
                "{} --user --scope did not finish within {} ms",
                program.display(),
                self.config.probe_timeout.as_millis()
            ))),
            Ok(Err(err)) => Err(failure(format!(
                "could not wait for {}: {err}",
                program.display()
            ))),
            Ok(Ok(output)) if output.status.success() => Ok(()),
            Ok(Ok(output)) => {
                let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
                let said: String = stderr.trim().chars().take(PROBE_DETAIL_CHARS).collect();
                Err(ProbeFailure {
                    detail: format!(
                        "{} --user --scope failed ({}){}",
                        program.display(),
                        output.status,
                        if said.is_empty() {
                            String::new()
                        } else {
                            format!(": {said}")
                        }
                    ),
                    stderr,
                })
            }
        }
    }
}
