//! Unit tests for the command rewrite and the environment plan.

use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use super::*;
use crate::config::DEFAULT_ENV_DENY;

fn check(input: &str, expected: &str) {
    assert_eq!(
        rewrite_compound_background(input),
        expected,
        "input {input:?}"
    );
}

#[test]
fn b1_compound_background_is_rewritten() {
    check("make && ./server &", "make && { ./server & }");
    check("a || b &", "a || { b & }");
    check(
        "cd x && npm run dev > log 2>&1 &",
        "cd x && { npm run dev > log 2>&1 & }",
    );
    check("a; b && c &", "a; b && { c & }");
}

#[test]
fn b1_other_commands_are_left_alone() {
    check("sleep 1 &", "sleep 1 &");
    check("a && b", "a && b");
    check("a && b && c", "a && b && c");
    check("echo 'a && b &'", "echo 'a && b &'");
    check("(a && b) &", "(a && b) &");
    check("a && b & c", "a && b & c");
    check("a &> log &", "a &> log &");
    check("a && b; c &", "a && b; c &");
}

#[test]
fn b36_deny_globs_match_names() {
    assert!(glob_matches("*_API_KEY", "FAKE_API_KEY"));
    assert!(glob_matches("*_api_key", "fake_api_key"));
    assert!(!glob_matches("*_API_KEY", "API_KEYS"));
    assert!(glob_matches("OPENAI_*KEY*", "OPENAI_API_KEY"));
    assert!(glob_matches("HF_TOKEN", "HF_TOKEN"));
    assert!(!glob_matches("HF_TOKEN", "HF_TOKENS"));
}

#[test]
fn b36_the_deny_list_judges_each_shape_as_the_glob_does() {
    let patterns: Vec<String> = [
        "HF_TOKEN",
        "*_api_key",
        "OPENAI_*",
        "AWS_*_ID",
        "*",
        "**",
        "*KEY*",
    ]
    .iter()
    .map(|p| (*p).to_owned())
    .collect();
    let list = DenyList::new(&patterns);
    for name in [
        "hf_token",
        "HF_TOKENS",
        "FAKE_API_KEY",
        "API_KEY",
        "openai_org",
        "AWS_KEY_ID",
        "PATH",
        "",
    ] {
        let by_glob = patterns.iter().any(|p| glob_matches(p, name));
        assert_eq!(list.denies(name), by_glob, "{name}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]

    /// The shapes a deny pattern is sorted into deny exactly what the glob walk does,
    /// the built-in list included.
    #[test]
    fn b36_a_deny_list_denies_what_its_globs_match(
        patterns in proptest::collection::vec("[*]?[A-Za-z_]{0,4}[*]?[A-Za-z_]{0,3}[*]?", 0..6),
        name in "[A-Za-z_]{0,10}",
    ) {
        let mut all = patterns.clone();
        all.extend(DEFAULT_ENV_DENY.iter().map(|p| (*p).to_owned()));
        for patterns in [&patterns, &all] {
            let by_glob = patterns.iter().any(|p| glob_matches(p, &name));
            proptest::prop_assert_eq!(DenyList::new(patterns).denies(&name), by_glob);
        }
    }
}

#[test]
fn b36_env_is_sanitised_and_tagged() {
    let deny = DenyList::new(&["*_API_KEY".to_owned()]);
    let forward = vec!["KEEP_API_KEY".to_owned()];
    let overrides = vec![("EXTRA".to_owned(), "1".to_owned())];
    let scratch = PathBuf::from("/home/x/cache/scratch");
    let plan = EnvPlan {
        deny: &deny,
        forward: &forward,
        overrides: &overrides,
        scratch: &scratch,
        session_id: "proc_0123456789ab",
        pty: true,
    };
    let host = [
        ("FAKE_API_KEY", "s"),
        ("KEEP_API_KEY", "k"),
        ("PATH", "/bin"),
        ("PAGER", "less"),
    ]
    .into_iter()
    .map(|(k, v)| (OsString::from(k), OsString::from(v)));
    let env = child_env(&plan, host);
    let get = |k: &str| env.get(&OsString::from(k)).and_then(|v| v.to_str());
    assert_eq!(get("FAKE_API_KEY"), None);
    assert_eq!(get("KEEP_API_KEY"), Some("k"));
    assert_eq!(get("EXTRA"), Some("1"));
    assert_eq!(get("TMPDIR"), Some("/home/x/cache/scratch"));
    assert_eq!(get("PYTHONUNBUFFERED"), Some("1"));
    assert_eq!(get("HERD_SESSION"), Some("proc_0123456789ab"));
    assert_eq!(get("HERD_SUPERVISED_CHILD"), Some("1"));
    assert_eq!(get("PAGER"), Some("less"));
    assert_eq!(get("GIT_PAGER"), Some("cat"));
}

/// The names of `host` that reach a child under the built-in deny-list and `forward`.
fn passed_names(forward: &[&str], host: &[(OsString, OsString)]) -> Vec<OsString> {
    let deny: Vec<String> = DEFAULT_ENV_DENY.iter().map(|p| (*p).to_owned()).collect();
    let deny = DenyList::new(&deny);
    let forward: Vec<String> = forward.iter().map(|f| (*f).to_owned()).collect();
    let scratch = PathBuf::from("/scratch");
    let plan = EnvPlan {
        deny: &deny,
        forward: &forward,
        overrides: &[],
        scratch: &scratch,
        session_id: "proc_0123456789ab",
        pty: false,
    };
    let env = child_env(&plan, host.iter().cloned());
    host.iter()
        .filter(|(name, _)| env.contains_key(name))
        .map(|(name, _)| name.clone())
        .collect()
}

/// Asserts whether the built-in deny-list lets the host's `name` through to a child.
fn check_env(name: &str, is_passed: bool) {
    let host = [(OsString::from(name), OsString::from("value"))];
    let passed = !passed_names(&[], &host).is_empty();
    assert_eq!(passed, is_passed, "{name} passed: {passed}");
}

#[test]
fn b36_default_deny_removes_credential_names() {
    for name in [
        // Bare secret words.
        "API_KEY",
        "APIKEY",
        "TOKEN",
        "SECRET",
        "SECRET_KEY",
        "ACCESS_KEY",
        "PRIVATE_KEY",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "CREDENTIALS",
        "ACCESS_TOKEN",
        "AUTH_TOKEN",
        // Secret words ending a longer name, in any case.
        "MY_DB_PASSWD",
        "DB_PWD",
        "SMTP_PASS",
        "MYSQL_PASSWORD",
        "GPG_PASSPHRASE",
        "GOOGLE_CREDENTIALS",
        "GIT_CREDENTIAL",
        "JWT_SIGNING_KEY",
        "APP_ENCRYPTION_KEY",
        "RAILS_MASTER_KEY",
        "DEPLOY_PRIVATE_KEY",
        "STRIPE_SECRET_KEY",
        "MISTRAL_APIKEY",
        "api_key",
        "my_db_passwd",
        "Github_Token",
        // Provider names.
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITHUB_PAT",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "OPENROUTER_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "AZURE_CLIENT_SECRET",
        "AZURE_STORAGE_CONNECTION_STRING",
        "HF_TOKEN",
        "NPM_TOKEN",
        "npm_config__auth",
        "NPM_CONFIG__AUTHTOKEN",
        "PYPI_TOKEN",
        "TWINE_PASSWORD",
        "SLACK_BOT_TOKEN",
        "SLACK_WEBHOOK_URL",
        "DOCKER_PASSWORD",
        "DOCKER_AUTH_CONFIG",
        "SECRET_KEY_BASE",
        "TF_TOKEN_app_terraform_io",
        "BW_SESSION",
        "OP_SESSION_my",
    ] {
        check_env(name, false);
    }
}

#[test]
fn b36_default_deny_keeps_ordinary_names() {
    for name in [
        // The working directories: `PWD` alone is not a password.
        "PWD",
        "OLDPWD",
        "PATH",
        "HOME",
        "USER",
        "SHELL",
        "TERM",
        "LANG",
        "PASS",
        // A secret word that is not the last word of the name.
        "TOKENIZERS_PARALLELISM",
        "GITHUB_TOKEN_URL",
        "ACTIONS_ID_TOKEN_REQUEST_URL",
        "SECRETS_DIR",
        "PASSWORD_STORE_DIR",
        "AWS_SHARED_CREDENTIALS_FILE",
        "DB_PASSWORD_FILE",
        "MAX_TOKENS",
        // A word that only ends in a secret word.
        "GIT_ASKPASS",
        "SSH_ASKPASS",
        "BYPASS",
        // Pointers to credentials rather than credentials.
        "SSH_AUTH_SOCK",
        "KUBECONFIG",
        "AWS_PROFILE",
        "AWS_REGION",
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
        "HF_HOME",
    ] {
        check_env(name, true);
    }
}

#[test]
fn b36_non_utf8_names_are_dropped() {
    let bad_name = OsString::from_vec(b"HERD_\xffNAME".to_vec());
    let bad_value = OsString::from_vec(b"\xfe\xff".to_vec());
    let host = [
        (bad_name.clone(), OsString::from("v")),
        (OsString::from("BYTES_VALUE"), bad_value.clone()),
        (OsString::from("PATH"), OsString::from("/bin")),
    ];
    assert_eq!(
        passed_names(&[], &host),
        [OsString::from("BYTES_VALUE"), OsString::from("PATH")],
        "the name that is not UTF-8 goes, a value that is not UTF-8 stays"
    );
    // The lossy spelling of the name in a forward list does not name it either.
    let lossy = bad_name.to_string_lossy().into_owned();
    assert_eq!(
        passed_names(&[&lossy], &host),
        [OsString::from("BYTES_VALUE"), OsString::from("PATH")]
    );
}

#[test]
fn b36_forward_lets_a_denied_name_through() {
    let host: Vec<(OsString, OsString)> =
        ["API_KEY", "MY_DB_PASSWD", "AWS_SECRET_ACCESS_KEY", "PWD"]
            .into_iter()
            .map(|k| (OsString::from(k), OsString::from("v")))
            .collect();
    let names = |forward: &[&str]| -> Vec<String> {
        passed_names(forward, &host)
            .into_iter()
            .map(|n| n.into_string().expect("UTF-8 test names"))
            .collect()
    };
    assert_eq!(names(&[]), ["PWD"]);
    assert_eq!(
        names(&["API_KEY", "MY_DB_PASSWD"]),
        ["API_KEY", "MY_DB_PASSWD", "PWD"]
    );
    // A forward is the exact name, case included, as the OS compares names.
    assert_eq!(names(&["api_key"]), ["PWD"]);
}
