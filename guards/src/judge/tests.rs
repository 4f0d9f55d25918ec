//! Unit tests for the `judge` module.
