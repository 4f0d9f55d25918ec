//! Test plugin: on output containing `PLEASE_FAIL` returns an error, on
//! `PLEASE_PANIC` panics (caught by `catch_panic`), otherwise tags the output.

use herd_plugin_abi::HookInput;

fn transform(input: &HookInput<'_>) -> Result<Option<String>, String> {
    let output = input.output.as_str();
    if output.contains("PLEASE_FAIL") {
        return Err("asked to fail".to_owned());
    }
    if output.contains("PLEASE_PANIC") {
        panic!("asked to panic");
    }
    Ok(Some(format!("{output} [misbehave]")))
}

herd_plugin_abi::export_plugin! {
    name: "misbehave",
    version: "0.0.1",
    init: || Ok(()),
    transform: transform,
}
