//! The `herd-bench` figure line the benches print, one JSON object per figure
//! (`cargo xtask bench` reads them): the value, its same-run baseline and their
//! ratio, an optional target and a note.

use serde_json::{Value, json};

/// The line for one figure: `herd-bench {…}`.
pub fn figure_line(
    name: &str,
    unit: &str,
    value: f64,
    baseline: Option<(f64, &str)>,
    target: Option<&str>,
    note: &str,
) -> String {
    let (base, base_name, ratio) = match baseline {
        Some((b, n)) => (json!(b), json!(n), json!(value / b)),
        None => (Value::Null, Value::Null, Value::Null),
    };
    let line = json!({
        "name": name, "unit": unit, "value": value, "baseline": base, "baseline_name": base_name,
        "ratio": ratio, "target": target, "note": note,
    });
    format!("herd-bench {line}")
}

/// The median of `samples` (the upper one of an even count).
///
/// # Panics
/// When `samples` is empty: a figure needs at least one run.
#[must_use]
pub fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// `min-max` of `samples`, each with `digits` decimals: the spread a figure's note
/// reports.
#[must_use]
pub fn spread(samples: &[f64], digits: usize) -> String {
    let lo = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{lo:.digits$}-{hi:.digits$}")
}

/// `a[i] / b[i]` for each run both have: the paired ratios of two figures measured
/// in alternation, whose spread a note reports beside the medians' ratio.
#[must_use]
pub fn paired_ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x / y).collect()
}

/// One JSON-RPC connection to a daemon's socket, for benches that drive the
/// protocol directly.
#[derive(Debug)]
pub struct Conn {
    reader: std::io::BufReader<std::os::unix::net::UnixStream>,
    writer: std::os::unix::net::UnixStream,
    next: u64,
}

impl Conn {
    /// Connects to the daemon of the home at `root` and says hello.
    ///
    /// # Panics
    /// When the socket does not answer: a bench cannot go on without it.
    #[must_use]
    pub fn open(root: &std::path::Path) -> Conn {
        let stream = std::os::unix::net::UnixStream::connect(root.join("run/herd.sock"))
            .expect("the daemon's socket");
        let mut conn = Conn {
            reader: std::io::BufReader::new(stream.try_clone().expect("clone")),
            writer: stream,
            next: 0,
        };
        conn.call("hello", json!({"protocol": 1, "client": "bench"}));
        conn
    }

    /// One call and its result.
    ///
    /// # Panics
    /// When the daemon answers an error or the connection fails.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        use std::io::{BufRead, Write};
        self.next += 1;
        let request =
            json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        self.writer
            .write_all(format!("{request}\n").as_bytes())
            .expect("write");
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("read");
        let answer: Value = serde_json::from_str(&line).expect("json");
        assert!(answer["error"].is_null(), "{method}: {answer}");
        answer["result"].clone()
    }
}
