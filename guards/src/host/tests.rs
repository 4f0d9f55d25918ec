//! Unit tests for the `host` module: image families, unit names, globs, `Host::current`.

use super::{Host, cgroup_units, family, glob_match, image_key, unit_key};

fn python_host() -> Host {
    Host::new(vec!["python".to_owned()], "python -m agent.main")
}

#[test]
fn image_keys_drop_directories_case_and_windows_suffixes() {
    assert_eq!(image_key("/usr/bin/Python3"), "python3");
    assert_eq!(image_key("C:\\Python312\\python.exe"), "python");
    assert_eq!(image_key("herd.CMD"), "herd");
}

#[test]
fn families_drop_version_suffixes() {
    assert_eq!(family("python3.12"), "python");
    assert_eq!(family("python-3.12"), "python");
    assert_eq!(family("node18"), "node");
    assert_eq!(family("herd"), "herd");
    assert_eq!(
        family("7z"),
        "7z",
        "a name that is all version keeps itself"
    );
}

#[test]
fn b33_image_names_match_across_versions_and_platforms() {
    let host = python_host();
    for name in [
        "python",
        "python3",
        "python3.12",
        "pythonw",
        "python.exe",
        "pythonw.exe",
        "/usr/bin/python3",
        "py*",
    ] {
        assert_eq!(host.image_named(name), Some("python"), "{name}");
    }
    for name in ["node", "pypy", "ipython", "python-lsp", "jupyter"] {
        assert_eq!(host.image_named(name), None, "{name}");
    }
}

#[test]
fn b33_units_match_with_suffixes_labels_and_globs() {
    let host = Host::new(vec!["herd".to_owned()], "herd serve").with_units(["ai.herd.daemon"]);
    for name in [
        "herd",
        "herd.service",
        "herd@default.service",
        "gui/501/ai.herd.daemon",
        "/Library/LaunchAgents/ai.herd.daemon.plist",
        "her*",
        "com.example.herd",
    ] {
        assert!(host.unit_named(name).is_some(), "{name}");
    }
    for name in ["herd-meta.service", "nginx", "herdsman", "ai.other.daemon"] {
        assert_eq!(host.unit_named(name), None, "{name}");
    }
}

#[test]
fn b33_herd_image_brings_its_lifecycle_and_unit() {
    let host = Host::new(vec!["/usr/local/bin/herd".to_owned()], "");
    assert_eq!(host.images(), ["herd"]);
    assert_eq!(host.units(), ["herd"]);
    assert!(
        host.lifecycle()
            .iter()
            .any(|l| l.words == ["daemon", "stop"])
    );
    assert!(python_host().lifecycle().is_empty());
}

#[test]
fn builders_add_and_normalise_without_duplicates() {
    let host = python_host()
        .with_images(["Node.exe", "python"])
        .with_units(["Agent.service", "agent"])
        .with_lifecycle("hermes", ["gateway", "restart"]);
    assert_eq!(host.images(), ["python", "node"]);
    assert_eq!(host.units(), ["python", "node", "agent"]);
    assert_eq!(host.lifecycle().len(), 1);
    assert_eq!(host.cmdline(), "python -m agent.main");
}

#[test]
fn globs_match_stars_and_question_marks() {
    assert!(glob_match("py*", "python3"));
    assert!(glob_match("*thon?", "python3"));
    assert!(glob_match("PY*.EXE", "python.exe"));
    assert!(!glob_match("py?", "python"));
    assert!(glob_match("*", ""));
    assert!(!glob_match("a*b*c", "a".repeat(200).as_str()));
}

#[test]
fn unit_keys_drop_paths_and_suffixes() {
    assert_eq!(unit_key("gui/501/ai.herd.daemon"), "ai.herd.daemon");
    assert_eq!(unit_key("Herd.service"), "herd");
    assert_eq!(
        unit_key("~/Library/LaunchAgents/ai.herd.daemon.plist"),
        "ai.herd.daemon"
    );
}

#[test]
fn cgroup_service_units_are_found() {
    let cgroup = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/herd.service\n";
    assert_eq!(cgroup_units(cgroup), ["herd.service"]);
    assert!(cgroup_units("0::/user.slice/user-1000.slice/session-3.scope\n").is_empty());
}

#[test]
fn b33_current_host_always_includes_herd_and_this_process() {
    let host = Host::current();
    assert!(host.images().iter().any(|i| i == "herd"));
    assert!(host.lifecycle().iter().any(|l| l.words == ["shutdown"]));
    if cfg!(target_os = "linux") {
        let comm = std::fs::read_to_string("/proc/self/comm").expect("/proc/self/comm on Linux");
        assert!(
            host.images().contains(&image_key(comm.trim())),
            "{:?}",
            host.images()
        );
        assert!(!host.cmdline().is_empty());
    }
}

#[test]
fn pid_files_are_matched_by_whole_name_tokens() {
    let host = Host::new(vec!["herd".to_owned(), "python".to_owned()], "");
    for path in [
        "~/.herd/herd.pid",
        "run/herd-daemon.pid",
        "/var/run/python3.pid",
    ] {
        assert!(super::names_host_file(&host, path).is_some(), "{path}");
    }
    for path in ["shepherd.pid", "server.pid", "/var/run/nginx.pid"] {
        assert_eq!(super::names_host_file(&host, path), None, "{path}");
    }
}
