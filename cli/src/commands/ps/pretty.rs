//! `ps --json` of a long list without a `Value` of it: the daemon's compact answer
//! indented as `serde_json::to_string_pretty` writes the same value.

/// `json`, compact as serde_json writes it, indented by two spaces a level as
/// [`serde_json::to_string_pretty`] indents the value it holds (an empty array or
/// object stays `[]`/`{}`, a key is followed by `": "`). Strings are copied as they
/// are: serde_json escapes a string the same way whichever writer it goes through.
pub(super) fn pretty(json: &str) -> String {
    let bytes = json.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 2);
    let mut depth = 0usize;
    let mut at = 0;
    while let Some(&b) = bytes.get(at) {
        match b {
            b'"' => {
                let end = string_end(bytes, at);
                out.extend_from_slice(&bytes[at..end]);
                at = end;
                continue;
            }
            b'{' | b'[' => {
                let close = if b == b'{' { b'}' } else { b']' };
                if bytes.get(at + 1) == Some(&close) {
                    out.extend_from_slice(&[b, close]);
                    at += 2;
                    continue;
                }
                depth += 1;
                out.push(b);
                newline(&mut out, depth);
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(b);
            }
            b',' => {
                out.push(b);
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            b' ' | b'\n' | b'\r' | b'\t' => {}
            _ => out.push(b),
        }
        at += 1;
    }
    // Only whole strings and ASCII punctuation were copied or added.
    String::from_utf8(out).unwrap_or_default()
}

/// The index just past the string that starts at `start` (its opening quote).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    while let Some(found) = memchr::memchr2(b'"', b'\\', &bytes[at..]) {
        at += found;
        if bytes[at] == b'\\' {
            at += 2;
        } else {
            return at + 1;
        }
    }
    bytes.len()
}

fn newline(out: &mut Vec<u8>, depth: usize) {
    out.push(b'\n');
    out.extend(std::iter::repeat_n(b' ', 2 * depth));
}

#[cfg(test)]
mod tests {
    use super::pretty;

    #[test]
    fn pretty_indents_as_serde_json_does() {
        let value = serde_json::json!({
            "processes": [
                {"session_id": "proc_1", "command": "echo \"a, b: {c}\" \\ [d]", "leftovers": [],
                 "usage": {"cpu": 0.25, "memory": 1024}, "empty": {}, "none": null, "yes": true},
                {"session_id": "proc_2", "output_preview": "line\nnext\u{1b}[0m é"}
            ],
            "older": 3
        });
        let compact = serde_json::to_string(&value).expect("compact");
        let expected = serde_json::to_string_pretty(&value).expect("pretty");
        assert_eq!(pretty(&compact), expected);
        assert_eq!(pretty("[]"), "[]");
        assert_eq!(
            pretty("{\"a\":[1,2]}"),
            serde_json::to_string_pretty(&serde_json::json!({"a": [1, 2]})).expect("pretty")
        );
    }
}
