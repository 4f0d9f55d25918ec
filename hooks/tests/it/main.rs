//! Integration tests of herd-hooks against real plugin libraries through the
//! real loader: the example plugin on several routes, redaction after a plugin
//! that leaks a key, fail-open on plugin errors, and the load-failure matrix
//! (B30, B32).
//!
//! The cdylibs are built by `cargo build -p herd-plugin-example -p
//! herd-test-plugin-...` (xtask ci does it first); a test that cannot find one
//! fails with that instruction.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use herd_hooks::{
    OutputContext, Pipeline, PluginLoadError, PluginReport, PluginStatus, RedactorConfig, Route,
    load_plugins, resolve_plugin,
};
use herd_test_support::plugins::PluginDir;

const BUILD: &str = "cargo build -p herd-plugin-example -p herd-test-plugin-noop -p herd-test-plugin-leak -p herd-test-plugin-noroot -p herd-test-plugin-abiv -p herd-test-plugin-layout -p herd-test-plugin-initerr -p herd-test-plugin-initpanic -p herd-test-plugin-misbehave";

/// A private plugins directory in a fresh temp dir.
struct Home {
    _tmp: tempfile::TempDir,
    plugins: PathBuf,
    dir: PluginDir,
}

impl Home {
    fn new() -> Home {
        let tmp = tempfile::tempdir().expect("temp dir");
        let plugins = tmp.path().join("plugins");
        let dir = PluginDir::create(plugins.clone(), BUILD);
        Home {
            _tmp: tmp,
            plugins,
            dir,
        }
    }

    /// Installs `dir/plugin.toml` and, when given, a copy of a built library.
    fn install(&self, dir: &str, manifest: &str, library: Option<(&str, &str)>) -> PathBuf {
        self.dir.install(dir, manifest, library)
    }

    fn install_lib(&self, dir: &str, crate_lib: &str) -> PathBuf {
        self.dir.install_lib(dir, crate_lib)
    }
}

fn ctx(route: Route, return_code: Option<i32>) -> OutputContext<'static> {
    OutputContext {
        route,
        command: "npm install",
        return_code,
        owner_task_id: "task-7",
        session_id: "proc_0123456789ab",
        backend: "local",
        partial: false,
    }
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn row<'r>(reports: &'r [PluginReport], name: &str) -> &'r PluginReport {
    reports
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no report row for {name}: {reports:#?}"))
}

#[test]
fn b30_example_plugin_tidies_poll_log_and_completion_output() {
    let home = Home::new();
    home.install_lib("tidy-terminal", "herd_plugin_example");
    let (chain, reports) = load_plugins(&home.plugins, &names(&["tidy-terminal"]));
    assert_eq!(
        row(&reports, "tidy-terminal").status,
        PluginStatus::Loaded,
        "{reports:#?}"
    );
    let pipeline = Pipeline::new(chain, &RedactorConfig::default()).expect("default config");
    let raw = "\x1b[32mfetching\x1b[0m\n 10%\r 60%\r100%\nwarn: peer dep\nwarn: peer dep\nwarn: peer dep\ndone\n";
    let want = "fetching\n100%\nwarn: peer dep [x3]\ndone\n";
    for route in [Route::Poll, Route::Log, Route::Completion] {
        assert_eq!(
            pipeline.show(&ctx(route, None), herd_hooks::Window::all(raw)),
            want,
            "{route:?}"
        );
    }
    assert_eq!(
        pipeline.show(&ctx(Route::Poll, None), herd_hooks::Window::all("plain\n")),
        "plain\n"
    );
}

#[test]
fn b30_redaction_runs_after_a_plugin_that_inserts_a_key() {
    let home = Home::new();
    home.install_lib("leak", "herd_test_plugin_leak");
    let (chain, _) = load_plugins(&home.plugins, &names(&["leak"]));
    let pipeline = Pipeline::new(chain, &RedactorConfig::default()).expect("default config");
    let out = pipeline.show(&ctx(Route::Poll, None), herd_hooks::Window::all("building"));
    assert_eq!(
        out,
        "building [route=poll code=running owner=task-7] leaked sk-pro...abcd"
    );
    let out = pipeline.show(
        &ctx(Route::Completion, Some(0)),
        herd_hooks::Window::all("done"),
    );
    assert_eq!(
        out,
        "done [route=completion code=0 owner=task-7] leaked sk-pro...abcd"
    );
    assert!(!out.contains("FAKEfake"));
}

#[test]
fn b30_plugin_errors_and_caught_panics_fail_open() {
    let home = Home::new();
    home.install_lib("misbehave", "herd_test_plugin_misbehave");
    let (chain, _) = load_plugins(&home.plugins, &names(&["misbehave"]));
    let pipeline = Pipeline::new(chain, &RedactorConfig::default()).expect("default config");
    let key = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let c = ctx(Route::Log, None);
    assert_eq!(
        pipeline.show(&c, herd_hooks::Window::all(&format!("PLEASE_FAIL {key}"))),
        "PLEASE_FAIL ghp_ab...6789"
    );
    assert_eq!(
        pipeline.show(&c, herd_hooks::Window::all(&format!("PLEASE_PANIC {key}"))),
        "PLEASE_PANIC ghp_ab...6789"
    );
    assert_eq!(
        pipeline.show(&c, herd_hooks::Window::all("fine")),
        "fine [misbehave]"
    );
    // A panic the plugin's `catch_panic` caught is counted as a panic, not an error.
    let stats = &pipeline.hook_stats()[0];
    assert_eq!(
        (
            stats.n_calls,
            stats.n_errors,
            stats.n_panics,
            stats.n_replaced
        ),
        (3, 1, 1, 1)
    );
    let log = stats.routes.get("log").copied().unwrap_or_default();
    assert_eq!((log.calls, log.errors, log.panics), (3, 1, 1), "{stats:?}");
    assert!(
        stats
            .last_failure
            .as_deref()
            .is_some_and(|f| f.starts_with("hook panicked: ") && f.contains("asked to panic")),
        "{stats:?}"
    );
}

/// abi_stable's `load_from*` would hand back the first plugin for the second
/// (one cached module per interface type); each library must be itself.
#[test]
fn b32_several_plugins_load_as_themselves_in_manifest_order() {
    let home = Home::new();
    let lib = "libherd_test_plugin_leak.so";
    home.install(
        "leak",
        &format!("name = \"leak\"\nversion = \"0.0.1\"\nlibrary = \"{lib}\"\norder = 20\n"),
        Some(("herd_test_plugin_leak", lib)),
    );
    let lib = "libherd_test_plugin_misbehave.so";
    home.install(
        "misbehave",
        &format!("name = \"misbehave\"\nversion = \"0.0.1\"\nlibrary = \"{lib}\"\norder = 10\n"),
        Some(("herd_test_plugin_misbehave", lib)),
    );
    let (chain, reports) = load_plugins(&home.plugins, &names(&["leak", "misbehave"]));
    assert!(
        reports.iter().all(|r| r.status == PluginStatus::Loaded),
        "{reports:#?}"
    );
    assert_eq!(chain.names(), names(&["misbehave", "leak"]));
    let pipeline = Pipeline::new(chain, &RedactorConfig::default()).expect("default config");
    assert_eq!(
        pipeline.show(&ctx(Route::Watch, None), herd_hooks::Window::all("x")),
        "x [misbehave] [route=watch code=running owner=task-7] leaked sk-pro...abcd"
    );
}

#[test]
fn b32_failure_matrix_each_reported_with_its_cause_while_good_plugin_loads() {
    let home = Home::new();
    home.install_lib("tidy-terminal", "herd_plugin_example");
    home.install(
        "missing",
        "name = \"missing\"\nversion = \"1.0.0\"\nlibrary = \"libmissing.so\"\n",
        None,
    );
    let text = home.install(
        "textlib",
        "name = \"textlib\"\nversion = \"1.0.0\"\nlibrary = \"libtextlib.so\"\n",
        None,
    );
    fs::write(
        text.join("libtextlib.so"),
        "this is a text file, not a shared library\n".repeat(4),
    )
    .expect("write");
    home.install_lib("noroot", "herd_test_plugin_noroot");
    home.install_lib("abiv", "herd_test_plugin_abiv");
    home.install_lib("layout", "herd_test_plugin_layout");
    home.install(
        "badtoml",
        "name = \"badtoml\"\nversion = \"1.0.0\"\nlibrary = = \"x.so\"\n",
        None,
    );
    home.install_lib("initerr", "herd_test_plugin_initerr");
    home.install_lib("initpanic", "herd_test_plugin_initpanic");
    let open = home.install_lib("worldw", "herd_test_plugin_noop");
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).expect("chmod 777");
    home.install(
        "escape",
        "name = \"escape\"\nversion = \"1.0.0\"\nlibrary = \"../tidy-terminal/libherd_plugin_example.so\"\n",
        None,
    );
    home.install_lib("off", "herd_test_plugin_noop");
    // Another user's library (nobody's uid): only the user's own or root's load.
    let foreign = home.install_lib("foreign", "herd_test_plugin_noop");
    let foreign_owned = nix::unistd::geteuid().is_root()
        && std::os::unix::fs::chown(&foreign, Some(65_534), None).is_ok();

    let mut enabled = names(&[
        "tidy-terminal",
        "missing",
        "textlib",
        "noroot",
        "abiv",
        "layout",
        "badtoml",
        "initerr",
        "initpanic",
        "worldw",
        "escape",
        "ghost",
    ]);
    if foreign_owned {
        enabled.push("foreign".to_owned());
    } else {
        skipped("the foreign-owner row: chown to uid 65534 needs root");
    }
    let (chain, reports) = load_plugins(&home.plugins, &enabled);

    assert_eq!(chain.names(), names(&["tidy-terminal"]), "{reports:#?}");
    let good = row(&reports, "tidy-terminal");
    assert_eq!(
        (good.status, good.reason.as_deref()),
        (PluginStatus::Loaded, None)
    );
    assert_eq!(good.version, "0.0.1");

    let expect_failed = [
        ("missing", "library missing: "),
        ("textlib", "cannot open "),
        ("noroot", "root module symbol missing"),
        (
            "abiv",
            "herd expects 0.2.0, the plugin was built for 0.99.0",
        ),
        ("layout", "type-layout mismatch"),
        ("badtoml", "bad manifest "),
        ("initerr", "init failed in "),
        ("initpanic", "init panicked in "),
        ("worldw", "group- or world-writable (mode 777)"),
        ("escape", "must be a file inside the plugin directory"),
        ("ghost", "enabled in config but not installed"),
    ];
    let foreign_row = [("foreign", "is owned by uid 65534, neither you nor root")];
    let expect_failed = expect_failed
        .iter()
        .chain(foreign_row.iter().filter(|_| foreign_owned));
    for &(name, cause) in expect_failed {
        let r = row(&reports, name);
        let reason = r.reason.as_deref().unwrap_or("");
        assert_eq!(r.status, PluginStatus::Failed, "{name}: {reason}");
        assert!(
            reason.contains(cause),
            "{name}: reason {reason:?} does not name {cause:?}"
        );
    }
    // Details the reasons carry.
    let reason = |name: &str| row(&reports, name).reason.clone().unwrap_or_default();
    assert!(
        reason("missing").ends_with("missing/libmissing.so"),
        "{}",
        reason("missing")
    );
    assert!(
        reason("textlib").contains("libtextlib.so")
            && reason("textlib").to_lowercase().contains("elf"),
        "the dynamic loader's message: {}",
        reason("textlib")
    );
    assert!(
        reason("badtoml").contains("line 3"),
        "{}",
        reason("badtoml")
    );
    assert!(
        reason("initerr").contains("HERD_TEST_TOKEN is not set"),
        "{}",
        reason("initerr")
    );
    assert!(
        reason("worldw").contains("chmod go-w"),
        "{}",
        reason("worldw")
    );
    // The layout reason says what differs, not two full type dumps.
    assert!(
        reason("layout").contains("expected `"),
        "{}",
        reason("layout")
    );
    assert!(reason("layout").len() < 700, "{}", reason("layout"));

    let off = row(&reports, "off");
    assert_eq!(off.status, PluginStatus::Disabled);
    assert!(
        off.reason
            .as_deref()
            .unwrap_or("")
            .contains("herd plugins enable off")
    );

    // What `herd plugins list --json` prints.
    let json = serde_json::to_value(&reports).expect("reports serialise");
    let abiv = json
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["name"] == "abiv"))
        .expect("abiv row in json");
    assert_eq!(abiv["status"], "failed");
    assert!(
        abiv["path"]
            .as_str()
            .unwrap_or("")
            .ends_with("libherd_test_plugin_abiv.so")
    );
    // Every installed plugin has a row, the foreign one too.
    assert_eq!(json.as_array().map(Vec::len), Some(14));
}

#[test]
fn b32_missing_plugins_dir_is_empty_not_an_error() {
    let home = Home::new();
    let (chain, reports) = load_plugins(&home.plugins.join("nope"), &[]);
    assert!(chain.is_empty() && reports.is_empty());
}

#[test]
fn b32_resolve_plugin_by_directory_or_manifest_name() {
    let home = Home::new();
    home.install(
        "tidy",
        "name = \"tidy-terminal\"\nversion = \"0.1.0\"\nlibrary = \"x.so\"\n",
        None,
    );
    assert_eq!(resolve_plugin(&home.plugins, "tidy").as_deref(), Ok("tidy"));
    assert_eq!(
        resolve_plugin(&home.plugins, "tidy-terminal").as_deref(),
        Ok("tidy")
    );
    match resolve_plugin(&home.plugins, "ghost") {
        Err(err @ PluginLoadError::NotInstalled { .. }) => {
            assert!(err.to_string().contains("not installed"), "{err}");
        }
        other => panic!("expected NotInstalled, got {other:?}"),
    }
}

/// Says why a part of a test did not run.
#[expect(
    clippy::print_stderr,
    reason = "a skipped check names its reason where the test runner shows it"
)]
fn skipped(what: &str) {
    eprintln!("skipped {what}");
}
