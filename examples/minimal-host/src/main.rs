//! The smallest host of `herd-core`: built with `default-features = false` (no plugin
//! loading, no SQLite store, no PTY), it makes a [`Registry`] on a home of its own,
//! runs a real job, waits for it, reads its output, and checks that the self-kill
//! guard refuses a command that would kill this process. It exits non-zero, saying
//! what was wrong, when any of that does not hold; CI builds and runs it
//! (`cargo run -p herd-minimal-host`).
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example program reports what it checked on its own stdout and stderr"
)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use herd_core::{Home, Registry, RegistryConfig, SpawnError, SpawnRequest, WaitStatus};
use herd_guards::Host;

/// The line the job prints, and its exit code.
const GREETING: &str = "hello from a herd job";
const EXIT_CODE: i32 = 3;

#[tokio::main]
async fn main() -> ExitCode {
    let home = match fresh_home() {
        Ok(home) => home,
        Err(e) => {
            eprintln!("minimal-host: cannot make a home directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = run(&home).await;
    // The home is this run's alone; leave nothing behind whatever happened.
    let _ = std::fs::remove_dir_all(&home);
    match outcome {
        Ok(()) => {
            println!("minimal-host: all checks passed");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("minimal-host: {e}");
            ExitCode::FAILURE
        }
    }
}

/// An empty directory of its own under the system's temporary directory. The
/// registry never creates its home: the host does.
fn fresh_home() -> std::io::Result<PathBuf> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let dir =
        std::env::temp_dir().join(format!("herd-minimal-host-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&dir)?;
    Ok(dir)
}

async fn run(home: &std::path::Path) -> Result<(), String> {
    let config = RegistryConfig {
        // Judge every command against this process before it runs.
        guard: Some(Host::current()),
        ..RegistryConfig::default()
    };
    let registry =
        Registry::new(Home::new(home), config).map_err(|e| format!("Registry::new failed: {e}"))?;

    // A real job: a shell that prints a line and exits with a code of its own.
    let info = registry
        .spawn(SpawnRequest {
            command: format!("echo '{GREETING}'; exit {EXIT_CODE}"),
            task_id: "minimal-host".to_owned(),
            ..SpawnRequest::default()
        })
        .await
        .map_err(|e| format!("spawning the job failed: {e}"))?;
    println!("spawned {} (pid {})", info.session_id, info.pid);

    let done = registry
        .wait(info.session_id.as_str(), Duration::from_secs(30), None)
        .await
        .map_err(|e| format!("waiting for the job failed: {e}"))?;
    if done.status != WaitStatus::Exited {
        return Err(format!(
            "the job did not finish within 30 s: {:?}",
            done.status
        ));
    }
    if done.exit_code != Some(EXIT_CODE) {
        return Err(format!(
            "the job's exit code is {:?}, expected {EXIT_CODE}",
            done.exit_code
        ));
    }
    if !done.output.as_str().contains(GREETING) {
        return Err(format!(
            "the job's output lacks {GREETING:?}: {:?}",
            done.output.as_str()
        ));
    }
    println!("job exited {EXIT_CODE} and printed {GREETING:?}");

    // Commands that would kill this process: refused with the rule, nothing runs. (A
    // kill of an explicit PID passes: that is the remedy the guard offers.)
    let own_image = Host::current()
        .images()
        .first()
        .cloned()
        .ok_or("the guard knows no image name for this process")?;
    for command in [format!("pkill -9 {own_image}"), "kill -9 $PPID".to_owned()] {
        match registry
            .spawn(SpawnRequest {
                command: command.clone(),
                task_id: "minimal-host".to_owned(),
                ..SpawnRequest::default()
            })
            .await
        {
            Err(SpawnError::Guarded(block)) => println!("refused {command:?}: {block}"),
            Err(other) => return Err(format!("{command:?} failed otherwise: {other}")),
            Ok(info) => {
                registry.shutdown().await;
                return Err(format!(
                    "the guard let {command:?} run as {}",
                    info.session_id
                ));
            }
        }
    }

    registry.shutdown().await;
    Ok(())
}
