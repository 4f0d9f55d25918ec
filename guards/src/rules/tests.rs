//! Unit tests for the `rules` module.
