//! Host lookup: a bad name or an unknown host is a usage error naming what exists.

use super::configured;
use crate::config::{Config, HostConfig};
use crate::exit::{Code, code_of};

fn config(names: &[&str]) -> Config {
    let mut config = Config::default();
    for name in names {
        config.hosts.insert(
            (*name).to_owned(),
            HostConfig {
                command: vec!["ssh".into(), (*name).into(), "herd".into(), "proxy".into()],
                install: None,
            },
        );
    }
    config
}

#[test]
fn unknown_host_lists_the_configured_ones() {
    let config = config(&["build1", "gpu-2"]);
    assert!(configured(&config, "build1").is_ok());
    let err = configured(&config, "build9").expect_err("not configured");
    assert_eq!(code_of(&err), Code::Usage);
    let text = err.to_string();
    assert!(
        text.contains("build1, gpu-2") && text.contains("[hosts.build9]"),
        "{text}"
    );
    let none = configured(&Config::default(), "build1").expect_err("no hosts at all");
    assert!(none.to_string().contains("defines no hosts"), "{none}");
}

#[test]
fn a_bad_name_is_refused_before_lookup() {
    let err = configured(&config(&["build1"]), "Build1").expect_err("uppercase");
    assert_eq!(code_of(&err), Code::Usage);
    assert!(err.to_string().contains("not a host name"), "{err}");
}
