//! Links the `herd` binary as a position-dependent executable (`-no-pie`).
//!
//! Every `herd` command is a new process, and most are short: `herd run --wait -- true`
//! is two process starts (this client and the job) around a few milliseconds of daemon
//! work. A position-independent `herd` carries about 32,000 relative relocations that
//! the dynamic loader applies at every start, dirtying ~140 pages of `.data.rel.ro`
//! (copy-on-write faults); linked `-no-pie` it has none, and a client starts about
//! 0.25 ms (~17 %) sooner (`cargo xtask bench`, `cli.client_start`). The cost is that
//! the executable's own image is not address-randomised (its libraries, stack and heap
//! still are); the daemon talks only to its own uid over a 0600 socket.
//!
//! Only the `herd` binary: the plugin cdylibs and the `herd-shim` launcher (started
//! once per daemon, then forking) are unchanged. `HERD_PIE=1` at build time keeps a
//! position-independent `herd` (for a distribution that requires PIE).

#![allow(
    clippy::print_stdout,
    reason = "a build script speaks to cargo on stdout"
)]

fn main() {
    println!("cargo:rerun-if-env-changed=HERD_PIE");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let pie_wanted = std::env::var("HERD_PIE").is_ok_and(|v| v == "1");
    if linux && !pie_wanted {
        println!("cargo:rustc-link-arg-bin=herd=-no-pie");
    }
}
