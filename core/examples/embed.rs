//! A host that embeds `herd-core` alone: no daemon, no socket, no `herd-shim`.
//!
//! It builds a [`Registry`] on a home of its own with the in-process supervisor
//! (`RegistryConfig::shim` left at `None`, so sessions end with this process), turns
//! the self-kill guard on for this process, starts a job, waits for it, prints what
//! it printed (through the redactor, as every route does) and takes the completion
//! event the owner would be woken with. A second request, aimed at this process
//! itself, is refused by the guard and starts nothing.
//!
//! Needs: `herd-core` and a tokio runtime (`rt-multi-thread` and `macros` for
//! `#[tokio::main]`; the registry itself only needs to be created inside one).
//! Run it with `cargo run -p herd-core --example embed`.
#![allow(
    clippy::print_stdout,
    reason = "an example shows its results on stdout; a real host logs or answers them"
)]

use std::time::Duration;

use herd_core::{Home, Registry, RegistryConfig, SpawnError, SpawnRequest, render_events};
use herd_guards::Host;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Everything the registry writes (logs, checkpoint, ledger, receipts, scratch)
    // lives under the home. A real host keeps one per profile; the example uses a
    // temporary directory so it leaves nothing behind.
    let dir = tempfile::tempdir()?;
    let config = RegistryConfig {
        // Judge every command against this process before running it (B33).
        guard: Some(Host::current()),
        // No `herd-shim`: sessions are read and reaped by tasks on this runtime.
        shim: None,
        ..RegistryConfig::default()
    };
    let registry = Registry::new(Home::new(dir.path()), config)?;

    let info = registry
        .spawn(SpawnRequest {
            command: "echo building; echo 'token ghp_abcdefghijklmnopqrstuvwxyz0123456789'; exit 3"
                .to_owned(),
            task_id: "embed-example".to_owned(),
            notify: true,
            ..SpawnRequest::default()
        })
        .await?;
    println!("spawned {} (pid {})", info.session_id, info.pid);

    let done = registry
        .wait(info.session_id.as_str(), Duration::from_secs(30), None)
        .await?;
    println!(
        "{:?}: exit code {:?}, log at {}",
        done.status,
        done.exit_code,
        done.log_path.display()
    );
    println!("output (secrets masked):\n{}", done.output);

    // The completion the owner is woken with, delivered once.
    let events = registry.drain("embed-example");
    println!("completion for the owner:\n{}", render_events(&events));

    // The guard knows this process's own image; a command that would kill it is
    // refused with the rule and the remedy, and nothing runs.
    let own_image = Host::current()
        .images()
        .first()
        .cloned()
        .unwrap_or_default();
    match registry
        .spawn(SpawnRequest {
            command: format!("pkill -9 {own_image}"),
            task_id: "embed-example".to_owned(),
            ..SpawnRequest::default()
        })
        .await
    {
        Err(SpawnError::Guarded(block)) => println!("refused: {block}"),
        Err(other) => return Err(other.into()),
        Ok(info) => println!("the guard let {} through", info.session_id),
    }

    // Kill whatever is still running (nothing, here) before the home goes away.
    registry.shutdown().await;
    Ok(())
}
