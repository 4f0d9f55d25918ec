//! B32 from the host's side and fail-open through the registry: a broken plugin
//! beside a good one is reported `failed` while the good one still transforms
//! registry output, and a plugin that errors or panics never stops output: every
//! route still answers, redacted.

use std::time::Duration;

use herd_hooks::PluginStatus;

use crate::support::{EXAMPLE, Fixture, MISBEHAVE, NOOP, completion_of, completion_output};

const GHP: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
const GHP_MASKED: &str = "ghp_ab...6789";

#[tokio::test(flavor = "multi_thread")]
async fn b32_broken_plugins_reported_failed_while_good_one_transforms_registry_output() {
    let fx = Fixture::with_plugins(|p| {
        p.lib("tidy-terminal", EXAMPLE);
        p.install(
            "missing-lib",
            "name = \"missing-lib\"\nversion = \"1.0.0\"\nlibrary = \"libmissing.so\"\n",
            None,
        );
        p.install(
            "not-elf",
            "name = \"not-elf\"\nversion = \"1.0.0\"\nlibrary = \"libnotelf.so\"\n",
            None,
        );
        p.write_file("not-elf", "libnotelf.so", b"this is not a shared object\n");
    })
    .await;
    fx.assert_loaded(&["tidy-terminal"]);
    for broken in ["missing-lib", "not-elf"] {
        let row = fx.report(broken);
        assert_eq!(row.status, PluginStatus::Failed, "{row:#?}");
        let reason = row.reason.as_deref().unwrap_or_default();
        assert!(
            !reason.is_empty(),
            "{broken}: a failed row says why: {row:#?}"
        );
    }
    assert!(
        fx.report("missing-lib")
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("libmissing.so")),
        "{:#?}",
        fx.report("missing-lib")
    );
    assert_eq!(
        fx.registry.config().pipeline.chain().names(),
        vec!["tidy-terminal".to_owned()],
        "only the good plugin is in the chain"
    );

    let mut events = fx.registry.subscribe();
    let info = fx.run("printf 'same\\nsame\\nsame\\n'").await;
    let id = &info.session_id;
    let waited = fx.done(id).await;
    assert_eq!(waited.output.trim_end(), "same [x3]");
    assert_eq!(fx.poll(id).output_preview.trim_end(), "same [x3]");
    let event = completion_of(&mut events, id, Duration::from_secs(10)).await;
    assert_eq!(completion_output(&event).0.trim_end(), "same [x3]");
    fx.assert_groups_gone().await;
}

/// Every output route of a finished session `id` answers and none carries the raw token.
async fn all_routes(fx: &Fixture, id: &herd_core::SessionId) -> Vec<(&'static str, String)> {
    vec![
        ("poll", fx.poll(id).output_preview.into_string()),
        ("log", fx.log(id).output.into_string()),
        ("log_chunk", fx.log_chunk(id)),
        ("list_preview", fx.row(id).output_preview.into_string()),
        ("wait", fx.done(id).await.output.into_string()),
        ("kill", fx.kill(id).await.output.into_string()),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn b30_misbehaving_plugin_never_stops_output_and_redaction_still_runs() {
    let fx = Fixture::with_plugins(|p| {
        p.lib("misbehave", MISBEHAVE);
        p.lib("noop", NOOP);
    })
    .await;
    fx.assert_loaded(&["misbehave", "noop"]);
    let mut events = fx.registry.subscribe();

    for trigger in ["PLEASE_FAIL", "PLEASE_PANIC"] {
        let info = fx.run(&format!("echo {trigger} {GHP}")).await;
        let id = &info.session_id;
        let event = completion_of(&mut events, id, Duration::from_secs(10)).await;
        let want = format!("{trigger} {GHP_MASKED}");
        assert_eq!(completion_output(&event).0.trim_end(), want, "completion");
        for (route, out) in all_routes(&fx, id).await {
            assert!(
                !out.contains(GHP),
                "{trigger} {route}: raw token in {out:?}"
            );
            assert_eq!(
                out.trim_end(),
                want,
                "{trigger} {route}: output passes unchanged"
            );
        }
    }

    // The plugin survived its error and its (caught) panic: it still transforms.
    let info = fx.run(&format!("echo fine {GHP}")).await;
    let id = &info.session_id;
    let event = completion_of(&mut events, id, Duration::from_secs(10)).await;
    let want = format!("fine {GHP_MASKED}\n [misbehave]");
    let got = completion_output(&event).0;
    assert!(
        got.contains(&format!("fine {GHP_MASKED}")) && got.ends_with(" [misbehave]"),
        "{got:?} (wanted something like {want:?})"
    );
    let stats = fx.registry.config().pipeline.chain().stats();
    let misbehave = stats
        .iter()
        .find(|s| s.name == "misbehave")
        .expect("misbehave is in the chain");
    assert!(misbehave.n_errors >= 2, "{stats:#?}");
    assert!(misbehave.n_replaced >= 1, "{stats:#?}");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_plugin_on_the_completion_route_never_holds_the_session_table() {
    let fx = Fixture::build_with_budget(
        |p| {
            p.lib("misbehave", MISBEHAVE);
        },
        |_| {},
        Some(Duration::from_secs(60)),
    )
    .await;
    fx.assert_loaded(&["misbehave"]);
    let gate = fx.home().root().join("gate");
    std::fs::create_dir_all(&gate).expect("a gate dir");
    let info = fx
        .run(&format!("echo PLEASE_STALL:{}", gate.display()))
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !gate.join("stalled").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the plugin never stalled"
        );
        tokio::task::yield_now().await;
    }
    // The plugin is stalled inside the completion's hooks and stays so until
    // released: the session table must answer meanwhile (a lookup, the running
    // set and a spawn all take it), and the session is still running, its
    // completion not yet published; a list's previews go through the plugin's
    // other worker and do not queue behind the stalled completion.
    let looked_up = tokio::time::timeout(Duration::from_secs(20), async {
        let found = fx.registry.lookup(info.session_id.as_str()).is_ok();
        let running = fx
            .registry
            .snapshot_running_ids("t")
            .contains(&info.session_id);
        let other = fx.run("sleep 30").await;
        // A list makes its previews through the same plugin, on the other lane.
        let listed = fx.registry.list(&herd_core::ListFilter::default());
        assert!(listed.iter().any(|r| r.session_id == other.session_id));
        (found, running, other)
    })
    .await
    .expect("the table answered while a plugin stalled in the completion's hooks");
    assert!(looked_up.0 && looked_up.1, "{looked_up:?}");
    let other = looked_up.2;
    assert!(
        !gate.join("release").exists(),
        "the stall ended before the table answered"
    );
    std::fs::write(gate.join("release"), "").expect("release the plugin");
    fx.done(&info.session_id).await;
    fx.kill(&other.session_id).await;
    fx.assert_groups_gone().await;
}
