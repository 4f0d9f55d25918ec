//! The host link: the local daemon's connections to other hosts' herds.
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
//! - a *long call* (`wait`, `logs.follow`, `logs.dump`) gets a door of its own (a
//!   wait that lasts an hour must not stall the host's other requests, and a local
//!   client that leaves kills its door, which ends the far wait or stream); a
//!   stream's door is closed with it, and an answered wait's door is kept for the
//!   next wait ([`KEPT_DOORS`], each closed after [`IDLE_CLOSE`] unused), since
//!   over ssh every new door is a new connection;
//! - the *events* door runs `events.follow` with `peek` for this home's far
//!   owner while a far job can still produce events: it only says that something
//!   is pending; the events themselves are taken over the control door.
//!
//! Exactly once. The far jobs of this home belong to one far owner,
//! `herd-home-<id>`, where the id is stable per home (the store's `home` table). The link
//! keeps a durable map far id -> local owner (its row of the store's `host_links`,
//! committed before a spawn is answered; `hosts/NAME.json` of earlier releases is
//! imported). It drains the far owner with a lease, publishes each event
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
//!
//! One file per concern: `link.rs` (the doors: opening, the control door, long
//! calls, the host's status), `jobs.rs` (far jobs in the map: spawn, restart,
//! handoff, list rows, qualified ids, the map file), `events.rs` (the events door
//! and the leased drains that publish far events once) and `stream.rs` (a far
//! stream relayed to the local client). This file holds the types they share and
//! [`Hosts`], which routes requests to the links.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use herd_core::Registry;
use herd_core::lock_order::{AsyncMutex, Mutex, MutexGuard, rank};
use herd_persistence::{Home, HostLinkStore};
use herd_protocol::answers::ListAnswer;
use herd_protocol::daemon::{HostState, HostsAnswer, LinkStatus};
use herd_protocol::errors::UnknownHostData;
use herd_protocol::params::ListParams;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::config::{Config, HostConfig};
use crate::protocol::{INVALID_PARAMS, NOT_FOUND, RpcError};
use crate::remote::door;

mod events;
mod jobs;
mod link;
mod mux;
mod stream;

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

/// How long a listing waits for a host's answer before showing its jobs' last
/// known rows (a silent door never blocks `ps --all-hosts`).
const LIST_BUDGET: Duration = Duration::from_millis(900);

/// How many doors of finished long calls (`wait`) a link keeps for the next one.
const KEPT_DOORS: usize = 2;

/// The events door stays open this long after the last far job that can produce
/// events ended, as the control door does: the next such job then does not pay for
/// a new door (over ssh, a new connection: the p99 of a short job's round trip).
const EVENTS_LINGER: Duration = IDLE_CLOSE;

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
    registry: Registry,
    configs: BTreeMap<String, HostConfig>,
    /// This home's owner on every far host.
    far_owner: String,
    links: Mutex<HashMap<String, Arc<Link>>, { rank::DAEMON_HOST_LINKS }>,
    /// The links' maps in the store.
    store: Arc<dyn HostLinkStore>,
}

/// What [`Hosts::route`] did with a request.
#[derive(Debug)]
pub(crate) enum Routed {
    /// A far host's: the answer.
    Answer(Answer),
    /// A far host's stream, to run on the connection ([`RemoteStream::run`]).
    Stream(RemoteStream),
    /// A local request, handed back unchanged.
    Local(Value),
}

/// A long call on a door of its own (`logs.follow`, `logs.dump`), run on the
/// local client's connection.
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
    /// Where the map is kept: its row of the store's `host_links`.
    store: Arc<dyn HostLinkStore>,
    /// The control connection, opened on demand.
    control: AsyncMutex<Option<Control>, { rank::DAEMON_HOST_CONTROL }>,
    status: Mutex<Status, { rank::DAEMON_HOST_STATUS }>,
    book: Mutex<Book, { rank::DAEMON_HOST_BOOK }>,
    /// Serialises writes of the map file.
    saving: Mutex<(), { rank::DAEMON_HOST_SAVING }>,
    /// The far proxy's environment, from its hello.
    proxy_env: Mutex<Option<BTreeMap<String, String>>, { rank::DAEMON_HOST_PROXY_ENV }>,
    /// Doors of answered long calls, kept for the next one, with when they were
    /// kept.
    kept_doors: Mutex<Vec<(door::Door, Instant)>, { rank::DAEMON_HOST_KEPT_DOORS }>,
    /// What the far herd serves, from the last door's hello (`proxy.mux` when
    /// its proxy serves mux doors).
    far_capabilities: Mutex<Vec<String>, { rank::DAEMON_HOST_CAPABILITIES }>,
    /// The door whose channels carry streams and long calls, when the far proxy
    /// serves it.
    mux: AsyncMutex<Option<Arc<mux::Mux>>, { rank::DAEMON_HOST_MUX }>,
    /// Counts this link's spawn request keys.
    next_key: std::sync::atomic::AtomicU64,
    /// When this link was made (ns since the epoch): part of its request keys.
    started_nanos: u64,
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
    /// The far owner this link's jobs run under; none in a map of a release that
    /// had one far owner per home (those keep it).
    #[serde(default)]
    far_owner: Option<String>,
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
    /// The name it was started with (`host:NAME` finds it among this home's jobs
    /// of this host only).
    #[serde(default)]
    name: Option<String>,
    /// When it was started here (ns since the epoch): the newest finished one of
    /// a name wins, as B37 says for local names. 0 with no `name`: saved before
    /// names were kept, so its name (if any) is known only on the far side.
    #[serde(default)]
    started: u64,
}

/// An open control door: requests go in on `tx`, answers come back on their
/// oneshot. The task that owns the door ends (and kills it) when `tx` closes or
/// the door does.
#[derive(Debug)]
struct Control {
    tx: mpsc::UnboundedSender<Outgoing>,
}

/// A far answer, or the error that stands for it.
pub(crate) type Answer = Result<Value, RpcError>;

/// What became of one request on the control door.
#[derive(Debug)]
enum Sent {
    /// The far side answered, or the door closed after the request was written.
    Answered(Answer),
    /// The request was never written: the door was gone first.
    Unsent,
}

#[derive(Debug)]
struct Outgoing {
    method: String,
    params: Value,
    reply: oneshot::Sender<Answer>,
}

/// Takes a ranked lock (herd-core's lock order, checked in debug builds), ignoring
/// poisoning: every critical section here only assigns fields.
fn lock<T, const RANK: u8>(m: &Mutex<T, RANK>) -> MutexGuard<'_, T> {
    m.acquire()
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
        let store: Arc<dyn HostLinkStore> = Arc::new(herd_persistence::HostLinks::new(home));
        // Kept in the store; a home of an earlier release has it in `hosts/home_id`.
        // Without hosts nothing needs it (nor the store at start: a full disk).
        let far_owner = if config.hosts.is_empty() {
            String::new()
        } else {
            format!("herd-home-{}", store.home_id()?)
        };
        let hosts = Hosts {
            registry,
            configs: config.hosts.clone(),
            far_owner,
            links: Mutex::new(HashMap::new()),
            store,
        };
        for name in hosts.configs.keys() {
            let stored = match hosts.store.load(name) {
                Ok(book) => book.is_some(),
                Err(error) => {
                    tracing::error!(host = %name, %error, "host map not loaded");
                    false
                }
            };
            if stored && let Ok(link) = hosts.link(name) {
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
        let book = match self.store.load(name) {
            Ok(Some(bytes)) => serde_json::from_slice(&bytes).unwrap_or_else(|err| {
                tracing::warn!(host = name, error = %err, "host map unreadable; starting empty");
                Book::default()
            }),
            Ok(None) => Book::default(),
            Err(error) => {
                tracing::error!(host = name, %error, "host map not loaded; starting empty");
                Book::default()
            }
        };
        // One far owner per host name: two names of one far home drain their own
        // queues, so a completion keeps the name its job was started under. A map
        // from before keeps the home's single owner its far jobs run under.
        let mut book = book;
        let far_owner = match &book.far_owner {
            Some(owner) => owner.clone(),
            None if !book.jobs.is_empty() => self.far_owner.clone(),
            None => format!("{}-{name}", self.far_owner),
        };
        book.far_owner = Some(far_owner.clone());
        let link = Arc::new(Link {
            name: name.to_owned(),
            config: config.clone(),
            far_owner,
            registry: self.registry.clone(),
            store: self.store.clone(),
            control: AsyncMutex::new(None),
            status: Mutex::new(Status::Idle),
            book: Mutex::new(book),
            saving: Mutex::new(()),
            proxy_env: Mutex::new(None),
            far_capabilities: Mutex::new(Vec::new()),
            mux: AsyncMutex::new(None),
            kept_doors: Mutex::new(Vec::new()),
            next_key: std::sync::atomic::AtomicU64::new(0),
            started_nanos: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
            wake: Notify::new(),
            events_started: std::sync::atomic::AtomicBool::new(false),
        });
        links.insert(name.to_owned(), Arc::clone(&link));
        Ok(link)
    }

    /// Routes a request about a far host; hands local ones back.
    pub(crate) async fn route(&self, method: &str, params: Value) -> Routed {
        if method == "hosts" {
            return Routed::Answer(self.states());
        }
        if method == "spawn" {
            let Some(host) = params.get("host").cloned() else {
                return Routed::Local(params);
            };
            return match host {
                Value::Null => Routed::Local(strip(params, &["host"])),
                Value::String(name) => match self.link(&name) {
                    Ok(link) => Routed::Answer(link.spawn(params).await),
                    Err(err) => Routed::Answer(Err(err)),
                },
                _ => Routed::Answer(Err(RpcError::new(
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
            Err(err) => return Routed::Answer(Err(err)),
        };
        let far = match self.resolve(&link, &far) {
            Ok(far) => far,
            Err(err) => return Routed::Answer(Err(err)),
        };
        let mut params = params;
        params["id"] = Value::String(far);
        match method {
            "logs.follow" | "logs.dump" => Routed::Stream(RemoteStream {
                link,
                method: method.to_owned(),
                params,
            }),
            "wait" => Routed::Answer(link.long_call(method, params).await),
            "handoff" => Routed::Answer(link.handoff(params).await),
            "restart" => Routed::Answer(link.restart(params).await),
            _ => Routed::Answer(link.call(method, params).await),
        }
    }

    /// The far id `wanted` (after `host:`) stands for: a name or a prefix of a
    /// job this home started under this host name is resolved here (another home's
    /// `web` on the same far home is never found); a full id of a job started
    /// under another host name of this home is refused, naming that one (a far
    /// job has one qualified id); anything else goes to the far side as written.
    fn resolve(&self, link: &Link, wanted: &str) -> Result<String, RpcError> {
        let bare = wanted.strip_prefix("proc_").unwrap_or(wanted);
        let hexish = !bare.is_empty() && bare.bytes().all(|b| b.is_ascii_hexdigit());
        if let Some(far) = link.resolve_local(wanted)? {
            return Ok(far);
        }
        if !hexish {
            if link.has_unnamed_legacy() {
                // Jobs saved before names were kept: the name may be one of
                // theirs, which only the far side knows.
                return Ok(wanted.to_owned());
            }
            return Err(RpcError::new(
                NOT_FOUND,
                format!(
                    "no session named {wanted} was started on host {} from this home (names are per home and host name; `herd ps --host {}` lists them)",
                    link.name, link.name
                ),
            ));
        }
        let full = format!("proc_{bare}");
        for other in self.configs.keys().filter(|n| **n != link.name) {
            let Ok(other) = self.link(other) else {
                continue;
            };
            if lock(&other.book).jobs.contains_key(&full) {
                return Err(RpcError::new(
                    NOT_FOUND,
                    format!(
                        "{}:{full} was started as {}:{full}: a far job has one id here, under the host name it was started with",
                        link.name, other.name
                    ),
                ));
            }
        }
        Ok(wanted.to_owned())
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
        let params: ListParams = serde_json::from_value(strip(params, &["host", "all_hosts"]))
            .map_err(|err| RpcError::new(INVALID_PARAMS, format!("invalid params: {err}")))?;
        // Every host at once, each within LIST_BUDGET: a door that hangs delays
        // the answer by that budget, not by its own deadline.
        let links = names
            .iter()
            .map(|name| self.link(name))
            .collect::<Result<Vec<_>, _>>()?;
        let answers = futures::future::join_all(links.iter().map(|link| link.list(&params))).await;
        for (mut far_rows, state) in answers {
            rows.append(&mut far_rows);
            states.push(state);
        }
        to_value(&ListAnswer {
            processes: rows,
            more: None,
            older: None,
            hosts: Some(states),
        })
    }

    /// Every host with its link's status (method `hosts`).
    fn states(&self) -> Answer {
        let mut hosts = Vec::new();
        for name in self.configs.keys() {
            let link = lock(&self.links).get(name).cloned();
            hosts.push(match link {
                Some(link) => link.state(),
                None => HostState {
                    name: name.clone(),
                    status: LinkStatus::Idle,
                    since: None,
                    message: None,
                    jobs_live: None,
                    jobs_known: None,
                    answered: None,
                    late: false,
                },
            });
        }
        to_value(&HostsAnswer { hosts })
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
    RpcError::with_data(
        NOT_FOUND,
        format!(
            "unknown host `{name}`: {known}; add a [hosts.{name}] table to config.toml (`herd hosts list` shows them)"
        ),
        &UnknownHostData {
            hosts: configs.keys().cloned().collect(),
        },
    )
}

/// A typed answer (herd-protocol's) as the JSON the daemon sends.
fn to_value<A: serde::Serialize>(answer: &A) -> Answer {
    serde_json::to_value(answer).map_err(|err| {
        RpcError::new(
            crate::protocol::INTERNAL_ERROR,
            format!("failed to encode the answer: {err}"),
        )
    })
}

/// Typed params (herd-protocol's) as the JSON a far request carries.
fn to_params<P: serde::Serialize>(params: &P) -> Result<Value, RpcError> {
    herd_protocol::to_params(params).map_err(|err| {
        RpcError::new(
            crate::protocol::INTERNAL_ERROR,
            format!("cannot encode a far request's params: {err}"),
        )
    })
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

/// Seconds since `at`, and `at` as RFC 3339.
fn since(at: SystemTime) -> (u64, String) {
    let ago = SystemTime::now()
        .duration_since(at)
        .map_or(0, |d| d.as_secs());
    let stamp = herd_core::rfc3339(at);
    (ago, stamp)
}

#[cfg(test)]
mod tests;
