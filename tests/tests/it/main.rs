//! Cross-crate integration tests against real processes and real plugins: a real
//! `Registry` on a temporary home, its output pipeline built by the real plugin loader
//! from real cdylibs, and the self-kill guard judging real spawns (B30-B33).
//!
//! Build the plugin libraries first:
//! `cargo build -p herd-plugin-example -p herd-test-plugin-leak -p herd-test-plugin-noop -p herd-test-plugin-misbehave`.

mod guard;
mod plugins;
mod redaction;
mod seam;
mod support;
