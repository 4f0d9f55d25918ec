//! Test plugin: on output containing `PLEASE_FAIL` returns an error, on
//! `PLEASE_PANIC` panics (caught by `catch_panic`), otherwise tags the output.
//! On the completion route, `PLEASE_STALL:<dir>` makes it stall like a slow
//! plugin: it creates `<dir>/stalled`, then waits (at most 20 s) for
//! `<dir>/release` to exist.

use herd_plugin_abi::HookInput;

#[expect(
    clippy::disallowed_methods,
    reason = "a slow plugin is what this test plugin imitates"
)]
fn stall(dir: &std::path::Path) {
    let _ = std::fs::write(dir.join("stalled"), "");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !dir.join("release").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn transform(input: &HookInput<'_>) -> Result<Option<String>, String> {
    let output = input.output.as_str();
    if input.route.as_str() == "completion"
        && let Some(rest) = output.split("PLEASE_STALL:").nth(1)
    {
        let dir = rest.split_whitespace().next().unwrap_or_default();
        stall(std::path::Path::new(dir));
    }
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
