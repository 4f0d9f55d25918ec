//! The host link: the local daemon's connections to other hosts' herds (issue 15).
//!
//! Each `[hosts.NAME]` gets one [`Link`], opened on first use through the host's
//! door (`remote/door.rs`: the configured argv, ending in `herd proxy` on the far
//! side) and kept while anything of that host is live. Requests about a far job
//! are routed here by their id (`NAME:proc_<12 hex>`, prefixes after the colon):
//! the far part goes to the far daemon, and every `session_id` in the answer comes
//! back qualified. Local ids never come here.
//!
//! Three kinds of traffic, three doors, because the far daemon answers one
//! connection's requests in order and a streaming method takes its connection
//! over:
//! - the *control* door carries every short request (spawn, poll, log, kill,
//!   write, list, drain with a lease and its ack), multiplexed: ids are remapped
//!   and answers matched back to their callers, so any number of local clients
//!   share it;
//! - a *long call* (`wait`, `logs.follow`, `logs.dump`) gets a door of its own, opened on
//!   demand and closed with it (a wait that lasts an hour must not stall the
//!   host's other requests, and a local client that leaves kills its door, which
//!   ends the far wait or stream);
//! - the *events* door runs `events.follow` with `peek` for this home's far
//!   owner while a far job can still produce events: it only says that something
//!   is pending; the events themselves are taken over the control door.
//!
//! Exactly once. The far jobs of this home belong to one far owner,
//! `herd-home-<id>`, where the id is stable per home (`hosts/home_id`). The link
//! keeps a durable map far id -> local owner (`hosts/NAME.json`, written before a
//! spawn is answered). It drains the far owner with a lease, publishes each event
//! into the local owner's queue under the qualified id and a key (completions are
//! committed to the home's ledger, keyed by the qualified id; heartbeats by their
//! sequence number, watch events by their content, those keys kept in the map
//! file), and only then acknowledges the lease. A crash, a cut or a restart
//! between the commit and the acknowledgement puts the events back in the far
//! queue (a lease lives on its connection); the next drain brings them again and
//! the keys drop them. A restart of this daemon reloads the map and catches up.
//!
//! Environment: a far job runs in the far proxy's environment (its hello says
//! what it is) plus the explicit `env` and `forward_env`; the local caller's
//! environment never crosses the door.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use herd_core::{External, Registry, SessionId};
use herd_persistence::Home;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{Notify, mpsc, oneshot};

use super::connection::write;
use crate::config::{Config, HostConfig, Private, open_private};
use crate::protocol::{
    self, HOST_UNREACHABLE, INVALID_PARAMS, Line, MAX_RESPONSE_BYTES, NOT_FOUND, Response, RpcError,
};
use crate::remote::door;

/// What a far daemon must serve for the link to use it.
const FAR_NEEDS: &[&str] = &["drain.lease", "events.pending", "logs.follow.result"];

/// How long a door may take to open and answer `hello`.
const OPEN_DEADLINE: Duration = door::HELLO_DEADLINE;

/// A command that needs a host whose door failed to open twice in a row tries
/// it again at most this often; in between it is told at once that the host is
/// unreachable (one failure, e.g. a door killed while opening, is retried).
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// A control door with nothing asked of it for this long is closed (the next
/// request opens another).
const IDLE_CLOSE: Duration = Duration::from_secs(300);

/// The event loop's back-off between reconnects: from the first to the last.
const BACKOFF_FIRST: Duration = Duration::from_millis(200);
const BACKOFF_LAST: Duration = Duration::from_secs(10);

/// How many event keys a host's map file keeps (the newest): far more than one
/// lease can hold, so a replayed lease is always recognised.
const KEPT_KEYS: usize = 4096;

/// The methods that take an `id` and may name a far job.
const ID_METHODS: &[&str] = &[
    "lookup",
    "poll",
    "log",
    "log_chunk",
    "wait",
    "kill",
    "restart",
    "write",
    "submit",
    "close",
    "resize",
    "adopt",
    "handoff",
    "logs.follow",
    "logs.dump",
];

/// The hosts of this home and their links.
#[derive(Debug)]
pub(crate) struct Hosts {
    home: Home,
    registry: Registry,
    configs: BTreeMap<String, HostConfig>,
    /// This home's owner on every far host.
    far_owner: String,
    links: Mutex<HashMap<String, Arc<Link>>>,
}

/// What [`Hosts::route`] did with a request.
#[derive(Debug)]
pub(crate) enum Routed {
    /// A far host's: the answer.
    Reply(super::methods::Reply),
    /// A local request, handed back unchanged.
    Local(Value),
}

/// A long call on a door of its own (`logs.follow`), run by the connection.
#[derive(Debug)]
pub(crate) struct RemoteStream {
    link: Arc<Link>,
    method: String,
    params: Value,
}

/// One host's link.
#[derive(Debug)]
struct Link {
    name: String,
    config: HostConfig,
    far_owner: String,
    registry: Registry,
    path: std::path::PathBuf,
    /// The control connection, opened on demand.
    control: tokio::sync::Mutex<Option<Control>>,
    status: Mutex<Status>,
    book: Mutex<Book>,
    /// Serialises writes of the map file.
    saving: Mutex<()>,
    /// The far proxy's environment, from its hello.
    proxy_env: Mutex<Option<BTreeMap<String, String>>>,
    /// Woken when a job that produces events is added.
    wake: Notify,
    events_started: std::sync::atomic::AtomicBool,
}

/// Whether a host answers.
#[derive(Debug, Clone, Default)]
enum Status {
    /// Never tried.
    #[default]
    Idle,
    /// The control door is open.
    Connected { since: SystemTime },
    /// The last attempt failed.
    Unreachable {
        since: SystemTime,
        /// When a door last failed to open; `None` when an open door closed
        /// (the next command tries again at once).
        tried: Option<Instant>,
        /// Opens that failed in a row.
        failures: u32,
        message: String,
    },
}

/// The durable part of a link: far jobs and the keys of events published.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Book {
    #[serde(default)]
    jobs: BTreeMap<String, Job>,
    #[serde(default)]
    keys: VecDeque<String>,
}

/// One far job as this home knows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Job {
    /// The local owner its events go to.
    owner: String,
    /// The task id the caller gave (the far side gets the owner).
    task_id: String,
    /// It asked for completions, heartbeats or watch wakes.
    events: bool,
    /// Known to have finished.
    finished: bool,
    /// The last row a list or poll showed (qualified), for ps while unreachable.
    #[serde(default)]
    row: Option<Value>,
}

/// An open control door: requests go in on `tx`, answers come back on their
/// oneshot. The task that owns the door ends (and kills it) when `tx` closes or
/// the door does.
#[derive(Debug)]
struct Control {
    tx: mpsc::UnboundedSender<Outgoing>,
}

type Answer = Result<Value, RpcError>;

#[derive(Debug)]
struct Outgoing {
    method: String,
    params: Value,
    reply: oneshot::Sender<Answer>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Hosts {
    /// The hosts of `config`; links with live far jobs in their map files are
    /// loaded and their event loops started (catching up on what happened while
    /// this daemon was away).
    ///
    /// # Errors
    /// The home's `hosts/` directory or its id cannot be made.
    pub(crate) fn new(home: &Home, registry: Registry, config: &Config) -> anyhow::Result<Hosts> {
        let dir = home.ensure_dir(&home.root().join("hosts"))?;
        home.secure_dir(&dir)?;
        let far_owner = format!("herd-home-{}", home_id(&dir)?);
        let hosts = Hosts {
            home: home.clone(),
            registry,
            configs: config.hosts.clone(),
            far_owner,
            links: Mutex::new(HashMap::new()),
        };
        for name in hosts.configs.keys() {
            if dir.join(format!("{name}.json")).exists()
                && let Ok(link) = hosts.link(name)
            {
                link.start_events();
            }
        }
        Ok(hosts)
    }

    /// The link of host `name`, made on first use.
    fn link(&self, name: &str) -> Result<Arc<Link>, RpcError> {
        let Some(config) = self.configs.get(name) else {
            return Err(unknown_host(name, &self.configs));
        };
        let mut links = lock(&self.links);
        if let Some(link) = links.get(name) {
            return Ok(Arc::clone(link));
        }
        let path = self.home.root().join("hosts").join(format!("{name}.json"));
        let book = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|err| {
                tracing::warn!(host = name, error = %err, "host map unreadable; starting empty");
                Book::default()
            }),
            Err(_) => Book::default(),
        };
        let link = Arc::new(Link {
            name: name.to_owned(),
            config: config.clone(),
            far_owner: self.far_owner.clone(),
            registry: self.registry.clone(),
            path,
            control: tokio::sync::Mutex::new(None),
            status: Mutex::new(Status::Idle),
            book: Mutex::new(book),
            saving: Mutex::new(()),
            proxy_env: Mutex::new(None),
            wake: Notify::new(),
            events_started: std::sync::atomic::AtomicBool::new(false),
        });
        links.insert(name.to_owned(), Arc::clone(&link));
        Ok(link)
    }

    /// Routes a request about a far host; hands local ones back.
    pub(crate) async fn route(&self, method: &str, params: Value) -> Routed {
        use super::methods::Reply;
        let reply = |answer: Answer| {
            Routed::Reply(match answer {
                Ok(value) => Reply::Value(value),
                Err(err) => Reply::Error(err),
            })
        };
        if method == "hosts" {
            return reply(Ok(self.states()));
        }
        if method == "spawn" {
            let Some(host) = params.get("host").cloned() else {
                return Routed::Local(params);
            };
            return match host {
                Value::Null => Routed::Local(strip(params, &["host"])),
                Value::String(name) => match self.link(&name) {
                    Ok(link) => reply(link.spawn(params).await),
                    Err(err) => reply(Err(err)),
                },
                _ => reply(Err(RpcError::new(
                    INVALID_PARAMS,
                    "invalid host: it must be a host name of config.toml's [hosts.NAME]",
                ))),
            };
        }
        if !ID_METHODS.contains(&method) {
            return Routed::Local(params);
        }
        let Some((host, far)) = params
            .get("id")
            .and_then(Value::as_str)
            .and_then(|id| id.split_once(':'))
            .map(|(h, f)| (h.to_owned(), f.to_owned()))
        else {
            return Routed::Local(params);
        };
        let link = match self.link(&host) {
            Ok(link) => link,
            Err(err) => return reply(Err(err)),
        };
        let mut params = params;
        params["id"] = Value::String(far);
        match method {
            "logs.follow" | "logs.dump" => Routed::Reply(Reply::Stream(
                super::methods::Stream::Remote(RemoteStream {
                    link,
                    method: method.to_owned(),
                    params,
                }),
            )),
            "wait" => reply(link.long_call(method, params).await),
            "handoff" => reply(link.handoff(params).await),
            "restart" => reply(link.restart(params).await),
            _ => reply(link.call(method, params).await),
        }
    }

    /// Whether a `list` asks for far hosts (`host` or `all_hosts`).
    pub(crate) fn wants(params: &Value) -> bool {
        params.get("host").is_some_and(|h| !h.is_null())
            || params.get("all_hosts").and_then(Value::as_bool) == Some(true)
    }

    /// `list` with `host` (that host's jobs of this home) or `all_hosts` (every
    /// host's, after `local`, the local rows): rows carry `host`, and a host that
    /// does not answer shows its jobs' last known rows with its status.
    pub(crate) async fn list(&self, params: Value, local: Option<Vec<Value>>) -> Answer {
        let names: Vec<String> = match params.get("host") {
            Some(Value::String(name)) => {
                if !self.configs.contains_key(name) {
                    return Err(unknown_host(name, &self.configs));
                }
                vec![name.clone()]
            }
            Some(Value::Null) | None => self.configs.keys().cloned().collect(),
            Some(_) => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    "invalid host: it must be a host name",
                ));
            }
        };
        let mut rows: Vec<Value> = local
            .unwrap_or_default()
            .into_iter()
            .map(|mut row| {
                row["host"] = Value::Null;
                row
            })
            .collect();
        let mut states = Vec::new();
        let params = strip(params, &["host", "all_hosts"]);
        // Every host at once: one whose door hangs delays the answer by its own
        // deadline, not by the sum of them.
        let links = names
            .iter()
            .map(|name| self.link(name))
            .collect::<Result<Vec<_>, _>>()?;
        let answers = futures::future::join_all(links.iter().map(|link| link.list(&params))).await;
        for (mut far_rows, state) in answers {
            rows.append(&mut far_rows);
            states.push(state);
        }
        Ok(json!({"processes": rows, "hosts": states}))
    }

    /// Every host with its link's status (method `hosts`).
    fn states(&self) -> Value {
        let mut out = Vec::new();
        for name in self.configs.keys() {
            let link = lock(&self.links).get(name).cloned();
            out.push(match link {
                Some(link) => link.state(),
                None => json!({"name": name, "status": "idle"}),
            });
        }
        json!({"hosts": out})
    }
}

/// The error for a host that is not configured (the CLI exits 2).
fn unknown_host(name: &str, configs: &BTreeMap<String, HostConfig>) -> RpcError {
    let known = if configs.is_empty() {
        "no hosts are configured".to_owned()
    } else {
        format!(
            "the configured hosts are {}",
            configs.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    };
    RpcError {
        code: NOT_FOUND,
        message: format!(
            "unknown host `{name}`: {known}; add a [hosts.{name}] table to config.toml (`herd hosts list` shows them)"
        ),
        data: Some(json!({"hosts": configs.keys().collect::<Vec<_>>()})),
    }
}

/// `params` without `keys`.
fn strip(mut params: Value, keys: &[&str]) -> Value {
    if let Some(object) = params.as_object_mut() {
        for key in keys {
            object.remove(*key);
        }
    }
    params
}

/// This home's stable id, made once.
fn home_id(dir: &std::path::Path) -> anyhow::Result<String> {
    use std::io::Write;
    let path = dir.join("home_id");
    if let Ok(text) = std::fs::read_to_string(&path) {
        let id = text.trim();
        if id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(id.to_owned());
        }
    }
    let mut random = [0u8; 8];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut random)?;
    let id = format!("{:016x}", u64::from_ne_bytes(random));
    let tmp = dir.join("home_id.tmp");
    let mut file = open_private(&tmp, Private::Truncate)?;
    writeln!(file, "{id}")?;
    file.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    Ok(id)
}

/// Seconds since `at`, and `at` as RFC 3339.
fn since(at: SystemTime) -> (u64, String) {
    let ago = SystemTime::now()
        .duration_since(at)
        .map_or(0, |d| d.as_secs());
    let stamp = herd_core::rfc3339(at);
    (ago, stamp)
}

impl Link {
    /// The error for this host being unreachable (the CLI exits 3).
    fn unreachable(&self) -> RpcError {
        let status = lock(&self.status).clone();
        let (since_text, message) = match status {
            Status::Unreachable {
                since: at, message, ..
            } => {
                let (ago, stamp) = since(at);
                (format!("since {stamp} ({ago}s ago)"), message)
            }
            _ => ("just now".to_owned(), "the door closed".to_owned()),
        };
        RpcError {
            code: HOST_UNREACHABLE,
            message: format!("host {} is unreachable {since_text}: {message}", self.name),
            data: Some(json!({"host": self.name})),
        }
    }

    /// Records that the host did not answer: `failed_open` when its door did not
    /// open (commands then fail at once for [`RETRY_AFTER`]), else an open door
    /// closed.
    fn mark_unreachable(&self, message: String, failed_open: bool) {
        let mut status = lock(&self.status);
        let (since, failures) = match &*status {
            Status::Unreachable {
                since, failures, ..
            } => (*since, *failures),
            _ => (SystemTime::now(), 0),
        };
        tracing::info!(host = %self.name, %message, "host unreachable");
        *status = Status::Unreachable {
            since,
            tried: failed_open.then(Instant::now),
            failures: failures + u32::from(failed_open),
            message,
        };
    }

    fn state(&self) -> Value {
        let (live, total) = {
            let book = lock(&self.book);
            (
                book.jobs.values().filter(|j| !j.finished).count(),
                book.jobs.len(),
            )
        };
        let mut state = json!({"name": self.name, "jobs_live": live, "jobs_known": total});
        match lock(&self.status).clone() {
            Status::Idle => state["status"] = json!("idle"),
            Status::Connected { since: at } => {
                state["status"] = json!("connected");
                state["since"] = json!(since(at).1);
            }
            Status::Unreachable {
                since: at, message, ..
            } => {
                state["status"] = json!("unreachable");
                state["since"] = json!(since(at).1);
                state["message"] = json!(message);
            }
        }
        state
    }

    fn proxy_env(&self) -> Option<BTreeMap<String, String>> {
        lock(&self.proxy_env).clone()
    }

    /// Opens this host's door and greets the far herd; the failure is recorded
    /// as the host's status.
    async fn open(&self) -> Result<door::Door, RpcError> {
        match door::open(&self.name, &self.config, OPEN_DEADLINE).await {
            Ok(door) => {
                // Delivery once needs the far side's leased drains and pending
                // notes; an older far herd is refused, not half used.
                let lacking: Vec<&str> = FAR_NEEDS
                    .iter()
                    .copied()
                    .filter(|c| !door.hello.capabilities.iter().any(|have| have == c))
                    .collect();
                if !lacking.is_empty() {
                    let message = format!(
                        "the far herd ({}) lacks {}; install this version there (`herd hosts install {}`) and restart its daemon",
                        door.hello.daemon,
                        lacking.join(", "),
                        self.name
                    );
                    door.close().await;
                    self.mark_unreachable(message, true);
                    return Err(self.unreachable());
                }
                if let Some(env) = door.hello.proxy_env.clone() {
                    *lock(&self.proxy_env) = Some(env);
                }
                let mut status = lock(&self.status);
                if !matches!(*status, Status::Connected { .. }) {
                    *status = Status::Connected {
                        since: SystemTime::now(),
                    };
                }
                Ok(door)
            }
            Err(err) => {
                let text = err.to_string();
                self.mark_unreachable(text.replace('\n', " "), true);
                Err(self.unreachable())
            }
        }
    }

    /// The control connection's sender, opening the door when none is open.
    async fn control(self: &Arc<Self>) -> Result<mpsc::UnboundedSender<Outgoing>, RpcError> {
        let mut slot = self.control.lock().await;
        if let Some(control) = slot.as_ref()
            && !control.tx.is_closed()
        {
            return Ok(control.tx.clone());
        }
        *slot = None;
        let tried_just_now = matches!(
            &*lock(&self.status),
            Status::Unreachable { tried: Some(tried), failures, .. }
                if *failures >= 2 && tried.elapsed() < RETRY_AFTER
        );
        if tried_just_now {
            return Err(self.unreachable());
        }
        let door = self.open().await?;
        let (tx, rx) = mpsc::unbounded_channel();
        let (child, reader, writer, stderr) = door.into_parts();
        let link = Arc::clone(self);
        tokio::spawn(async move {
            let Some(why) = serve_control(child, reader, writer, rx).await else {
                tracing::debug!(host = %link.name, "idle control door closed");
                let mut status = lock(&link.status);
                if matches!(*status, Status::Connected { .. }) {
                    *status = Status::Idle;
                }
                return;
            };
            let said = stderr.text();
            let said = said.lines().last().unwrap_or("").trim().to_owned();
            let message = if said.is_empty() {
                why
            } else {
                format!("{why}; the door said: {said}")
            };
            link.mark_unreachable(message, false);
        });
        *slot = Some(Control { tx: tx.clone() });
        Ok(tx)
    }

    /// Calls `method` over the control door; the answer's ids come back qualified.
    async fn call(self: &Arc<Self>, method: &str, params: Value) -> Answer {
        let answer = self.call_raw(method, params).await?;
        Ok(self.qualify(answer))
    }

    /// Calls `method` over the control door, the answer as the far side gave it.
    /// A door found closed under a request that changes nothing when repeated is
    /// reopened and the request sent once more; one that starts or writes
    /// something is not repeated (it may have been done).
    async fn call_raw(self: &Arc<Self>, method: &str, params: Value) -> Answer {
        let repeatable = !matches!(method, "spawn" | "write" | "submit" | "close" | "restart");
        match self.call_once(method, params.clone()).await {
            Err(err) if err.code == HOST_UNREACHABLE && repeatable && !self.open_failed() => {
                self.call_once(method, params).await
            }
            answer => answer,
        }
    }

    /// Whether the last attempt to open the door failed (rather than a door closing).
    fn open_failed(&self) -> bool {
        matches!(
            &*lock(&self.status),
            Status::Unreachable { tried: Some(_), .. }
        )
    }

    async fn call_once(self: &Arc<Self>, method: &str, params: Value) -> Answer {
        let tx = self.control().await?;
        let (reply, answer) = oneshot::channel();
        if tx
            .send(Outgoing {
                method: method.to_owned(),
                params,
                reply,
            })
            .is_err()
        {
            return Err(self.unreachable());
        }
        match answer.await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) if err.code == HOST_UNREACHABLE => Err(self.unreachable()),
            Ok(Err(err)) => Err(self.far_error(err)),
            Err(_) => Err(self.unreachable()),
        }
    }

    /// A long call (`wait`) on a door of its own, closed with it.
    async fn long_call(self: &Arc<Self>, method: &str, params: Value) -> Answer {
        let mut door = self.open().await?;
        let answer = door.call(method, params).await;
        door.close().await;
        match answer {
            Ok(value) => Ok(self.qualify(value)),
            Err(err) => match crate::exit::code_of(&err) {
                crate::exit::Code::Unreachable => {
                    self.mark_unreachable(format!("{err:#}"), false);
                    Err(self.unreachable())
                }
                code => Err(RpcError::new(
                    if code == crate::exit::Code::Usage {
                        NOT_FOUND
                    } else {
                        protocol::INTERNAL_ERROR
                    },
                    format!("host {}: {err:#}", self.name),
                )),
            },
        }
    }

    /// A far error with the host named and its ids qualified.
    fn far_error(&self, mut err: RpcError) -> RpcError {
        err.message = format!("host {}: {}", self.name, err.message);
        if let Some(Value::Array(matches)) = err.data.as_mut().and_then(|d| d.get_mut("matches")) {
            for m in matches.iter_mut() {
                if let Some(id) = m.as_str() {
                    *m = json!(format!("{}:{id}", self.name));
                }
            }
        }
        err
    }

    /// `spawn` on the far host: this home's far owner, the far proxy's
    /// environment plus the explicit `env`/`forward_env`; the far id goes into the
    /// map before the answer goes back.
    async fn spawn(self: &Arc<Self>, params: Value) -> Answer {
        let owner = params
            .get("owner")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if owner.is_empty() {
            return Err(RpcError::new(INVALID_PARAMS, "spawn needs `owner`"));
        }
        let task_id = params
            .get("task_id")
            .and_then(Value::as_str)
            .map_or_else(|| owner.clone(), str::to_owned);
        let events = params.get("notify").and_then(Value::as_bool) == Some(true)
            || params
                .get("watch")
                .and_then(Value::as_array)
                .is_some_and(|w| !w.is_empty())
            || params
                .get("heartbeat_seconds")
                .is_some_and(|h| !h.is_null());
        let mut far = strip(params, &["host", "caller_env", "owner", "task_id", "cwd"]);
        far["owner"] = json!(self.far_owner);
        // The far side knows the local owner too: a lost map still routes.
        far["task_id"] = json!(owner);
        // Opened first, so the proxy's environment is known.
        self.control().await?;
        if let Some(env) = self.proxy_env() {
            // The local cwd means nothing there: the job starts in the far home
            // directory, as a login over the door would.
            if let Some(home) = env.get("HOME") {
                far["cwd"] = json!(home);
            }
            far["caller_env"] = json!(env);
        }
        let answer = self.call_raw("spawn", far).await?;
        let Some(far_id) = answer.get("session_id").and_then(Value::as_str) else {
            return Err(RpcError::new(
                protocol::INTERNAL_ERROR,
                format!("host {}: the far spawn answered no session_id", self.name),
            ));
        };
        let job = Job {
            owner,
            task_id,
            events,
            finished: false,
            row: None,
        };
        lock(&self.book).jobs.insert(far_id.to_owned(), job);
        self.save().await;
        if events {
            self.start_events();
            self.wake.notify_one();
        }
        Ok(self.qualify(answer))
    }

    /// `restart` of a far job: run again there, in the far proxy's environment;
    /// the new far id joins the map with the old one's owner.
    async fn restart(self: &Arc<Self>, params: Value) -> Answer {
        let mut params = strip(params, &["caller_env"]);
        if let Some(env) = self.proxy_env() {
            params["caller_env"] = json!(env);
        }
        let answer = self.call_raw("restart", params).await?;
        let new = answer["session_id"].as_str().unwrap_or_default().to_owned();
        let old = answer["replaces"].as_str().unwrap_or_default().to_owned();
        let events = {
            let mut book = lock(&self.book);
            let job = book.jobs.get(&old).cloned().map(|job| Job {
                finished: false,
                row: None,
                ..job
            });
            let events = job.as_ref().is_some_and(|j| j.events);
            if let Some(job) = job
                && !new.is_empty()
            {
                book.jobs.insert(new, job);
            }
            events
        };
        self.save().await;
        if events {
            self.start_events();
            self.wake.notify_one();
        }
        Ok(self.qualify(answer))
    }

    /// `handoff` of a far job (B25): its events go to `to` from now on. The far
    /// side is not asked (its owner is this home); the job must be running and
    /// `from`'s.
    async fn handoff(self: &Arc<Self>, params: Value) -> Answer {
        let text = |key: &str| {
            params
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let (far, from, to, note) = (text("id"), text("from"), text("to"), text("note"));
        if to.trim().is_empty() {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "handoff needs `to`: the owner that takes the session over",
            ));
        }
        // The far id may be a prefix: the far side resolves it.
        let polled = self.call_raw("poll", json!({"id": far})).await?;
        let far_id = polled["session_id"].as_str().unwrap_or_default().to_owned();
        let refused = |reason: &str, message: String| RpcError {
            code: protocol::REFUSED,
            message,
            data: Some(json!({"reason": reason})),
        };
        if polled["status"] != "running" {
            return Err(refused(
                "not_running_owned",
                format!(
                    "{}:{far_id} has finished; only a running session is handed off",
                    self.name
                ),
            ));
        }
        {
            let mut book = lock(&self.book);
            let Some(job) = book.jobs.get_mut(&far_id) else {
                return Err(refused(
                    "not_running_owned",
                    format!("{}:{far_id} was not started from this home", self.name),
                ));
            };
            if job.owner != from {
                return Err(refused(
                    "not_running_owned",
                    format!(
                        "{}:{far_id} is owned by {}, not by {from}",
                        self.name, job.owner
                    ),
                ));
            }
            job.owner = to;
        }
        self.save().await;
        Ok(json!({
            "status": "handed_off",
            "session_id": format!("{}:{far_id}", self.name),
            "command": polled["command"],
            "note": note,
        }))
    }

    /// This host's rows for a `list` (the far `owner` is this home's; the local
    /// owner filter applies to the map), and the host's state. A host that does
    /// not answer gives the last rows it showed.
    async fn list(self: &Arc<Self>, params: &Value) -> (Vec<Value>, Value) {
        let owner = params
            .get("owner")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut far = params.clone();
        far["owner"] = json!(self.far_owner);
        let fresh = self.call_raw("list", far).await;
        let mut rows = Vec::new();
        match fresh {
            Ok(answer) => {
                let mut seen = Vec::new();
                for row in answer
                    .get("processes")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
                {
                    let Some(far_id) = row.get("session_id").and_then(Value::as_str) else {
                        continue;
                    };
                    let far_id = far_id.to_owned();
                    let row = self.qualify(row);
                    seen.push(far_id.clone());
                    {
                        let mut book = lock(&self.book);
                        if let Some(job) = book.jobs.get_mut(&far_id) {
                            job.row = Some(row.clone());
                            job.finished =
                                row.get("status").and_then(Value::as_str) != Some("running");
                        }
                    }
                    rows.push(row);
                }
                self.save().await;
            }
            Err(_) => {
                let book = lock(&self.book);
                let running_only = params.get("state").and_then(Value::as_str) == Some("running")
                    || (params.get("state").is_none()
                        && params.get("all").and_then(Value::as_bool) != Some(true));
                for (far_id, job) in &book.jobs {
                    if running_only && job.finished {
                        continue;
                    }
                    let mut row = job.row.clone().unwrap_or_else(|| {
                        json!({
                            "session_id": format!("{}:{far_id}", self.name),
                            "owner_task_id": job.owner,
                            "task_id": job.task_id,
                            "status": if job.finished { "exited" } else { "running" },
                        })
                    });
                    row["host"] = json!(self.name);
                    row["stale"] = json!(true);
                    rows.push(row);
                }
            }
        }
        if let Some(owner) = owner {
            rows.retain(|r| r.get("owner_task_id").and_then(Value::as_str) == Some(&owner));
        }
        (rows, self.state())
    }

    /// The answer with every far `session_id` (and `replaces`) qualified, and the
    /// owner and task id of a known job put back to the local ones.
    fn qualify(&self, mut value: Value) -> Value {
        let book = lock(&self.book);
        qualify_in(&self.name, &book.jobs, &mut value);
        value
    }

    /// Writes the map file (atomically: a temporary file, fsync, rename).
    async fn save(self: &Arc<Self>) {
        let link = Arc::clone(self);
        let saved = tokio::task::spawn_blocking(move || link.save_now()).await;
        if let Ok(Err(err)) | Err(err) = saved.map_err(std::io::Error::other) {
            tracing::error!(host = %self.name, error = %err, "host map not written");
        }
    }

    fn save_now(&self) -> std::io::Result<()> {
        use std::io::Write;
        let _saving = lock(&self.saving);
        let bytes = serde_json::to_vec(&*lock(&self.book)).map_err(std::io::Error::other)?;
        let tmp = self.path.with_extension("json.tmp");
        let mut file = open_private(&tmp, Private::Truncate)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, &self.path)
    }

    /// Whether a far job can still produce events.
    fn events_due(&self) -> bool {
        lock(&self.book)
            .jobs
            .values()
            .any(|j| j.events && !j.finished)
    }

    /// Starts the event loop once.
    fn start_events(self: &Arc<Self>) {
        if self
            .events_started
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let link = Arc::clone(self);
        tokio::spawn(async move { link.events_loop().await });
    }

    /// While a far job can produce events: the events door open, each `pending`
    /// note answered with a leased drain; reconnects with back-off.
    async fn events_loop(self: Arc<Self>) {
        let mut backoff = BACKOFF_FIRST;
        loop {
            if !self.events_due() {
                self.wake.notified().await;
                continue;
            }
            let started = Instant::now();
            let ended = self.follow_events().await;
            if started.elapsed() > BACKOFF_LAST {
                backoff = BACKOFF_FIRST;
            }
            match ended {
                Ok(()) => backoff = BACKOFF_FIRST,
                Err(why) => {
                    tracing::debug!(host = %self.name, %why, "events door ended; reconnecting");
                    pause(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_LAST);
                }
            }
        }
    }

    /// One events door's life: drains at once (catching up), then on every note.
    async fn follow_events(self: &Arc<Self>) -> Result<(), String> {
        let door = self.open().await.map_err(|e| e.message)?;
        let (_child, mut reader, mut writer, _stderr) = door.into_parts();
        let line = request_line(
            1,
            "events.follow",
            json!({"owner": self.far_owner, "peek": true}),
        );
        writer
            .write_all(&line)
            .await
            .map_err(|e| format!("the events door closed: {e}"))?;
        self.drain().await?;
        let mut buf = Vec::new();
        loop {
            if !self.events_due() {
                return Ok(());
            }
            let read = tokio::time::timeout(
                Duration::from_secs(5),
                protocol::read_line(&mut reader, &mut buf, MAX_RESPONSE_BYTES),
            )
            .await;
            match read {
                // A quiet stretch: drain anyway (a note lost in a reconnect), and
                // learn which jobs ended without an event (a watch-only job's end
                // queues nothing), so their door is not held for ever.
                Err(_) => self.note_ended().await?,
                Ok(Ok(Line::Complete)) => {}
                Ok(Ok(Line::TooLong)) => {}
                Ok(Ok(Line::Eof)) => return Err("the events door closed".into()),
                Ok(Err(err)) => return Err(format!("the events door failed: {err}")),
            }
            self.drain().await?;
        }
    }

    /// Marks finished the jobs of the map the far side no longer runs.
    async fn note_ended(self: &Arc<Self>) -> Result<(), String> {
        let running = self
            .call_raw("list", json!({"owner": self.far_owner}))
            .await
            .map_err(|e| e.message)?;
        let live: std::collections::HashSet<String> = running["processes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["session_id"].as_str().map(str::to_owned))
            .collect();
        let changed = {
            let mut book = lock(&self.book);
            let mut changed = false;
            for (far_id, job) in &mut book.jobs {
                if !job.finished && !live.contains(far_id) {
                    job.finished = true;
                    changed = true;
                }
            }
            changed
        };
        if changed {
            // Events already queued for them are still taken by the next drain.
            self.drain().await?;
            self.save().await;
        }
        Ok(())
    }

    /// Takes the far owner's events with a lease, publishes each into its local
    /// owner's queue, then acknowledges. Repeats while a drain brings events.
    async fn drain(self: &Arc<Self>) -> Result<(), String> {
        loop {
            let answer = self
                .call_raw("drain", json!({"owner": self.far_owner, "lease": true}))
                .await
                .map_err(|e| e.message)?;
            let events = answer
                .get("events")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let Some(lease) = answer.get("lease").cloned() else {
                return Ok(());
            };
            let link = Arc::clone(self);
            let published = tokio::task::spawn_blocking(move || link.publish(&events))
                .await
                .map_err(|e| format!("publishing failed: {e}"))?;
            if !published {
                // The ledger refused a commit: release, so the far side keeps them.
                let _ = self
                    .call_raw("drain.release", json!({"lease": lease}))
                    .await;
                return Err("the far events were not committed here; kept on the far side".into());
            }
            self.call_raw("drain.ack", json!({"lease": lease}))
                .await
                .map_err(|e| e.message)?;
        }
    }

    /// Publishes one lease's events (on the blocking pool: ledger commits and the
    /// map file are written here). False when one could not be committed.
    fn publish(&self, events: &[Value]) -> bool {
        let mut ok = true;
        let mut changed = false;
        for event in events {
            let Some(far_id) = event.get("session_id").and_then(Value::as_str) else {
                tracing::debug!(host = %self.name, "a far global event is not forwarded");
                continue;
            };
            let Some(id) = SessionId::qualified(&self.name, far_id) else {
                continue;
            };
            let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
            let key = event_key(far_id, kind, event);
            let (owner, seen) = {
                let mut book = lock(&self.book);
                let owner = book.jobs.get(far_id).map_or_else(
                    || {
                        event
                            .get("task_id")
                            .and_then(Value::as_str)
                            .unwrap_or("cli")
                            .to_owned()
                    },
                    |j| j.owner.clone(),
                );
                if kind == "completion"
                    && let Some(job) = book.jobs.get_mut(far_id)
                {
                    job.finished = true;
                    changed = true;
                }
                (owner, key.as_ref().is_some_and(|k| book.keys.contains(k)))
            };
            if seen {
                tracing::debug!(host = %self.name, %far_id, kind, "replayed far event dropped");
                continue;
            }
            match self.registry.publish_external(&id, &owner, event) {
                External::Queued => {}
                External::Duplicate => {
                    tracing::debug!(host = %self.name, %far_id, "replayed far completion dropped");
                }
                External::Unknown => {
                    tracing::debug!(host = %self.name, %far_id, kind, "far event not understood");
                }
                External::NotCommitted => {
                    ok = false;
                    continue;
                }
            }
            if let Some(key) = key {
                let mut book = lock(&self.book);
                book.keys.push_back(key);
                while book.keys.len() > KEPT_KEYS {
                    book.keys.pop_front();
                }
                changed = true;
            }
        }
        if changed && let Err(err) = self.save_now() {
            tracing::error!(host = %self.name, error = %err, "host map not written");
            return false;
        }
        ok
    }
}

/// The key a non-completion event is recognised by when a lease is replayed
/// (completions are keyed by the ledger). Watch events carry no sequence number,
/// so their content is the key: two identical matches of one job in a row count
/// as one replay.
fn event_key(far_id: &str, kind: &str, event: &Value) -> Option<String> {
    match kind {
        "completion" => None,
        "heartbeat" => Some(format!(
            "h:{far_id}:{}",
            event.get("seq").and_then(Value::as_u64).unwrap_or(0)
        )),
        _ => {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            event.to_string().hash(&mut hasher);
            Some(format!("{}:{far_id}:{:016x}", kind, hasher.finish()))
        }
    }
}

/// Rewrites `value` in place: see [`Link::qualify`].
fn qualify_in(host: &str, jobs: &BTreeMap<String, Job>, value: &mut Value) {
    match value {
        Value::Object(map) => {
            let far = map
                .get("session_id")
                .and_then(Value::as_str)
                .filter(|id| !id.contains(':'))
                .map(str::to_owned);
            if let Some(far) = far {
                map.insert("session_id".into(), json!(format!("{host}:{far}")));
                if let Some(job) = jobs.get(&far) {
                    if map.contains_key("owner_task_id") {
                        map.insert("owner_task_id".into(), json!(job.owner));
                    }
                    if map.contains_key("task_id") {
                        map.insert("task_id".into(), json!(job.task_id));
                    }
                }
                if map.contains_key("status") || map.contains_key("command") {
                    map.insert("host".into(), json!(host));
                }
            }
            if let Some(Value::String(id)) = map.get_mut("replaces")
                && !id.contains(':')
            {
                *id = format!("{host}:{id}");
            }
            for (key, inner) in map.iter_mut() {
                if key != "session_id" {
                    qualify_in(host, jobs, inner);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                qualify_in(host, jobs, item);
            }
        }
        _ => {}
    }
}

/// One request line.
fn request_line(id: u64, method: &str, params: Value) -> Vec<u8> {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    line
}

/// Serves one control door until it or its senders close, or it has been idle
/// for [`IDLE_CLOSE`] (`None`); says why it ended. Every request still
/// unanswered then is answered as unreachable.
async fn serve_control(
    child: Child,
    mut reader: BufReader<ChildStdout>,
    mut writer: ChildStdin,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
) -> Option<String> {
    // The door dies with this task (killed on drop).
    let _child = child;
    let mut pending: HashMap<u64, oneshot::Sender<Answer>> = HashMap::new();
    let mut next: u64 = 1_000;
    let mut buf = Vec::new();
    let lost = |pending: &mut HashMap<u64, oneshot::Sender<Answer>>| {
        for (_, reply) in pending.drain() {
            let _ = reply.send(Err(RpcError::new(HOST_UNREACHABLE, "the door closed")));
        }
    };
    let mut idle = tokio::time::interval(IDLE_CLOSE / 4);
    let mut active = Instant::now();
    loop {
        tokio::select! {
            _ = idle.tick() => {
                if pending.is_empty() && active.elapsed() >= IDLE_CLOSE {
                    return None;
                }
            }
            outgoing = rx.recv() => {
                active = Instant::now();
                let Some(out) = outgoing else {
                    return Some("the link was closed".into());
                };
                next += 1;
                let line = request_line(next, &out.method, out.params);
                if let Err(err) = writer.write_all(&line).await {
                    let _ = out.reply.send(Err(RpcError::new(HOST_UNREACHABLE, "the door closed")));
                    lost(&mut pending);
                    return Some(format!("the door closed: {err}"));
                }
                pending.insert(next, out.reply);
            }
            read = protocol::read_line(&mut reader, &mut buf, MAX_RESPONSE_BYTES) => {
                match read {
                    Ok(Line::Complete) => {}
                    Ok(Line::TooLong) => continue,
                    Ok(Line::Eof) => {
                        lost(&mut pending);
                        return Some("the door closed".into());
                    }
                    Err(err) => {
                        lost(&mut pending);
                        return Some(format!("the door failed: {err}"));
                    }
                }
                active = Instant::now();
                let Ok(message) = serde_json::from_slice::<Response>(&buf) else {
                    continue;
                };
                let Some(id) = message.id.as_u64() else { continue };
                if let Some(reply) = pending.remove(&id) {
                    let answer = match message.error {
                        Some(err) => Err(err),
                        None => Ok(message.result.unwrap_or(Value::Null)),
                    };
                    let _ = reply.send(answer);
                }
            }
        }
    }
}

impl RemoteStream {
    /// Runs a far stream (`logs.follow`) on a door of its own, relaying its notes
    /// and its final answer (ids qualified) to the local client, until either
    /// side ends.
    pub(crate) async fn run(
        self,
        reader: &mut tokio::io::BufReader<OwnedReadHalf>,
        writer: &mut OwnedWriteHalf,
        id: Value,
    ) {
        let door = match self.link.open().await {
            Ok(door) => door,
            Err(err) => {
                let _ = write(writer, &Response::err(id, err)).await;
                return;
            }
        };
        let (_child, mut far, mut far_in, _stderr) = door.into_parts();
        if far_in
            .write_all(&request_line(1, &self.method, self.params))
            .await
            .is_err()
        {
            let _ = write(writer, &Response::err(id, self.link.unreachable())).await;
            return;
        }
        let mut gone = Box::pin(super::methods::client_gone(reader));
        let mut buf = Vec::new();
        loop {
            let read = tokio::select! {
                read = protocol::read_line(&mut far, &mut buf, MAX_RESPONSE_BYTES) => read,
                () = &mut gone => return,
            };
            match read {
                Ok(Line::Complete) => {}
                Ok(Line::TooLong) => continue,
                Ok(Line::Eof) | Err(_) => {
                    self.link
                        .mark_unreachable("the door closed during a stream".into(), false);
                    let _ = write(writer, &Response::err(id, self.link.unreachable())).await;
                    return;
                }
            }
            // A note that names no session (a `log` note: output only) is passed
            // on as the far side wrote it: no parse, no copy through a Value.
            if buf.starts_with(NOTE_START) && memchr::memmem::find(&buf, b"session_id").is_none() {
                buf.push(b'\n');
                if writer.write_all(&buf).await.is_err() {
                    return;
                }
                continue;
            }
            let Ok(message) = serde_json::from_slice::<Response>(&buf) else {
                continue;
            };
            if let Some(method) = &message.method {
                let params = self.link.qualify(message.params.unwrap_or(Value::Null));
                if write(writer, &Response::notification(method, params))
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            let response = match message.error {
                Some(err) => Response::err(id, self.link.far_error(err)),
                None => Response::ok(id, self.link.qualify(message.result.unwrap_or(Value::Null))),
            };
            let _ = write(writer, &response).await;
            return;
        }
    }
}

/// How a daemon's stream note begins (`Response::notification` serialised).
const NOTE_START: &[u8] = br#"{"jsonrpc":"2.0","id":null,"method":"#;

/// The pause between reconnects.
#[expect(
    clippy::disallowed_methods,
    reason = "a back-off between reconnects, not a synchronisation"
)]
async fn pause(after: Duration) {
    tokio::time::sleep(after).await;
}

#[cfg(test)]
mod tests;
