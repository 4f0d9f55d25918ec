//! Unit tests for the `host` module.
