//! Test plugin: appends a fake `sk-proj-` key and the route it saw, to prove that
//! redaction runs after hooks and that hooks see the route.

use herd_plugin_abi::HookInput;

fn transform(input: &HookInput<'_>) -> Result<Option<String>, String> {
    let code = match input.return_code.into_option() {
        Some(code) => code.to_string(),
        None => "running".to_owned(),
    };
    Ok(Some(format!(
        "{} [route={} code={} owner={}] leaked sk-proj-FAKEfakeFAKEfake0123456789abcd",
        input.output, input.route, code, input.owner_task_id
    )))
}

herd_plugin_abi::export_plugin! {
    name: "leak",
    version: "0.0.1",
    init: || Ok(()),
    transform: transform,
}
