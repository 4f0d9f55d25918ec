//! Test plugin: `init` refuses to load with an error message.

use herd_plugin_abi::HookInput;

fn transform(_input: &HookInput<'_>) -> Result<Option<String>, String> {
    Ok(None)
}

herd_plugin_abi::export_plugin! {
    name: "initerr",
    version: "0.0.1",
    init: || Err("HERD_TEST_TOKEN is not set".to_owned()),
    transform: transform,
}
