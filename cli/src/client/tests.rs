//! Unit tests of the client's error mapping and socket-path check.

use std::path::PathBuf;

use super::{MAX_SOCKET_PATH_BYTES, check_socket_path, rpc_failure};
use crate::exit::{Code, code_of};
use crate::protocol::{self, RpcError};

#[test]
fn daemon_errors_map_to_the_documented_exit_codes() {
    for (code, exit) in [
        (protocol::NOT_FOUND, Code::Usage),
        (protocol::INVALID_PARAMS, Code::Usage),
        (protocol::UNSUPPORTED, Code::Usage),
        (protocol::GUARDED, Code::Failed),
        (protocol::INTERNAL_ERROR, Code::Failed),
        (protocol::VERSION_MISMATCH, Code::Unreachable),
        (protocol::PEER_REFUSED, Code::Unreachable),
    ] {
        let err = rpc_failure(RpcError::new(code, "message for the user"));
        assert_eq!(code_of(&err), exit, "code {code}");
        assert_eq!(err.to_string(), "message for the user");
    }
}

#[test]
fn socket_paths_are_checked_against_the_os_limit() {
    let fits = PathBuf::from(format!("/{}", "a".repeat(MAX_SOCKET_PATH_BYTES - 1)));
    check_socket_path(&fits).expect("107 bytes fit");
    let long = PathBuf::from(format!("/{}", "a".repeat(MAX_SOCKET_PATH_BYTES)));
    let err = check_socket_path(&long).expect_err("108 bytes do not fit");
    assert_eq!(code_of(&err), Code::Usage);
    assert!(err.to_string().contains("107 bytes"), "{err}");
}
