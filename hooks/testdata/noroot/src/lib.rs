//! Test plugin: a valid shared library that does not export herd's root module.

/// A symbol so the library is not empty.
#[unsafe(no_mangle)]
pub extern "C" fn herd_test_not_a_plugin() -> u32 {
    42
}
