//! Scripts read through the real file system.
