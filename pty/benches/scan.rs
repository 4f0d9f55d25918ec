//! Benchmark: scanning realistic terminal output against a raw `memchr` pass.
fn main() {}
