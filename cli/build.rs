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
//!
//! The functions the short client commands run (`link/client-order.txt`, taken by
//! `cargo xtask client-order`) are placed together at the front of `herd`'s text
//! (`--symbol-ordering-file`). A client touches a few hundred of the binary's
//! ~50,000 functions; spread over 20 MB, nearly each cost a page fault of its own,
//! packed they share a few pages: `herd run --notify -- true` takes about 155 page
//! faults instead of 215 (`cli.client_page_faults`). Only where the linker takes
//! the option (lld, rustc's default linker on x86_64 Linux, and mold; a test link
//! of an empty program says), and never a change of what the code does: a name the
//! binary does not have (another toolchain, dependency or profile) is skipped.
//! `HERD_CLIENT_ORDER=0` at build time leaves the text in the linker's own order.

#![allow(
    clippy::print_stdout,
    reason = "a build script speaks to cargo on stdout"
)]

fn main() {
    println!("cargo:rerun-if-env-changed=HERD_PIE");
    println!("cargo:rerun-if-env-changed=HERD_SHARED_LIBGCC");
    println!("cargo:rerun-if-env-changed=HERD_CLIENT_ORDER");
    println!("cargo:rerun-if-changed={CLIENT_ORDER}");
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
    let order_wanted = std::env::var("HERD_CLIENT_ORDER").map_or(true, |v| v != "0");
    // Absolute: rustc runs the linker from the workspace, not this package.
    let list = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join(CLIENT_ORDER);
    let client_order = linux && order_wanted && list.is_file() && linker_orders_symbols(&list);
    if client_order {
        for arg in ordering_args(&list) {
            println!("cargo:rustc-link-arg-bin=herd={arg}");
        }
    }
    // What was decided, for the test that reads the binaries' linkage.
    println!(
        "cargo:rustc-env=HERD_BUILD_STATIC_UNWINDER={}",
        u8::from(static_unwinder)
    );
}

/// The list of the client's functions, from this package's directory.
const CLIENT_ORDER: &str = "link/client-order.txt";

/// The linker arguments that place the functions of `list` first, in its order.
fn ordering_args(list: &std::path::Path) -> [String; 2] {
    [
        format!("-Wl,--symbol-ordering-file={}", list.display()),
        // Names of another build (toolchain, profile, dependency) are expected.
        "-Wl,--no-warn-symbol-ordering".to_owned(),
    ]
}

/// Whether the linker the binaries are linked with takes `--symbol-ordering-file`
/// (lld and mold do, GNU ld and gold do not): an empty program is linked with the
/// same rustc, target, flags and linker, and the list.
#[expect(
    clippy::disallowed_methods,
    reason = "a build script asks rustc and the linker a question; no job is started"
)]
fn linker_orders_symbols(list: &std::path::Path) -> bool {
    let (Ok(out_dir), Ok(target)) = (std::env::var("OUT_DIR"), std::env::var("TARGET")) else {
        return false;
    };
    let dir = std::path::Path::new(&out_dir).join("client-order-probe");
    let source = dir.join("probe.rs");
    if std::fs::create_dir_all(&dir).is_err() || std::fs::write(&source, "fn main() {}\n").is_err()
    {
        return false;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let mut probe = std::process::Command::new(rustc);
    probe
        .args([
            "--crate-type",
            "bin",
            "--crate-name",
            "probe",
            "--target",
            &target,
        ])
        .arg("-o")
        .arg(dir.join("probe"))
        .arg(&source);
    for arg in ordering_args(list) {
        probe.arg("-C").arg(format!("link-arg={arg}"));
    }
    if let Ok(linker) = std::env::var("RUSTC_LINKER") {
        probe.arg("-C").arg(format!("linker={linker}"));
    }
    if let Ok(flags) = std::env::var("CARGO_ENCODED_RUSTFLAGS") {
        probe.args(flags.split('\x1f').filter(|flag| !flag.is_empty()));
    }
    probe
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
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
