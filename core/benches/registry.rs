//! Benchmark: ingest, spawn and completion latency against raw OS baselines.
fn main() {}
