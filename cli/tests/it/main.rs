//! End-to-end tests of the herd binary.
