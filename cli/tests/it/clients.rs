//! `herd mcp` driven by MCP clients nobody here wrote: the official Python
//! SDK 2.x on both protocol eras (2026-07-28 through `server/discover`, and the
//! 2025-11-25 handshake) with the tasks extension, the official TypeScript SDK 1.x
//! (2025-11-25, its tasks too), the OpenAI Agents SDK's strict-schema conversion, and
//! LangChain's MCP adapters (a server per call).
//!
//! Each test runs one check script from `cli/tests/clients/` as a child process, with
//! `HERD` (the binary under test) and `HERD_HOME` (a fresh [`Env`]) and nothing else of
//! ours in its environment; the script starts `herd mcp` through the SDK's own stdio
//! client, exits 0 when every check held and otherwise prints a JSON list of the checks
//! that failed with what it saw. A script that outlives its deadline is killed and the
//! test fails with what it printed so far.
//!
//! The clients are not in the workspace. `.ci/run` installs them, pinned, outside the
//! clone and exports `HERD_TEST_PYTHON` (a venv's python with `mcp==2.3.0` and
//! `openai-agents==0.24.0`), `HERD_TEST_LANGCHAIN_PYTHON` (another venv's python with
//! `langchain-mcp-adapters==0.3.2`, which needs `mcp<2`), `HERD_TEST_NODE_MODULES`
//! (the `node_modules` that `npm ci` made from `cli/tests/clients/node`) and
//! `HERD_REQUIRE_CLIENTS=1`. Without
//! them a test says on stderr how to install the client and passes, so a plain
//! `cargo test` on a machine without the clients stays green; with
//! `HERD_REQUIRE_CLIENTS=1` a missing client is a failure.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::support::{Env, HERD, raw_command, wait_until};

/// The longest a script runs; it gives itself a little less (`HERD_CLIENT_DEADLINE`).
const SCRIPT_DEADLINE: Duration = Duration::from_secs(120);

/// The script's own deadline, in seconds, so it reports before it is killed.
const SCRIPT_OWN_DEADLINE_SECS: &str = "100";

/// The folder of the check scripts.
fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// A client SDK the scripts are written against.
#[derive(Debug, Clone, Copy)]
enum Sdk {
    /// `cli/tests/clients/py/*.py`, run by `$HERD_TEST_PYTHON`.
    Python,
    /// `cli/tests/clients/node/*.mjs`, run by `node` with `$HERD_TEST_NODE_MODULES`.
    Node,
    /// `cli/tests/clients/langchain/*.py`, run by `$HERD_TEST_LANGCHAIN_PYTHON`.
    LangChain,
}

/// How to install the clients, for the message when one is missing.
const HOW_TO_INSTALL: &str = "`bash .ci/run` installs them (or by hand: \
     `python3 -m venv DIR && DIR/bin/pip install -r cli/tests/clients/py/requirements.txt \
     -c cli/tests/clients/py/constraints.txt` then \
     HERD_TEST_PYTHON=DIR/bin/python; the same with cli/tests/clients/langchain's files \
     in another venv then HERD_TEST_LANGCHAIN_PYTHON=DIR2/bin/python; `npm ci` in a copy of \
     cli/tests/clients/node then HERD_TEST_NODE_MODULES=THAT/node_modules)";

/// What runs a script: the interpreter and the environment it needs.
#[derive(Debug)]
struct Runtime {
    program: PathBuf,
    env: Vec<(&'static str, PathBuf)>,
}

/// The runtime for `sdk`, or why it is unavailable.
fn runtime(sdk: Sdk) -> Result<Runtime, String> {
    match sdk {
        Sdk::Python | Sdk::LangChain => {
            let var = if matches!(sdk, Sdk::Python) {
                "HERD_TEST_PYTHON"
            } else {
                "HERD_TEST_LANGCHAIN_PYTHON"
            };
            let python = std::env::var_os(var)
                .map(PathBuf::from)
                .ok_or(format!("{var} is not set"))?;
            if !python.is_file() {
                return Err(format!("{var}={} is not a file", python.display()));
            }
            Ok(Runtime {
                program: python,
                env: Vec::new(),
            })
        }
        Sdk::Node => {
            let modules = std::env::var_os("HERD_TEST_NODE_MODULES")
                .map(PathBuf::from)
                .unwrap_or_else(|| clients_dir().join("node/node_modules"));
            if !modules.join("@modelcontextprotocol/sdk").is_dir() {
                return Err(format!(
                    "no @modelcontextprotocol/sdk under {} (HERD_TEST_NODE_MODULES)",
                    modules.display()
                ));
            }
            Ok(Runtime {
                program: PathBuf::from("node"),
                env: vec![("HERD_TEST_NODE_MODULES", modules)],
            })
        }
    }
}

/// Says that a client is missing: a failure under `HERD_REQUIRE_CLIENTS=1`, a note on
/// stderr otherwise.
#[expect(
    clippy::print_stderr,
    reason = "a skipped client check says so and how to install the client"
)]
fn missing(sdk: Sdk, script: &str, why: &str) {
    let message =
        format!("the {sdk:?} MCP client for {script} is unavailable ({why}); {HOW_TO_INSTALL}");
    if std::env::var("HERD_REQUIRE_CLIENTS").as_deref() == Ok("1") {
        panic!("HERD_REQUIRE_CLIENTS=1 but {message}");
    }
    eprintln!("skipped: {message}");
}

/// Kills the script if the test ends before it does.
#[derive(Debug)]
struct ScriptChild(Child);

impl Drop for ScriptChild {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Runs the check script `script` (a path under `cli/tests/clients/`) with `args`
/// against a fresh home, and asserts that it reports every check held.
fn check(sdk: Sdk, script: &str, args: &[&str]) {
    let Runtime {
        program,
        env: extra_env,
    } = match runtime(sdk) {
        Ok(found) => found,
        Err(why) => return missing(sdk, script, &why),
    };
    let env = Env::new();
    let out_path = env.scratch().join("client.stdout");
    let err_path = env.scratch().join("client.stderr");
    let file = |path: &Path| std::fs::File::create(path).expect("the scratch dir is writable");
    let mut cmd = raw_command(&program);
    cmd.arg(clients_dir().join(script))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.scratch())
        .env("HERD", HERD)
        .env("HERD_HOME", env.home())
        .env("HERD_CLIENT_DEADLINE", SCRIPT_OWN_DEADLINE_SECS)
        // No `__pycache__` in the clone.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(env.scratch())
        .stdin(Stdio::null())
        .stdout(file(&out_path))
        .stderr(file(&err_path));
    for (key, value) in extra_env {
        cmd.env(key, value);
    }
    let mut child = ScriptChild(
        cmd.spawn()
            .unwrap_or_else(|e| panic!("{} {script} starts: {e}", program.display())),
    );
    let finished = wait_until(SCRIPT_DEADLINE, || {
        matches!(child.0.try_wait(), Ok(Some(_)))
    });
    let shown = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    if finished.is_err() {
        drop(child);
        panic!(
            "{script} {args:?} did not finish within {SCRIPT_DEADLINE:?}\nstdout:\n{}\nstderr:\n{}",
            shown(&out_path),
            shown(&err_path)
        );
    }
    let status = child.0.wait().expect("the script has exited");
    assert!(
        status.success(),
        "{script} {args:?} failed ({status})\nstdout:\n{}\nstderr:\n{}",
        shown(&out_path),
        shown(&err_path)
    );
}

// (a) Two agents, no --owner, one home.

#[test]
fn b31_python_2026_07_28_two_agents_see_only_their_own_jobs() {
    check(
        Sdk::Python,
        "py/two_agents.py",
        &["--protocol", "2026-07-28"],
    );
}

#[test]
fn b31_python_2025_11_25_two_agents_see_only_their_own_jobs() {
    check(Sdk::Python, "py/two_agents.py", &["--protocol", "legacy"]);
}

#[test]
fn b31_node_two_agents_see_only_their_own_jobs() {
    check(Sdk::Node, "node/two_agents.mjs", &[]);
}

// (b) Log level.

#[test]
fn python_2025_11_25_set_level_error_silences_notice_log_messages() {
    check(Sdk::Python, "py/set_level.py", &["--protocol", "legacy"]);
}

#[test]
fn python_2026_07_28_log_level_error_opt_in_silences_notice_log_messages() {
    check(
        Sdk::Python,
        "py/set_level.py",
        &["--protocol", "2026-07-28"],
    );
}

#[test]
fn node_set_level_error_silences_notice_log_messages() {
    check(Sdk::Node, "node/set_level.mjs", &[]);
}

// (c) Watch and notify.

#[test]
fn b20_python_watch_wakes_on_ready_then_one_completion_with_exit_3() {
    check(Sdk::Python, "py/watch_notify.py", &[]);
}

#[test]
fn b20_node_watch_wakes_on_ready_then_one_completion_with_exit_3() {
    check(Sdk::Node, "node/watch_notify.mjs", &[]);
}

// (d) Foreground timeout.

#[test]
fn b24_python_foreground_past_its_timeout_moves_to_the_background_and_completes_once() {
    check(Sdk::Python, "py/foreground_timeout.py", &[]);
}

#[test]
fn b24_node_foreground_past_its_timeout_moves_to_the_background_and_completes_once() {
    check(Sdk::Node, "node/foreground_timeout.mjs", &[]);
}

// (e) Client cancellation.

#[test]
fn b24_python_cancelled_foreground_call_completes_once_in_the_background() {
    check(Sdk::Python, "py/cancel.py", &[]);
}

#[test]
fn b24_node_aborted_foreground_call_completes_once_in_the_background() {
    check(Sdk::Node, "node/cancel.mjs", &[]);
}

// (f) Progress.

#[test]
fn python_foreground_call_gets_progress_before_its_result() {
    check(Sdk::Python, "py/progress.py", &[]);
}

#[test]
fn node_foreground_call_gets_progress_before_its_result() {
    check(Sdk::Node, "node/progress.mjs", &[]);
}

// (g) Structured results and annotations.

#[test]
fn b39_python_results_are_structured_and_pass_the_sdk_output_schema_check() {
    check(Sdk::Python, "py/structured.py", &[]);
}

#[test]
fn b39_node_results_are_structured_and_pass_the_sdk_output_schema_check() {
    check(Sdk::Node, "node/structured.mjs", &[]);
}

// (h) Tasks (2026-07-28, io.modelcontextprotocol/tasks; 2025-11-25 through the
// TypeScript SDK).

#[test]
fn python_tasks_run_a_terminal_call_to_completion_and_cancel_kills_the_process() {
    check(Sdk::Python, "py/tasks.py", &[]);
}

#[test]
fn node_2025_11_25_tasks_run_to_completion_list_and_cancel_kills_the_process() {
    check(Sdk::Node, "node/tasks.mjs", &[]);
}

// (i) Strict mode (OpenAI Agents SDK schema conversion).

#[test]
fn b39_strict_schemas_convert_and_a_strict_log_call_pages_the_last_lines() {
    check(Sdk::Python, "py/strict.py", &[]);
}

// Pushed wake-ups: the notifications resource, subscribed to.

#[test]
fn b19_python_2026_07_28_listen_pushes_a_wake_up_and_the_read_collects_it_once() {
    check(Sdk::Python, "py/subscribe.py", &[]);
}

#[test]
fn b19_node_resource_subscribe_pushes_a_wake_up_and_the_read_collects_it_once() {
    check(Sdk::Node, "node/subscribe.mjs", &[]);
}

// Owner continuity: a host that starts a server per call is one agent.

#[test]
fn b31_python_a_server_per_call_finds_its_job_and_gets_its_completion_once() {
    check(Sdk::Python, "py/per_call.py", &["--protocol", "2026-07-28"]);
}

#[test]
fn b31_python_2025_11_25_a_server_per_call_finds_its_job() {
    check(Sdk::Python, "py/per_call.py", &["--protocol", "legacy"]);
}

#[test]
fn b31_langchain_adapters_a_server_per_call_keep_the_agents_job_and_its_completion() {
    check(Sdk::LangChain, "langchain/per_call.py", &[]);
}

// Budgets, reads and the wait cap.

#[test]
fn b8_b39_python_a_failing_build_fits_the_budget_and_submit_reads_the_reply() {
    check(Sdk::Python, "py/budget.py", &["--protocol", "2026-07-28"]);
}
