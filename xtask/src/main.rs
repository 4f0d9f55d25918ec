//! xtask: maintainer tasks for herd.
fn main() {}
