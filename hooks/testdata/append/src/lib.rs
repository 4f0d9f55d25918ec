//! Test plugin: appends one line, `[append:<route>]` (`[append:<route>:partial]`
//! for a stream's unfinished line), to every output it is called with, and refuses (an error) to be called with empty text, which the
//! call contract rules out. A test counts the appended lines: one per window a
//! route shows.

use herd_plugin_abi::HookInput;

fn transform(input: &HookInput<'_>) -> Result<Option<String>, String> {
    let output = input.output.as_str();
    if output.is_empty() {
        return Err("called with empty text".to_owned());
    }
    let sep = if output.ends_with('\n') { "" } else { "\n" };
    let partial = if input.partial { ":partial" } else { "" };
    Ok(Some(format!(
        "{output}{sep}[append:{}{partial}]\n",
        input.route.as_str()
    )))
}

herd_plugin_abi::export_plugin! {
    name: "append",
    version: "0.0.1",
    init: || Ok(()),
    transform: transform,
}
