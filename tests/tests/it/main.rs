//! Cross-crate integration tests against real processes and real plugins.
