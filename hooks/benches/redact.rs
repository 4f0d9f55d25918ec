//! Benchmark: redaction throughput and the cost of one call into a plugin.
fn main() {}
