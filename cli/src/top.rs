//! `herd top`: a live full-screen view of the home's sessions.
//!
//! Every session of every owner, one row each (id, name, owner, state, exit, age
//! or how long it ran, CPU and memory of its process tree, last line of output),
//! sorted (`s`) and filtered (`/`), with a pane that follows the selected session's
//! output as a terminal would show it. Keys kill, restart and hand off the
//! selected session and open its whole log in `$PAGER`.
//!
//! The parts: `model` (rows, sort, filter, selection, the pane's terminal),
//! `render` (ratatui drawing), `keys` (the input thread and the key map),
//! `sampler` (the `/proc` sampler thread) and `feed` (the daemon connections).
//! The UI loop here owns the terminal and redraws after whatever arrives: a key,
//! a listing (sent when the daemon's `sessions.follow` says the sessions changed),
//! output for the pane, a `/proc` sample (once a second). Messages that arrived
//! together are handled before one redraw.
//!
//! The terminal is restored on every way out: the guard's `Drop` on a return or
//! an error, the panic hook (it restores, reports, and exits 101), and SIGTERM,
//! SIGHUP and SIGINT, which end the loop like `q`. The daemon is reached before
//! the terminal is taken, so an unreachable daemon is a plain error line.

mod feed;
mod keys;
mod model;
mod render;
mod sampler;

use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::Instant;

use anyhow::Context;
use futures::FutureExt;
use herd_persistence::Home;
use ratatui::Terminal;
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::prelude::CrosstermBackend;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use self::feed::{Action, Feed};
use self::keys::{Command, Edit, Gate, Input, Key};
use self::model::{Model, Pane, Usage};
use crate::client::Client;
use crate::exit::{Code, Failure};

// `herd top`.
#[derive(Debug, clap::Args)]
pub(crate) struct TopArgs {}

/// Runs `herd top` until `q`, Ctrl-C or a signal.
///
/// # Errors
/// No terminal, an unreachable daemon, or a daemon that went away.
pub(crate) fn run(home: &Home, _args: TopArgs) -> anyhow::Result<()> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(Failure::new(
            Code::Usage,
            "herd top needs a terminal on stdin and stdout; `herd ps --all` lists the sessions for a script",
        )
        .into());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    runtime.block_on(app(home.clone()))
}

/// Takes the terminal: raw mode, the alternate screen, no cursor.
fn take_terminal() -> std::io::Result<()> {
    terminal::enable_raw_mode()?;
    execute!(
        std::io::stdout(),
        terminal::EnterAlternateScreen,
        cursor::Hide
    )
}

/// Gives the terminal back as it was; safe to call more than once.
fn give_back_terminal() {
    let _ = execute!(
        std::io::stdout(),
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
    let _ = terminal::disable_raw_mode();
}

/// Gives the terminal back when dropped.
#[derive(Debug)]
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        give_back_terminal();
    }
}

/// A panic anywhere in `top` gives the terminal back before the report is
/// printed, then ends the process: a view with a dead thread would show stale data.
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        give_back_terminal();
        previous(info);
        std::process::exit(101);
    }));
}

/// An input line being typed.
#[derive(Debug)]
struct Prompt {
    kind: PromptKind,
    text: String,
}

#[derive(Debug)]
enum PromptKind {
    Filter,
    Handoff { session_id: String, from: String },
    Kill { session_id: String },
}

impl Prompt {
    fn label(&self) -> String {
        match &self.kind {
            PromptKind::Filter => "filter: ".to_owned(),
            PromptKind::Handoff { session_id, from } => {
                format!("hand off {session_id} (owner {from}) to owner: ")
            }
            PromptKind::Kill { session_id } => {
                format!("kill {session_id} and its whole process tree? [y/N] ")
            }
        }
    }
}

/// The UI loop's state.
#[derive(Debug)]
struct App {
    home: Home,
    model: Model,
    pane: Option<Pane>,
    pane_task: Option<tokio::task::JoinHandle<()>>,
    zoomed: bool,
    status: String,
    note: String,
    prompt: Option<Prompt>,
    feed_tx: UnboundedSender<Feed>,
    actions: UnboundedSender<Action>,
    targets: sampler::Targets,
    /// Rows in the last table drawn (a page for PgUp/PgDn).
    page_rows: usize,
}

/// What the loop does after a message.
enum Flow {
    Go,
    Quit,
    Pager,
}

async fn app(home: Home) -> anyhow::Result<()> {
    let client = Client::connect(&home).await?;
    let (feed_tx, mut feed_rx) = unbounded_channel();
    let (action_tx, action_rx) = unbounded_channel();
    let (input_tx, mut input_rx) = unbounded_channel();
    let (usage_tx, mut usage_rx) = unbounded_channel::<HashMap<String, Usage>>();
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut hangup = signal(SignalKind::hangup()).context("cannot handle SIGHUP")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;

    install_panic_hook();
    let _guard = TerminalGuard;
    take_terminal().context("cannot set up the terminal")?;
    let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))
        .context("cannot draw on the terminal")?;

    let gate = Gate::default();
    keys::spawn(gate.clone(), input_tx).context("cannot start the input thread")?;
    let targets = sampler::Targets::default();
    // Dropping the sender at the end stops the sampler at once.
    let (_stop_sampler, stop_rx) = std::sync::mpsc::channel::<()>();
    sampler::spawn(std::sync::Arc::clone(&targets), usage_tx, stop_rx)
        .context("cannot start the /proc sampler")?;
    let feed_task = tokio::spawn(feed::run(home.clone(), client, feed_tx.clone(), action_rx));

    let mut app = App {
        home,
        model: Model::new(Instant::now()),
        pane: None,
        pane_task: None,
        zoomed: false,
        status: String::new(),
        note: String::new(),
        prompt: None,
        feed_tx,
        actions: action_tx,
        targets,
        page_rows: 10,
    };
    let result = loop {
        app.draw(&mut terminal)?;
        let flow = tokio::select! {
            input = input_rx.recv() => match input {
                Some(input) => app.on_input(input)?,
                None => Flow::Quit,
            },
            feed = feed_rx.recv() => match feed {
                Some(feed) => app.on_feed(feed)?,
                None => Flow::Quit,
            },
            usage = usage_rx.recv() => {
                if let Some(usage) = usage {
                    app.model.set_usage(usage);
                }
                Flow::Go
            }
            _ = term.recv() => Flow::Quit,
            _ = hangup.recv() => Flow::Quit,
            _ = interrupt.recv() => Flow::Quit,
        };
        // Whatever else is already here is handled before the next redraw.
        let mut flow = flow;
        for _ in 0..10_000 {
            if !matches!(flow, Flow::Go) {
                break;
            }
            flow = if let Ok(input) = input_rx.try_recv() {
                app.on_input(input)?
            } else if let Ok(feed) = feed_rx.try_recv() {
                app.on_feed(feed)?
            } else if let Ok(usage) = usage_rx.try_recv() {
                app.model.set_usage(usage);
                Flow::Go
            } else {
                break;
            };
        }
        match flow {
            Flow::Go => {}
            Flow::Quit => break Ok(()),
            Flow::Pager => {
                app.page_log(&mut terminal, &gate).await?;
                // A Ctrl-C typed into the pager reached this process group too.
                while interrupt.recv().now_or_never().is_some() {}
            }
        }
    };
    feed_task.abort();
    if let Some(task) = app.pane_task.take() {
        task.abort();
    }
    result
}

impl App {
    fn draw(
        &mut self,
        terminal: &mut Terminal<CrosstermBackend<std::io::Stdout>>,
    ) -> anyhow::Result<()> {
        let label = self.prompt.as_ref().map(Prompt::label);
        let prompt = match (&self.prompt, &label) {
            (Some(p), Some(label)) => Some((label.as_str(), p.text.as_str())),
            _ => None,
        };
        let chrome = render::Chrome {
            pane: self.pane.as_ref(),
            zoomed: self.zoomed,
            status: &self.status,
            prompt,
            note: &self.note,
            now: Instant::now(),
        };
        let model = &mut self.model;
        let frame = terminal
            .draw(|frame| render::draw(frame, model, &chrome))
            .context("cannot draw on the terminal")?;
        self.page_rows = usize::from(frame.area.height / 2).max(1);
        Ok(())
    }

    fn on_feed(&mut self, feed: Feed) -> anyhow::Result<Flow> {
        match feed {
            Feed::Rows(rows) => {
                let running = rows
                    .iter()
                    .filter(|r| r.is_running())
                    .map(|r| (r.session_id.clone(), r.pid))
                    .collect();
                if let Ok(mut targets) = self.targets.lock() {
                    *targets = running;
                }
                self.model.set_rows(rows, Instant::now());
                self.follow_selected();
            }
            Feed::Said(text) => self.status = text,
            Feed::Note(text) => self.note = text,
            Feed::Output { session_id, text } => {
                if let Some(pane) = self.pane.as_mut().filter(|p| p.session_id() == session_id) {
                    pane.feed(&text);
                }
            }
            Feed::OutputRestart { session_id } => {
                if let Some(pane) = self.pane.as_mut().filter(|p| p.session_id() == session_id) {
                    *pane = Pane::new(&session_id, pane.is_pty());
                }
            }
            Feed::OutputEnd { session_id } => {
                if let Some(pane) = self.pane.as_mut().filter(|p| p.session_id() == session_id) {
                    pane.is_ended = true;
                }
            }
            Feed::Lost(message) => {
                return Err(
                    Failure::new(Code::Unreachable, format!("herd top ended: {message}")).into(),
                );
            }
        }
        Ok(Flow::Go)
    }

    /// Points the pane at the selected session (a new follower when it moved).
    fn follow_selected(&mut self) {
        let Some(row) = self.model.selected() else {
            if let Some(task) = self.pane_task.take() {
                task.abort();
            }
            self.pane = None;
            self.zoomed = false;
            return;
        };
        if self
            .pane
            .as_ref()
            .is_some_and(|p| p.session_id() == row.session_id)
        {
            return;
        }
        if let Some(task) = self.pane_task.take() {
            task.abort();
        }
        self.pane = Some(Pane::new(&row.session_id, row.is_pty()));
        self.pane_task = Some(tokio::spawn(feed::follow(
            self.home.clone(),
            row.session_id.clone(),
            self.feed_tx.clone(),
        )));
    }

    fn on_input(&mut self, input: Input) -> anyhow::Result<Flow> {
        match input {
            Input::Resize => Ok(Flow::Go),
            Input::Failed(err) => Err(anyhow::Error::new(err).context("cannot read the terminal")),
            Input::Key(key) => Ok(self.on_key(key)),
        }
    }

    fn on_key(&mut self, key: Key) -> Flow {
        if let Some(prompt) = self.prompt.take() {
            self.prompt = self.on_prompt_key(prompt, key);
            return Flow::Go;
        }
        #[cfg(debug_assertions)]
        if key == Key::Char('!') && std::env::var_os("HERD_TOP_TEST_PANIC").is_some() {
            // Debug builds only: the tests prove the panic hook gives the terminal back.
            panic!("herd top: the panic HERD_TOP_TEST_PANIC asked for");
        }
        let Some(command) = keys::command(key) else {
            return Flow::Go;
        };
        self.status.clear();
        let selected = self.model.selected().cloned();
        match command {
            Command::Quit => return Flow::Quit,
            Command::Move(delta) => self.model.move_selection(delta),
            Command::Page(pages) => self.model.move_selection(
                pages.saturating_mul(isize::try_from(self.page_rows).unwrap_or(10)),
            ),
            Command::Edge { last } => self.model.select_edge(last),
            Command::CycleSort => self.model.cycle_sort(),
            Command::ReverseSort => self.model.reverse_sort(),
            Command::ToggleFinished => self.model.toggle_finished(),
            Command::Follow => self.zoomed = !self.zoomed && self.pane.is_some(),
            Command::Back => self.zoomed = false,
            Command::Filter => {
                self.prompt = Some(Prompt {
                    kind: PromptKind::Filter,
                    text: self.model.filter().to_owned(),
                });
            }
            Command::Kill | Command::Handoff | Command::Restart | Command::Log => {
                let Some(row) = selected else {
                    self.status = "no session is selected".to_owned();
                    return Flow::Go;
                };
                let id = row.session_id.clone();
                match command {
                    Command::Kill if !row.is_running() => {
                        self.status = format!("{id} has already finished ({})", row.state());
                    }
                    Command::Kill => {
                        self.prompt = Some(Prompt {
                            kind: PromptKind::Kill { session_id: id },
                            text: String::new(),
                        });
                    }
                    Command::Handoff if !row.is_running() => {
                        self.status =
                            format!("{id} has finished; only a running session is handed off");
                    }
                    Command::Handoff => {
                        self.prompt = Some(Prompt {
                            kind: PromptKind::Handoff {
                                session_id: id,
                                from: row.owner_task_id.clone(),
                            },
                            text: String::new(),
                        });
                    }
                    Command::Restart => {
                        self.status = format!("restarting {id}…");
                        let _ = self.actions.send(Action::Restart { session_id: id });
                    }
                    _ => return Flow::Pager,
                }
            }
        }
        self.follow_selected();
        Flow::Go
    }

    /// A key while an input line is open; the line stays open unless it ended.
    fn on_prompt_key(&mut self, mut prompt: Prompt, key: Key) -> Option<Prompt> {
        if let PromptKind::Kill { session_id } = &prompt.kind {
            if matches!(key, Key::Char('y' | 'Y')) {
                self.status = format!("killing {session_id}…");
                let _ = self.actions.send(Action::Kill {
                    session_id: session_id.clone(),
                });
            } else {
                self.status = format!("{session_id} was not killed");
            }
            return None;
        }
        let edit = keys::edit(&mut prompt.text, key);
        match (&prompt.kind, edit) {
            (_, Edit::Typing) => {
                if matches!(prompt.kind, PromptKind::Filter) {
                    self.model.set_filter(&prompt.text);
                    self.follow_selected();
                }
                Some(prompt)
            }
            (PromptKind::Filter, Edit::Submit) => None,
            (PromptKind::Filter, Edit::Cancel) => {
                self.model.set_filter("");
                self.follow_selected();
                None
            }
            (PromptKind::Handoff { session_id, from }, Edit::Submit) => {
                let to = prompt.text.trim();
                if to.is_empty() {
                    self.status = format!("{session_id} was not handed off: no owner was given");
                } else {
                    self.status = format!("handing {session_id} off to {to}…");
                    let _ = self.actions.send(Action::Handoff {
                        session_id: session_id.clone(),
                        from: from.clone(),
                        to: to.to_owned(),
                    });
                }
                None
            }
            (PromptKind::Handoff { session_id, .. }, Edit::Cancel) => {
                self.status = format!("{session_id} was not handed off");
                None
            }
            (PromptKind::Kill { .. }, _) => None,
        }
    }

    /// Leaves the screen for `$PAGER` on the selected session's whole log (as
    /// `herd logs` shows it: redacted), then takes the screen back.
    async fn page_log(
        &mut self,
        terminal: &mut Terminal<CrosstermBackend<std::io::Stdout>>,
        gate: &Gate,
    ) -> anyhow::Result<()> {
        let Some(id) = self.model.selected().map(|r| r.session_id.clone()) else {
            return Ok(());
        };
        if !gate.pause() {
            self.status =
                "the pager was not started: the terminal's reader did not stop".to_owned();
            return Ok(());
        }
        give_back_terminal();
        let paged = pager(&self.home, &id).await;
        take_terminal().context("cannot set up the terminal again after the pager")?;
        terminal.clear().context("cannot draw on the terminal")?;
        gate.resume();
        if let Err(err) = paged {
            self.status = format!("{err:#}");
        }
        Ok(())
    }
}

/// Runs `$PAGER` (default `less -R`) through `sh -c`, as git does, with the log
/// piped in chunk by chunk; a pager that quits early ends the copy.
async fn pager(home: &Home, id: &str) -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt;
    let program = std::env::var("PAGER")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| "less -R".to_owned());
    let mut client = Client::connect(home).await?;
    let mut command = crate::auxiliary::command("sh");
    command
        .arg("-c")
        .arg(&program)
        .stdin(std::process::Stdio::piped());
    let mut child = tokio::process::Command::from(command)
        .spawn()
        .with_context(|| format!("cannot run the pager `{program}` (set PAGER)"))?;
    let stdin = child.stdin.take();
    let copy = async move {
        let Some(mut stdin) = stdin else {
            return Ok(());
        };
        let mut from = 0u64;
        loop {
            let chunk = client
                .ask::<herd_protocol::methods::LogChunk>(&herd_protocol::params::FollowParams::new(
                    id, from,
                ))
                .await?;
            // A pager that quit closed the pipe: the copy just stops.
            if stdin.write_all(chunk.output.as_bytes()).await.is_err() {
                return Ok(());
            }
            let next = chunk.next_byte;
            if next <= from {
                return Ok::<(), anyhow::Error>(());
            }
            from = next;
        }
    };
    let (copied, status) = tokio::join!(copy, child.wait());
    let status = status.with_context(|| format!("the pager `{program}` failed"))?;
    copied.context("cannot read the log for the pager")?;
    if !status.success() {
        anyhow::bail!("the pager `{program}` ended with {status}");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
