//! The example plugin's transform as a filter: raw terminal output on stdin, what
//! herd would show an agent on stdout.
//!
//! `testdata/README.md` uses it to measure the savings on the recorded logs:
//! `cargo run -q -p herd-plugin-example --example tidy < testdata/cargo-build.pty.log`.
//! Invalid UTF-8 is replaced, as herd does before plugins see output.

use std::io::{self, Read, Write};

fn main() -> io::Result<()> {
    let mut raw = Vec::new();
    io::stdin().read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let shown = herd_plugin_example::tidy(&text).unwrap_or_else(|| text.into_owned());
    io::stdout().write_all(shown.as_bytes())
}
