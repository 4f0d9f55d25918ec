//! `herd top`'s pane for a far job (a job on a host reached through a
//! door), over a local door to a second home (`env HERD_HOME=<far> herd
//! proxy`), on tmux's real terminal as `top.rs` drives it.

use std::time::Duration;

use crate::hosts::proxy_doors as far_doors;
use crate::hosts::sigkill;
use crate::hosts_whole::aliases;
use crate::support::{Env, alive, wait_until};
use crate::top::{TopPane, pane};

/// Generous: CI runs on two busy cores.
const DEADLINE: Duration = Duration::from_secs(30);

// Top lists a far job under its qualified id, its pane follows the
// job's output, and rides through every door of the host killed: what the job
// prints after the blip (and a far daemon SIGKILL) shows in the pane (the first of two lines: the table's
// LAST LINE column shows only the second).
#[test]
fn top_pane_follows_a_far_job_through_killed_doors() {
    let local = Env::new();
    let far = Env::new();
    aliases(&local, &far, &["far"]);
    let gate = far.scratch().join("gate");
    let script = format!(
        "echo far-pane-before; while [ ! -e {0} ]; do sleep 0.05; done; \
         echo far-pane-after-1; echo far-pane-after-2; exec sleep 300",
        gate.display()
    );
    let id = local
        .ok(&["run", "--host", "far", "--name", "farjob", "--", &script])
        .trim()
        .to_owned();
    assert!(id.starts_with("far:proc_"), "{id}");
    let tmux = pane(&local, 140, 40, &[]);
    tmux.start_top();
    tmux.wait_for("the far job selected and its output in the pane", |s| {
        s.contains(&id) && s.contains("far-pane-before")
    });
    assert!(
        wait_until(DEADLINE, || !far_doors(&far).is_empty()).is_ok(),
        "the host's doors are open"
    );
    for pid in far_doors(&far) {
        sigkill(pid);
    }
    // The far daemon dies too; the next door starts another.
    let far_daemon = far.daemon_pid().expect("the far daemon runs");
    sigkill(far_daemon);
    assert!(wait_until(DEADLINE, || !alive(far_daemon)).is_ok());
    for pid in far_doors(&far) {
        sigkill(pid);
    }
    std::fs::write(&gate, "").expect("the scratch dir is writable");
    tmux.wait_for("the far output after the blip in the pane", |s| {
        s.contains("far-pane-after-1")
    });
    let screen = tmux.screen();
    assert!(!screen.contains("cannot follow"), "{screen}");
    assert!(tmux.alternate_on(), "top is still up");
    tmux.keys(&["q"]);
    let screen = tmux.wait_restored("top-exit");
    assert!(screen.contains("top-exit=0"), "{screen}");
    local.ok(&["kill", &id]);
}
