//! Test plugin: `init` never returns (it sleeps forever), as a plugin waiting on
//! a server that never answers. herd must start, serve every command and report
//! the plugin failed once its init deadline passes.

use herd_plugin_abi::HookInput;

fn transform(_input: &HookInput<'_>) -> Result<Option<String>, String> {
    Ok(Some("inithang transformed this".to_owned()))
}

#[expect(
    clippy::disallowed_methods,
    reason = "an init that never returns is what this test plugin imitates"
)]
fn init() -> Result<(), String> {
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

herd_plugin_abi::export_plugin! {
    name: "inithang",
    version: "0.0.1",
    init: init,
    transform: transform,
}
