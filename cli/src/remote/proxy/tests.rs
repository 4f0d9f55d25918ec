//! The one line the proxy touches: the first answer gains `proxy`, nothing else changes.

use serde_json::{Value, json};

use super::with_proxy_info;

fn parsed(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("the proxy writes JSON")
}

#[test]
fn hello_answer_gains_proxy_info() {
    let line =
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocol\":1,\"home\":\"/h\"}}\n".to_vec();
    let out = with_proxy_info(line);
    assert_eq!(out.last(), Some(&b'\n'));
    let value = parsed(&out);
    assert_eq!(value["result"]["home"], "/h");
    assert_eq!(value["result"]["proxy"]["os"], std::env::consts::OS);
    assert_eq!(value["result"]["proxy"]["arch"], std::env::consts::ARCH);
    assert_eq!(
        value["result"]["proxy"]["uid"],
        json!(nix::unistd::getuid().as_raw())
    );
}

#[test]
fn refused_hello_carries_proxy_info_in_its_data() {
    let line =
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32011,\"message\":\"mismatch\"}}\n"
            .to_vec();
    let value = parsed(&with_proxy_info(line));
    assert_eq!(value["error"]["message"], "mismatch");
    assert_eq!(
        value["error"]["data"]["proxy"]["version"],
        env!("CARGO_PKG_VERSION")
    );
}

#[test]
fn other_lines_pass_unchanged() {
    for line in [
        b"not json\n".to_vec(),
        b"[1,2]\n".to_vec(),
        b"{\"jsonrpc\":\"2.0\",\"method\":\"event\"}\n".to_vec(),
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":true}\n".to_vec(),
    ] {
        assert_eq!(with_proxy_info(line.clone()), line);
    }
}
