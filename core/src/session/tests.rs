//! A list row's preview from the end of the tail only shows exactly what the
//! same window over the whole tail shows: real jobs, their output through the
//! registry's pipeline.

use std::sync::Arc;
use std::time::Duration;

use herd_hooks::{Route, Window};
use herd_persistence::Home;

use crate::config::RegistryConfig;
use crate::registry::Registry;
use crate::session::Session;
use crate::{SessionStatus, SpawnRequest};

const PREVIEW_CHARS: usize = 200;

/// Filler lines, a private-key block whose BEGIN lies far before the end and
/// that is still open at the end.
const KEY_OPEN_AT_END: &str = "for i in $(seq 1 1500); do echo \"line $i of filler output, nothing secret in it at all\"; done; \
     echo '-----BEGIN RSA PRIVATE KEY-----'; \
     for i in $(seq 1 1200); do echo MIIEowIBAAKCAQEA0123456789abcdefghijABCDEFGHIJ0123456789abcdefghij; done";

/// A last line longer than any short reach (no line start near the end).
const LONG_LAST_LINE: &str = "for i in $(seq 1 1500); do echo \"line $i of filler output\"; done; \
     head -c 100000 /dev/zero | tr '\\0' x; echo; echo done";

/// Coloured lines, then a token cut in the middle of an unfinished last line.
const GROWING: &str = "for i in $(seq 1 6000); do printf '\\033[31mred line %s\\033[0m with colour\\n' $i; done; \
     printf 'partial token ghp_0123456789'; exec sleep 30";

async fn session(registry: &Registry, command: &str) -> Arc<Session> {
    let info = registry
        .spawn(SpawnRequest {
            command: command.to_owned(),
            task_id: "t".to_owned(),
            ..SpawnRequest::default()
        })
        .await
        .expect("the job starts");
    registry
        .inner
        .lookup(info.session_id.as_str())
        .expect("the session is known")
}

/// The preview of `s` from the end of its tail and from the whole tail, and the
/// lengths of the two texts they were taken from.
fn previews(registry: &Registry, s: &Session) -> ((String, String), (usize, usize)) {
    let growing = s.status() == SessionStatus::Running;
    let show = |text: &str, key_open: bool| {
        let window = Window::last_chars(text, PREVIEW_CHARS)
            .growing(growing)
            .after_open_key(key_open);
        let shown = registry.inner.show(s, Route::ListPreview, window);
        serde_json::to_string(&shown).expect("a string")
    };
    let (part, part_key_open) = s.text_for_last(PREVIEW_CHARS);
    let (whole, _, whole_key_open) = s.text();
    (
        (show(&part, part_key_open), show(&whole, whole_key_open)),
        (part.len(), whole.len()),
    )
}

async fn finished(registry: &Registry, command: &str) -> Arc<Session> {
    let s = session(registry, command).await;
    registry
        .wait(s.id.as_str(), Duration::from_secs(120), None)
        .await
        .expect("the job ends");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b8_a_list_preview_from_the_tail_end_shows_as_from_the_whole_tail() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let registry = Registry::new(Home::new(dir.path().to_owned()), RegistryConfig::default())
        .expect("a registry in a runtime");

    let key = finished(&registry, KEY_OPEN_AT_END).await;
    let ((part, whole), (part_len, whole_len)) = previews(&registry, &key);
    assert_eq!(part, whole);
    assert!(
        !part.contains("MIIEowIBAAKCAQEA"),
        "the key body is masked: {part}"
    );
    assert!(
        part_len * 4 < whole_len,
        "only the end is copied: {part_len} of {whole_len}"
    );

    let long = finished(&registry, LONG_LAST_LINE).await;
    let ((part, whole), _) = previews(&registry, &long);
    assert_eq!(part, whole);

    let short = finished(&registry, "echo one; echo two").await;
    let ((part, whole), _) = previews(&registry, &short);
    assert_eq!(part, whole);
    assert!(part.contains("two"), "{part}");

    let growing = session(&registry, GROWING).await;
    herd_test_support::wait::until(Duration::from_secs(60), "the unfinished line", || {
        growing.tail().view().0.ends_with(b"ghp_0123456789")
    })
    .await;
    let ((part, whole), (part_len, whole_len)) = previews(&registry, &growing);
    assert_eq!(part, whole);
    assert!(
        !part.contains("ghp_0123456789"),
        "the held line is not shown: {part}"
    );
    assert!(
        part_len * 2 < whole_len,
        "only the end is copied: {part_len} of {whole_len}"
    );
    registry
        .kill(growing.id.as_str(), crate::KillSource::ProcessKill)
        .await
        .expect("the job is killed");
}
