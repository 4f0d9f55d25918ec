//! herd-plugin-abi: the stable interface herd transform plugins compile against.
//!
//! Owns: the abi_stable root module, the hook entry point, the ABI version and a
//! panic-catching helper for plugin authors.
//! Never: depends on any other herd crate; a plugin links this and nothing else.
//! Depended on by: `herd-hooks` (the loader) and every plugin.
