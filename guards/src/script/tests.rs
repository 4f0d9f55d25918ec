//! Unit tests for the `script` module.
