//! The `herd-bench` line every core benchmark prints, shared by the bench binaries
//! that report milliseconds (each includes this file with `#[path]`).

use std::time::Duration;

/// A duration in milliseconds.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Prints one figure in milliseconds, with its same-run baseline and their ratio.
pub(crate) fn emit(
    name: &str,
    value: f64,
    baseline: Option<(f64, &str)>,
    target: Option<&str>,
    note: &str,
) {
    let (baseline_value, baseline_name, ratio) = match baseline {
        Some((b, n)) => (
            serde_json::json!(b),
            serde_json::json!(n),
            serde_json::json!(value / b),
        ),
        None => (
            serde_json::Value::Null,
            serde_json::Value::Null,
            serde_json::Value::Null,
        ),
    };
    let line = serde_json::json!({
        "name": name,
        "unit": "ms",
        "value": value,
        "baseline": baseline_value,
        "baseline_name": baseline_name,
        "ratio": ratio,
        "target": target,
        "note": note,
    });
    println!("herd-bench {line}");
}
