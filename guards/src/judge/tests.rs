//! Unit tests for the `judge` module's text helpers.

use super::{awk_patterns, code_texts, decode_utf16_base64, path_key, verb_in};
use crate::host::Host;

#[test]
fn b33_code_literals_and_argv_runs_are_extracted() {
    let texts = code_texts(
        "import subprocess\nsubprocess.run([\"pkill\", \"-9\", \"python3\"], check=True)",
    );
    assert!(texts.contains(&"pkill -9 python3".to_owned()), "{texts:?}");
    let texts = code_texts("os.system('herd shutdown')  # 'ignored comment'");
    assert_eq!(texts, ["herd shutdown"]);
    let texts = code_texts("spawn('pkill', ['-f', 'agent'])");
    assert!(texts.contains(&"pkill -f agent".to_owned()), "{texts:?}");
}

#[test]
fn awk_regexes_and_strings_are_patterns() {
    assert_eq!(awk_patterns("/python/ {print $2}"), ["python"]);
    assert_eq!(awk_patterns("$11 == \"python3\" {print $2}"), ["python3"]);
    assert!(awk_patterns("{print $2}").is_empty());
}

#[test]
fn encoded_powershell_decodes() {
    let decoded = decode_utf16_base64("UwB0AG8AcAAtAFAAcgBvAGMAZQBzAHMA");
    assert_eq!(decoded.as_deref(), Some("Stop-Process"));
    assert_eq!(decode_utf16_base64("not base64!"), None);
}

#[test]
fn b33_verb_scan_needs_a_kill_verb_or_a_managed_lifecycle() {
    let host = Host::new(vec!["herd".to_owned()], "");
    assert_eq!(
        verb_in("echo \"pk'ill python", &host).as_deref(),
        Some("pkill")
    );
    assert_eq!(
        verb_in("(herd daemon re\"start", &host).as_deref(),
        Some("restart")
    );
    assert_eq!(verb_in("echo 'please restart the gateway", &host), None);
    assert_eq!(verb_in("for ((", &host), None);
}

#[test]
fn written_and_run_paths_share_a_key() {
    assert_eq!(path_key("./././x.sh"), "x.sh");
    assert_eq!(path_key("dir/x.sh"), "dir/x.sh");
}
