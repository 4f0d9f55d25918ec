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
