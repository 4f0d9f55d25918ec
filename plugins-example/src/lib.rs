//! herd-plugin-example: a transform plugin that makes terminal output agent-friendly.
//!
//! Owns: nothing of herd; it is built against `herd-plugin-abi` alone and is the
//! template plugin authors copy.
