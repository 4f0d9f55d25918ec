//! Test plugin: `init` panics; abi_stable catches it and herd reports it.

use herd_plugin_abi::HookInput;

fn transform(_input: &HookInput<'_>) -> Result<Option<String>, String> {
    Ok(None)
}

fn init() -> Result<(), String> {
    panic!("initpanic test plugin panics in init")
}

herd_plugin_abi::export_plugin! {
    name: "initpanic",
    version: "0.0.1",
    init: init,
    transform: transform,
}
