//! The start-up decision about a delegated scope, and the call it makes. No systemd
//! runs on the machines these tests run on, so the decision is tested on given facts
//! and the argv is checked word for word against the `StartTransientUnit` signature.

use super::*;

/// A login shell's daemon under systemd: everything that asking needs.
fn login_shell() -> Facts {
    Facts {
        systemd_running: true,
        in_unit: false,
        own_cgroup: Some("/user.slice/user-1000.slice/session-3.scope".to_owned()),
        cgroup_usable: false,
        opted_out: None,
        busctl: Some(PathBuf::from("/usr/bin/busctl")),
        bus: Ok(vec![(
            "DBUS_SESSION_BUS_ADDRESS".to_owned(),
            "unix:path=/run/user/1000/bus".to_owned(),
        )]),
        uid: 1000,
        pid: 4242,
    }
}

fn stays(facts: &Facts) -> String {
    match decide(facts) {
        Decision::Stay(why) => why,
        asked @ Decision::Ask { .. } => panic!("expected to stay, got {asked:?}"),
    }
}

#[test]
fn a_login_shell_daemon_asks_the_user_manager_for_one_delegated_scope() {
    let Decision::Ask { unit, argv, env } = decide(&login_shell()) else {
        panic!("a login shell's daemon under systemd asks for a scope");
    };
    assert_eq!(unit, "herd-1000-4242.scope");
    let expected = [
        "/usr/bin/busctl",
        "--user",
        "--quiet",
        "--timeout=5",
        "call",
        "org.freedesktop.systemd1",
        "/org/freedesktop/systemd1",
        "org.freedesktop.systemd1.Manager",
        "StartTransientUnit",
        "ssa(sv)a(sa(sv))",
        "herd-1000-4242.scope",
        "fail",
        "4",
        "PIDs",
        "au",
        "1",
        "4242",
        "Delegate",
        "b",
        "true",
        "CollectMode",
        "s",
        "inactive-or-failed",
        "Description",
        "s",
        "herd daemon and its sessions",
        "0",
    ];
    assert_eq!(argv, expected);
    assert_eq!(
        env,
        vec![(
            "DBUS_SESSION_BUS_ADDRESS".to_owned(),
            "unix:path=/run/user/1000/bus".to_owned()
        )]
    );
}

#[test]
fn the_daemon_stays_where_a_scope_is_not_needed_or_not_to_be_had() {
    let mut facts = login_shell();
    facts.cgroup_usable = true;
    assert!(stays(&facts).contains("already takes session cgroups"));

    let mut facts = login_shell();
    facts.systemd_running = false;
    assert!(stays(&facts).contains("systemd is not running"));

    let mut facts = login_shell();
    facts.opted_out = Some("HERD_DELEGATE=0".to_owned());
    assert!(stays(&facts).contains("HERD_DELEGATE=0"));

    let mut facts = login_shell();
    facts.in_unit = true;
    assert!(
        stays(&facts).contains("herd service install"),
        "a unit without Delegate=yes is told to reinstall"
    );

    let mut facts = login_shell();
    facts.busctl = None;
    assert!(stays(&facts).contains("no busctl"));

    let mut facts = login_shell();
    facts.bus = Err("/run/user/1000/bus is not a socket".to_owned());
    assert!(stays(&facts).contains("no user bus: /run/user/1000/bus"));

    let mut facts = login_shell();
    facts.own_cgroup = None;
    assert!(stays(&facts).contains("no cgroup v2"));
}

#[test]
fn opting_out_reads_the_daemon_environment() {
    let env: HashMap<String, String> = [("HERD_DELEGATE".to_owned(), "0".to_owned())].into();
    assert_eq!(
        Facts::detect(&env).opted_out.as_deref(),
        Some("HERD_DELEGATE=0")
    );
    let env: HashMap<String, String> =
        [("HERD_CONTAINMENT".to_owned(), "subreaper".to_owned())].into();
    assert_eq!(
        Facts::detect(&env).opted_out.as_deref(),
        Some("HERD_CONTAINMENT=subreaper")
    );
    // busctl is looked for on the daemon's PATH only.
    let env: HashMap<String, String> = [("PATH".to_owned(), "/nonexistent".to_owned())].into();
    assert_eq!(Facts::detect(&env).busctl, None);
}

#[test]
fn only_herd_units_are_settled_in() {
    for own in [
        "/user.slice/user-1000.slice/user@1000.service/app.slice/herd-1000-4242.scope",
        "/user.slice/user-1000.slice/user@1000.service/app.slice/herd.service",
        "/system.slice/herd.service",
    ] {
        assert!(is_herd_unit(own), "{own}");
    }
    for own in [
        "/user.slice/user-1000.slice/session-3.scope",
        "/",
        "/user.slice/user-1000.slice/user@1000.service",
        "/system.slice/herd.service/herd-daemon",
    ] {
        assert!(!is_herd_unit(own), "{own}");
    }
}
