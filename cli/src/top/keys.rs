//! Keys: the terminal's input thread, what each key does, and the one-line
//! input (filter text, a handoff's owner, a kill's confirmation).
//!
//! The input thread reads the terminal with crossterm and forwards events to the
//! UI loop. It can be paused: the log pager takes the terminal over, and a thread
//! still reading would steal its keys. Pausing waits until the thread has
//! parked between two reads (each read waits at most [`READ_SLICE`]), so no key
//! meant for the pager is taken.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// How long one read waits before the thread looks at its pause flag.
const READ_SLICE: Duration = Duration::from_millis(50);
/// How long a pause waits for the thread to park.
const PARK_DEADLINE: Duration = Duration::from_secs(2);

/// A key, as `top` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    Char(char),
    Enter,
    Esc,
    Backspace,
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    /// Ctrl-C (raw mode delivers it as a key, not as SIGINT).
    Interrupt,
}

impl Key {
    /// The key of a terminal key event; `None` for releases and keys `top` ignores.
    pub(crate) fn of(event: KeyEvent) -> Option<Key> {
        if event.kind == KeyEventKind::Release {
            return None;
        }
        let ctrl = event.modifiers.contains(KeyModifiers::CONTROL);
        Some(match event.code {
            KeyCode::Char('c' | 'C') if ctrl => Key::Interrupt,
            KeyCode::Char(_) if ctrl => return None,
            KeyCode::Char(c) => Key::Char(c),
            KeyCode::Enter => Key::Enter,
            KeyCode::Esc => Key::Esc,
            KeyCode::Backspace => Key::Backspace,
            KeyCode::Up => Key::Up,
            KeyCode::Down => Key::Down,
            KeyCode::PageUp => Key::PageUp,
            KeyCode::PageDown => Key::PageDown,
            KeyCode::Home => Key::Home,
            KeyCode::End => Key::End,
            _ => return None,
        })
    }
}

/// What a key asks for when no input line is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    Quit,
    Move(isize),
    Page(isize),
    Edge {
        last: bool,
    },
    CycleSort,
    ReverseSort,
    ToggleFinished,
    /// `f`: the pane takes the screen, or gives it back.
    Follow,
    /// `/`: open the filter line.
    Filter,
    Kill,
    Restart,
    Handoff,
    /// `l`: the whole log in `$PAGER`.
    Log,
    /// Esc: leave the zoomed pane, clear the status.
    Back,
}

/// The command bound to `key`, if any.
pub(crate) fn command(key: Key) -> Option<Command> {
    Some(match key {
        Key::Char('q') | Key::Interrupt => Command::Quit,
        Key::Up => Command::Move(-1),
        Key::Down => Command::Move(1),
        Key::PageUp => Command::Page(-1),
        Key::PageDown | Key::Char(' ') => Command::Page(1),
        Key::Home | Key::Char('g') => Command::Edge { last: false },
        Key::End | Key::Char('G') => Command::Edge { last: true },
        Key::Char('s') => Command::CycleSort,
        Key::Char('S') => Command::ReverseSort,
        Key::Char('a') => Command::ToggleFinished,
        Key::Char('f') | Key::Enter => Command::Follow,
        Key::Char('/') => Command::Filter,
        Key::Char('k') => Command::Kill,
        Key::Char('r') => Command::Restart,
        Key::Char('h') => Command::Handoff,
        Key::Char('l') => Command::Log,
        Key::Esc => Command::Back,
        _ => return None,
    })
}

/// What one key did to an input line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Edit {
    /// The text changed (or not); the line stays open.
    Typing,
    /// Enter: the text is final.
    Submit,
    /// Esc or Ctrl-C: the line is abandoned.
    Cancel,
}

/// The most characters an input line takes.
pub(crate) const MAX_INPUT_CHARS: usize = 200;

/// Applies `key` to the input line `text`.
pub(crate) fn edit(text: &mut String, key: Key) -> Edit {
    match key {
        Key::Enter => Edit::Submit,
        Key::Esc | Key::Interrupt => Edit::Cancel,
        Key::Backspace => {
            text.pop();
            Edit::Typing
        }
        Key::Char(c) if !c.is_control() && text.chars().count() < MAX_INPUT_CHARS => {
            text.push(c);
            Edit::Typing
        }
        _ => Edit::Typing,
    }
}

/// What the input thread forwards.
#[derive(Debug)]
pub(crate) enum Input {
    Key(Key),
    /// The terminal was resized (a redraw picks the new size up).
    Resize,
    /// Reading the terminal failed; `top` ends with this error.
    Failed(std::io::Error),
}

#[derive(Debug, Default)]
struct GateState {
    paused: bool,
    parked: bool,
}

/// Pauses and resumes the input thread.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gate {
    inner: Arc<(Mutex<GateState>, Condvar)>,
}

impl Gate {
    /// Stops the thread reading and waits until it is parked (at most
    /// [`PARK_DEADLINE`]; a thread stuck in a read is then reported, not waited for).
    pub(crate) fn pause(&self) -> bool {
        let (lock, cv) = &*self.inner;
        let Ok(mut state) = lock.lock() else {
            return false;
        };
        state.paused = true;
        cv.notify_all();
        match cv.wait_timeout_while(state, PARK_DEADLINE, |s| !s.parked) {
            Ok((state, _)) => state.parked,
            Err(_) => false,
        }
    }

    /// Lets the thread read again.
    pub(crate) fn resume(&self) {
        let (lock, cv) = &*self.inner;
        if let Ok(mut state) = lock.lock() {
            state.paused = false;
            cv.notify_all();
        }
    }

    /// Parks the calling (input) thread while paused.
    fn wait_while_paused(&self) {
        let (lock, cv) = &*self.inner;
        let Ok(mut state) = lock.lock() else {
            return;
        };
        while state.paused {
            state.parked = true;
            cv.notify_all();
            state = match cv.wait(state) {
                Ok(state) => state,
                Err(_) => return,
            };
        }
        state.parked = false;
    }
}

/// Starts the input thread; it ends when the receiver is gone.
///
/// # Errors
/// When the thread cannot be started.
pub(crate) fn spawn(
    gate: Gate,
    tx: tokio::sync::mpsc::UnboundedSender<Input>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("herd-top-input".into())
        .spawn(move || {
            loop {
                gate.wait_while_paused();
                if tx.is_closed() {
                    return;
                }
                let ready = match event::poll(READ_SLICE) {
                    Ok(ready) => ready,
                    Err(err) => {
                        let _ = tx.send(Input::Failed(err));
                        return;
                    }
                };
                if !ready {
                    continue;
                }
                let input = match event::read() {
                    Ok(Event::Key(key)) => match Key::of(key) {
                        Some(key) => Input::Key(key),
                        None => continue,
                    },
                    Ok(Event::Resize(..)) => Input::Resize,
                    Ok(_) => continue,
                    Err(err) => Input::Failed(err),
                };
                let failed = matches!(input, Input::Failed(_));
                if tx.send(input).is_err() || failed {
                    return;
                }
            }
        })
}
