//! `herd-pty` alone: answering a program's terminal queries without a terminal.
//!
//! A host that runs programs under a PTY of its own feeds every chunk it reads from
//! the PTY master to one [`Scanner`] per session, keeps `output` (the queries
//! removed) and writes `replies` back to the master. Here the chunks are canned, as
//! a read loop might see them: a cursor-position query split across two reads is
//! answered once, when its last byte arrives, and a window-size query is answered
//! from the size the host set.
//!
//! Needs: `herd-pty` only (no features, no runtime; it does no I/O).
//! Run it with `cargo run -p herd-pty --example respond`.
#![allow(
    clippy::print_stdout,
    reason = "an example shows its results on stdout; a real host writes replies to the PTY"
)]

use herd_pty::Scanner;

fn main() {
    // The size the host gave the PTY; `set_size` follows a resize.
    let mut scanner = Scanner::new(24, 80);
    let reads: [&[u8]; 4] = [
        b"starting\r\n\x1b[",
        b"6nprompt> ",
        b"\x1b[18t",
        b"\x1b[1mbold stays\x1b[0m\r\n",
    ];
    let mut kept = Vec::new();
    for (idx, chunk) in reads.iter().enumerate() {
        let scan = scanner.feed(chunk);
        kept.extend_from_slice(&scan.output);
        println!(
            "read {idx}: {} bytes in, {} bytes kept, replies to write back: {:?}",
            chunk.len(),
            scan.output.len(),
            String::from_utf8_lossy(&scan.replies)
        );
    }
    // At end of stream, an unfinished sequence is output after all.
    kept.extend_from_slice(&scanner.flush());
    println!(
        "answered {} queries, stripped {} bytes",
        scanner.n_queries(),
        scanner.stripped_bytes()
    );
    println!("output kept: {:?}", String::from_utf8_lossy(&kept));
}
