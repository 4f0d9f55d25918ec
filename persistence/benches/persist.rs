//! Benchmark: checkpoint writes, ledger commits and restore reads.
fn main() {}
