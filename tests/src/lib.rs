//! herd-tests: cross-crate integration tests live in `tests/it/`; this library is empty.
