//! Unit tests for the registry's static guarantees and pure helpers.

use super::*;

fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}

#[test]
fn registry_is_cheap_to_share_across_tasks() {
    assert_send_sync::<Registry>();
}

#[test]
fn registry_needs_a_runtime() {
    let dir = std::env::temp_dir();
    match Registry::new(Home::new(dir), RegistryConfig::default()) {
        Err(Error::NoRuntime) => {}
        other => panic!("expected NoRuntime outside a runtime, got {other:?}"),
    }
}

#[test]
fn lifecycle_sources_spare_persistent_sessions() {
    assert!(KillSource::KillAll.spares_persistent());
    assert!(KillSource::TurnTimeout.spares_persistent());
    assert!(KillSource::AgentClose.spares_persistent());
    assert!(!KillSource::ProcessKill.spares_persistent());
    assert!(!KillSource::OperatorStop.spares_persistent());
    assert!(!KillSource::HostShutdown.spares_persistent());
}
