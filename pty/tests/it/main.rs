//! Live PTY test: a real child under a real PTY asks for its cursor position and
//! blocks until the scanner's reply arrives.

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};

#[test]
fn b7_live_child_blocked_on_a_cursor_query_is_answered() {
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 30,
            cols: 120,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("this machine can open a PTY");
    // Raw mode without echo: the reply is read as 6 bytes, not echoed into the output.
    let script =
        r#"stty raw -echo; printf alpha; printf '\033[6n'; head -c 6 >/dev/null; printf ok"#;
    let mut cmd = CommandBuilder::new("/bin/sh");
    cmd.args(["-c", script]);
    let mut child = pty
        .slave
        .spawn_command(cmd)
        .expect("spawn /bin/sh on the PTY");
    drop(pty.slave);
    let mut reader = pty.master.try_clone_reader().expect("PTY reader");
    let mut writer = pty.master.take_writer().expect("PTY writer");

    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    let reader_thread = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
            }
        }
    });

    let mut scanner = herd_pty::Scanner::new(30, 120);
    let mut captured = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !captured.ends_with(b"ok") {
        let left = deadline.saturating_duration_since(Instant::now());
        let chunk = rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!(
                "waited 20 s for `ok` after the cursor query; captured so far: {:?}",
                String::from_utf8_lossy(&captured)
            )
        });
        let scan = scanner.feed(&chunk);
        captured.extend_from_slice(&scan.output);
        if !scan.replies.is_empty() {
            writer
                .write_all(&scan.replies)
                .expect("write the reply to the PTY");
            writer.flush().expect("flush the reply");
        }
    }
    let status = child.wait().expect("child exits after printing ok");
    assert!(status.success(), "child failed: {status:?}");
    drop(writer);
    drop(pty.master);
    let _ = reader_thread.join();

    let text = String::from_utf8_lossy(&captured);
    assert!(text.contains("alpha"), "{text:?}");
    assert!(text.ends_with("ok"), "{text:?}");
    assert!(
        !captured.windows(4).any(|w| w == b"\x1b[6n"),
        "query bytes leaked: {text:?}"
    );
    assert_eq!(scanner.n_queries(), 1);
}
