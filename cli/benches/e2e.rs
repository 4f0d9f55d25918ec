//! End-to-end benchmarks of the herd binary (placeholder until the daemon is wired).
fn main() {}
