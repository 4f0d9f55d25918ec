//! Unit tests of the outlet: a far note passes byte for byte, anything else does not.

use serde_json::json;
use tokio::io::{AsyncReadExt, BufReader};
use tokio::net::UnixStream;

use super::super::Writer;
use super::{Outlet, is_note};
use crate::protocol::Response;
use crate::protocol::escape::log_note_line;

#[test]
fn a_note_is_recognised_by_how_the_daemon_writes_it() {
    let note = Response::notification("log", json!({"output": "x"})).to_line();
    assert!(is_note(&note), "{}", String::from_utf8_lossy(&note));
    let log = log_note_line("x\ty\u{1}é");
    assert!(is_note(&log), "{}", String::from_utf8_lossy(&log));
    let answer = Response::ok(json!(7), json!({"next_byte": 3})).to_line();
    assert!(!is_note(&answer), "{}", String::from_utf8_lossy(&answer));
}

#[tokio::test]
async fn pass_writes_a_note_as_it_came_and_refuses_an_answer() {
    let (server, mut client) = UnixStream::pair().expect("a socket pair opens");
    let (read, writer) = server.into_split();
    let mut writer = Writer::new(writer);
    let mut reader = BufReader::new(read);
    let mut outlet = Outlet::new(&mut reader, &mut writer, json!(7));

    let mut note = log_note_line("far output\r\n\"quoted\"");
    note.pop();
    let sent = note.clone();
    assert_eq!(outlet.pass(&mut note).await, Ok(true));

    let mut answer = br#"{"jsonrpc":"2.0","id":1,"result":{"next_byte":3}}"#.to_vec();
    let before = answer.clone();
    assert_eq!(outlet.pass(&mut answer).await, Ok(false));
    assert_eq!(answer, before, "a refused line is left as it was");

    outlet.answer(Ok(json!({"next_byte": 3}))).await;
    drop(writer);
    let mut got = Vec::new();
    client
        .read_to_end(&mut got)
        .await
        .expect("the client reads to the end");
    let mut expected = sent;
    expected.push(b'\n');
    expected.extend_from_slice(&Response::ok(json!(7), json!({"next_byte": 3})).to_line());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&expected)
    );
}
