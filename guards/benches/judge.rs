//! Benchmark: median judge time over a corpus of realistic commands.
fn main() {}
