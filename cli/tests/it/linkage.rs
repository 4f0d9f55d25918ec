//! How the binaries are linked (`cli/build.rs`): `herd` position-dependent, and both
//! `herd` and `herd-shim` carrying GCC's unwinder instead of loading `libgcc_s` at
//! every start, with panics still unwinding. This test binary is linked by the same
//! build script, so it is the unwinding's witness.

use std::path::Path;

use object::read::elf::{Dyn, ElfFile64, FileHeader};
use object::{Endianness, elf};

/// The shared libraries an ELF file asks for (`DT_NEEDED`).
fn needed(path: &Path) -> Vec<String> {
    let image = std::fs::read(path).expect("the binary is readable");
    let file = ElfFile64::<Endianness>::parse(&*image).expect("the binary is ELF");
    let endian = file.endian();
    let data = &*image;
    let sections = file
        .elf_header()
        .sections(endian, data)
        .expect("the section table reads");
    let Some((entries, link)) = sections.dynamic(endian, data).expect("`.dynamic` reads") else {
        return Vec::new();
    };
    let strings = sections
        .strings(endian, data, link)
        .expect("the dynamic string table");
    entries
        .iter()
        .filter(|entry| entry.tag32(endian) == i32::try_from(elf::DT_NEEDED).ok())
        .map(|entry| {
            let name = entry.string(endian, strings).expect("a needed name");
            String::from_utf8_lossy(name).into_owned()
        })
        .collect()
}

/// Whether this build links the static unwinder, as `cli/build.rs` decided it (the
/// C compiler knows `libgcc_eh.a` and nobody asked for the shared library).
fn static_unwinder_linked() -> bool {
    env!("HERD_BUILD_STATIC_UNWINDER") == "1"
}

#[test]
fn the_binaries_start_without_libgcc_s_and_still_unwind() {
    let herd = Path::new(env!("CARGO_BIN_EXE_herd"));
    let shim = Path::new(env!("CARGO_BIN_EXE_herd-shim"));
    let this = std::env::current_exe().expect("the test knows its own path");
    for binary in [herd, shim, &this] {
        let needed = needed(binary);
        assert!(
            needed.iter().any(|n| n.starts_with("libc.so")),
            "{} reads as a dynamic executable: {needed:?}",
            binary.display()
        );
        if static_unwinder_linked() {
            assert!(
                !needed.iter().any(|n| n.starts_with("libgcc_s")),
                "{} still loads libgcc_s: {needed:?}",
                binary.display()
            );
        }
    }
    // This binary is linked the same way: a panic unwinds to its catcher, and a
    // backtrace walks the frames up to this test.
    let caught = std::panic::catch_unwind(|| {
        let trace = std::backtrace::Backtrace::force_capture();
        panic!(
            "{}\n{trace}",
            trace.status() == std::backtrace::BacktraceStatus::Captured
        );
    });
    let payload = caught.expect_err("the panic is caught, not an abort");
    let message = payload
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(
        message.starts_with("true\n") && message.contains("the_binaries_start_without_libgcc_s"),
        "the backtrace walked the stack to this test: {message}"
    );
}

#[test]
fn herd_is_position_dependent_unless_asked() {
    let image = std::fs::read(env!("CARGO_BIN_EXE_herd")).expect("readable");
    let file = ElfFile64::<Endianness>::parse(&*image).expect("ELF");
    let kind = file.elf_header().e_type(file.endian());
    if option_env!("HERD_PIE") == Some("1") {
        assert_eq!(kind, elf::ET_DYN, "HERD_PIE=1 keeps a PIE");
    } else {
        assert_eq!(kind, elf::ET_EXEC, "herd is linked -no-pie");
    }
}
