//! The attached terminal: raw mode taken and given back, the replayed screen
//! painted, the job's output written as it comes.
//!
//! Giving back undoes what the job may have left switched on, as the emulator
//! that followed its output knows it: the alternate screen is left only when the
//! job is in it (leaving it otherwise would move the cursor to a saved spot),
//! the input modes (application cursor and keypad, bracketed paste, mouse
//! reporting) are reset, the cursor is shown and the colours cleared. A panic
//! gives back what is known without the emulator (raw mode off, cursor shown,
//! colours cleared, the alternate screen left) before the report is printed.

use std::io::Write;

use ratatui::crossterm::terminal;

/// Shows the cursor, clears the colours.
const PLAIN: &str = "\x1b[0m\x1b[?25h";

/// Leaves the alternate screen (xterm's 1049: the main screen and its cursor back).
const LEAVE_ALTERNATE: &str = "\x1b[?1049l";

/// Enters the alternate screen.
const ENTER_ALTERNATE: &str = "\x1b[?1049h";

/// The terminal in raw mode; given back by [`RawTerminal::give_back`] or, on an
/// error path, by `Drop`.
#[derive(Debug)]
pub(super) struct RawTerminal {
    is_given_back: bool,
}

impl RawTerminal {
    /// Puts the terminal in raw mode: keys come byte by byte, unechoed, and
    /// Ctrl-C or Ctrl-\ are bytes for the job, not signals for herd.
    ///
    /// # Errors
    /// A terminal whose mode cannot be set.
    pub(super) fn take() -> std::io::Result<RawTerminal> {
        install_panic_hook();
        terminal::enable_raw_mode()?;
        Ok(RawTerminal {
            is_given_back: false,
        })
    }

    /// Paints `screen` over the whole window, with its modes.
    ///
    /// # Errors
    /// A failed write to the terminal.
    pub(super) fn paint(&mut self, screen: &vt100::Screen) -> std::io::Result<()> {
        let mut text = String::new();
        if screen.alternate_screen() {
            text.push_str(ENTER_ALTERNATE);
        }
        // Clears the screen, draws every cell, puts the cursor where the job's is.
        text.push_str(&screen.state_formatted());
        self.write(&text)
    }

    /// Writes the job's output as it is.
    ///
    /// # Errors
    /// A failed write to the terminal.
    pub(super) fn write(&mut self, text: &str) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()
    }

    /// Gives the terminal back as the shell had it, whatever `screen` (the
    /// job's terminal as last seen) has switched on; the cursor at the start of
    /// a fresh line for what herd prints next.
    pub(super) fn give_back(&mut self, screen: &vt100::Screen) {
        let (rows, cols) = screen.size();
        let plain = vt100::Parser::new(rows, cols, 0);
        let mut text = String::new();
        if screen.alternate_screen() {
            text.push_str(LEAVE_ALTERNATE);
        } else {
            text.push_str("\r\n");
        }
        text.push_str(&plain.screen().input_mode_diff(screen));
        text.push_str(PLAIN);
        // The terminal may be gone already (SIGHUP): nothing else to do then.
        let _ = self.write(&text);
        let _ = terminal::disable_raw_mode();
        self.is_given_back = true;
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        if !self.is_given_back {
            give_back_blind();
        }
    }
}

/// Gives the terminal back without knowing the job's modes.
fn give_back_blind() {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(format!("{LEAVE_ALTERNATE}{PLAIN}\r\n").as_bytes());
    let _ = out.flush();
    let _ = terminal::disable_raw_mode();
}

/// A panic gives the terminal back before the report is printed, then ends the
/// process: the key reader and the log follower would be left talking to nothing.
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        give_back_blind();
        previous(info);
        std::process::exit(101);
    }));
}

/// The queries a job asks its terminal (B7) that `text` holds, in order, for
/// `out`: what the live stream sent while the screen was being rebuilt went to
/// the emulator only, and a job waiting for an answer must still get one from
/// the real terminal once it is painted.
pub(super) fn queries_in(text: &str, out: &mut String) {
    for (at, _) in text.match_indices('\x1b') {
        if let Some(len) = crate::output::query_len(&text[at..]) {
            out.push_str(&text[at..at + len]);
        }
    }
}
