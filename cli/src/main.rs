//! herd: the binary — daemon, client commands and MCP server.
fn main() {}
