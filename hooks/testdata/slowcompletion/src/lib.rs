//! Test plugin: a slow plugin on the completion route. Every call on route
//! `completion` takes 1.5 s (under the chain's 2 s budget, so it is never abandoned
//! for being late on its own); every other route returns at once. Output is never
//! changed. `cargo xtask soak` loads it into a daemon finishing 200 sessions and
//! measures how long `list` takes meanwhile.

use std::time::Duration;

use herd_plugin_abi::HookInput;

/// How long a completion takes.
const COMPLETION_DELAY: Duration = Duration::from_millis(1_500);

#[expect(
    clippy::disallowed_methods,
    reason = "a slow plugin is what this test plugin imitates"
)]
fn transform(input: &HookInput<'_>) -> Result<Option<String>, String> {
    if input.route.as_str() == "completion" {
        std::thread::sleep(COMPLETION_DELAY);
    }
    Ok(None)
}

herd_plugin_abi::export_plugin! {
    name: "slowcompletion",
    version: "0.0.1",
    init: || Ok(()),
    transform: transform,
}
