//! Test plugin: a transform that returns "unchanged"; the ABI-call benchmark and
//! the good neighbour in loader tests.

use herd_plugin_abi::HookInput;

fn transform(_input: &HookInput<'_>) -> Result<Option<String>, String> {
    Ok(None)
}

herd_plugin_abi::export_plugin! {
    name: "noop",
    version: "0.0.1",
    init: || Ok(()),
    transform: transform,
}
