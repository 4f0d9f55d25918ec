//! A plugin started off the caller's path: its library is opened and its init
//! run on a thread of its own, with a deadline.
//!
//! Invariant: nothing waits on a plugin's init longer than its deadline. A call
//! into a plugin still starting waits for the init at most until the deadline (the
//! output it would transform waits, nothing else does); when the deadline passes,
//! the plugin is failed for the rest of the process with the reason, and its
//! thread is left to finish or hang on its own: a late success is logged and
//! ignored (restarting the daemon is how a plugin is tried again).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use super::{PluginHook, PluginLoadError, plugin_hook};
use crate::OutputContext;
use crate::pipeline::{Hook, HookError, HookStart};

/// How long a plugin's init may take when the daemon starts it.
pub const INIT_DEADLINE: Duration = Duration::from_secs(5);

/// Where one plugin's start stands.
enum Init {
    /// The init runs; it is failed if it has not returned by `deadline`.
    Running { deadline: Instant },
    /// Loaded at `at`.
    Ready { hook: PluginHook, at: SystemTime },
    /// Failed: the reason, for good.
    Failed(PluginLoadError),
}

struct Shared {
    init: Mutex<Init>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Init> {
        // Only this module's bookkeeping runs under the lock.
        self.init.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A plugin being started: a [`Hook`] that waits (bounded) for its init.
#[derive(Clone)]
pub(crate) struct StartingPlugin {
    name: String,
    path: PathBuf,
    deadline: Duration,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for StartingPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartingPlugin")
            .field("name", &self.name)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl StartingPlugin {
    /// Starts opening `path` (plugin `name`) on its own thread; a watchdog thread
    /// fails it when `deadline` passes first.
    pub(crate) fn start(name: &str, path: &Path, deadline: Duration) -> StartingPlugin {
        let plugin = StartingPlugin {
            name: name.to_owned(),
            path: path.to_owned(),
            deadline,
            shared: Arc::new(Shared {
                init: Mutex::new(Init::Running {
                    deadline: Instant::now() + deadline,
                }),
                changed: Condvar::new(),
            }),
        };
        let opener = plugin.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("herd-plugin-init-{name}"))
            .spawn(move || {
                let result = plugin_hook(&opener.path);
                opener.finish(result);
            });
        if let Err(err) = spawned {
            plugin.finish(Err(PluginLoadError::InitThread {
                path: path.to_owned(),
                message: err.to_string(),
            }));
            return plugin;
        }
        let watchdog = plugin.clone();
        let watched = std::thread::Builder::new()
            .name(format!("herd-plugin-wait-{name}"))
            .spawn(move || {
                // Returns once the init is settled; logs the timeout itself.
                let _ = watchdog.wait();
            });
        if let Err(err) = watched {
            // Calls still fail it at the deadline; only the log line comes later.
            tracing::debug!(plugin = name, %err, "no watchdog thread for the plugin's init");
        }
        plugin
    }

    /// The init's result, once known.
    fn finish(&self, result: Result<PluginHook, PluginLoadError>) {
        let mut init = self.shared.lock();
        match (&*init, result) {
            (Init::Running { .. }, Ok(hook)) => {
                tracing::info!(plugin = %self.name, path = %self.path.display(), "plugin loaded");
                *init = Init::Ready {
                    hook,
                    at: SystemTime::now(),
                };
            }
            (Init::Running { .. }, Err(error)) => {
                tracing::warn!(plugin = %self.name, reason = %error, "plugin failed to load");
                *init = Init::Failed(error);
            }
            (_, result) => {
                tracing::warn!(
                    plugin = %self.name,
                    succeeded = result.is_ok(),
                    "plugin init returned after its deadline; it stays off until the daemon restarts"
                );
            }
        }
        drop(init);
        self.shared.changed.notify_all();
    }

    /// Waits for the init to settle, at most until its deadline; the loaded
    /// plugin, or why there is none.
    fn wait(&self) -> Result<PluginHook, PluginLoadError> {
        let mut init = self.shared.lock();
        loop {
            match &*init {
                Init::Ready { hook, .. } => return Ok(hook.clone()),
                Init::Failed(error) => return Err(error.clone()),
                Init::Running { deadline } => {
                    let now = Instant::now();
                    if now >= *deadline {
                        let error = PluginLoadError::InitTimedOut {
                            path: self.path.clone(),
                            deadline: self.deadline,
                        };
                        tracing::warn!(plugin = %self.name, reason = %error, "plugin failed to load");
                        *init = Init::Failed(error);
                        self.shared.changed.notify_all();
                        continue;
                    }
                    let left = *deadline - now;
                    init = self
                        .shared
                        .changed
                        .wait_timeout(init, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
    }
}

/// Runs `f`, which may block, so that when this thread is a worker of a tokio
/// multi-thread runtime its other tasks move to another thread meanwhile.
fn off_runtime_worker<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

impl Hook for StartingPlugin {
    fn name(&self) -> &str {
        &self.name
    }

    fn ready(&self) -> Result<(), String> {
        let wait = || self.wait().map(|_| ()).map_err(|error| error.to_string());
        if matches!(*self.shared.lock(), Init::Running { .. }) {
            // Up to the init deadline: a runtime worker hands its other tasks on
            // meanwhile, so a slow init stalls no command (only this output).
            off_runtime_worker(wait)
        } else {
            wait()
        }
    }

    fn start(&self) -> HookStart {
        let init = self.shared.lock();
        match &*init {
            Init::Ready { at, .. } => HookStart::Ready { since: Some(*at) },
            Init::Failed(error) => HookStart::Failed {
                reason: error.to_string(),
            },
            Init::Running { deadline } if Instant::now() < *deadline => HookStart::Starting,
            Init::Running { .. } => {
                drop(init);
                // Past the deadline: settle it now (the watchdog may be late).
                match self.wait() {
                    Ok(_) => HookStart::Ready { since: None },
                    Err(error) => HookStart::Failed {
                        reason: error.to_string(),
                    },
                }
            }
        }
    }

    fn transform(
        &self,
        ctx: &OutputContext<'_>,
        output: &str,
    ) -> Result<Option<String>, HookError> {
        match self.wait() {
            Ok(hook) => hook.transform(ctx, output),
            Err(error) => Err(HookError::new(error.to_string())),
        }
    }
}
