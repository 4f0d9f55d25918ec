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
//!
//! Both binaries also carry GCC's unwinder (`libgcc_eh.a`) inside them instead of
//! loading `libgcc_s.so.1` at every start: Rust's standard library asks for
//! `libgcc_s` only for the unwinder (`_Unwind_*`, for panics and backtraces), and
//! with those symbols already defined by the archive, linked whole ahead of the
//! standard library, the linker (`--as-needed`) drops the shared library. One object
//! fewer to find, map and relocate, and no `libgcc_s` constructor probing the CPU
//! (`cpuid`, a trap to the hypervisor in a VM): about 0.1 ms of every client's start
//! (`perf stat -r 500` of a C program with and without `libgcc_s`). A plugin library
//! keeps its own `libgcc_s`; each unwinder walks its own frames. When the C
//! compiler does not know the archive (`cc -print-file-name`), the binaries link
//! `libgcc_s` as before. `HERD_SHARED_LIBGCC=1` at build time keeps it too.

#![allow(
    clippy::print_stdout,
    reason = "a build script speaks to cargo on stdout"
)]

fn main() {
    println!("cargo:rerun-if-env-changed=HERD_PIE");
    println!("cargo:rerun-if-env-changed=HERD_SHARED_LIBGCC");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let pie_wanted = std::env::var("HERD_PIE").is_ok_and(|v| v == "1");
    if linux && !pie_wanted {
        println!("cargo:rustc-link-arg-bin=herd=-no-pie");
    }
    let gnu = std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|env| env == "gnu");
    let shared_wanted = std::env::var("HERD_SHARED_LIBGCC").is_ok_and(|v| v == "1");
    let static_unwinder = linux && gnu && !shared_wanted && static_unwinder_known();
    if static_unwinder {
        // Whole, so its `_Unwind_*` are defined before the standard library's
        // `-lgcc_s` is reached (an archive otherwise gives only what was asked
        // before it); not bundled into an rlib, linked where the binaries are.
        println!("cargo:rustc-link-lib=static:+whole-archive,-bundle=gcc_eh");
    }
    // What was decided, for the test that reads the binaries' linkage.
    println!(
        "cargo:rustc-env=HERD_BUILD_STATIC_UNWINDER={}",
        u8::from(static_unwinder)
    );
}

/// Whether the C compiler that links the binaries has GCC's static unwinder: it
/// prints the archive's full path when it knows it, the bare name when not.
#[expect(
    clippy::disallowed_methods,
    reason = "a build script asks the C compiler a question; no job is started"
)]
fn static_unwinder_known() -> bool {
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    std::process::Command::new(compiler)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .is_some_and(|path| {
            let path = std::path::Path::new(path.trim());
            path.is_absolute() && path.is_file()
        })
}
