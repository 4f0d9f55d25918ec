//! Tests of the pipeline: hook order, redaction after hooks, fail-open on error,
//! panic and timeout.

use super::*;

fn ctx() -> OutputContext<'static> {
    OutputContext {
        route: Route::Poll,
        command: "make test",
        return_code: None,
        owner_task_id: "task-1",
        session_id: "proc_0123456789ab",
        backend: "local",
        partial: false,
    }
}

const KEY: &str = "sk-proj-abcdefghijklmnopqrstuvwxyz0123";

/// Appends a suffix, so order is visible in the output.
#[derive(Debug)]
struct Append(&'static str);

impl Hook for Append {
    fn name(&self) -> &str {
        self.0
    }
    fn transform(&self, _: &OutputContext<'_>, output: &str) -> Result<Option<String>, HookError> {
        Ok(Some(format!("{output}{}", self.0)))
    }
}

#[derive(Debug)]
struct Failing;

impl Hook for Failing {
    fn name(&self) -> &str {
        "failing"
    }
    fn transform(&self, _: &OutputContext<'_>, _: &str) -> Result<Option<String>, HookError> {
        Err(HookError::new("no can do"))
    }
}

#[derive(Debug)]
struct Panicking;

impl Hook for Panicking {
    fn name(&self) -> &str {
        "panicking"
    }
    fn transform(&self, _: &OutputContext<'_>, _: &str) -> Result<Option<String>, HookError> {
        panic!("plugin bug")
    }
}

/// Blocks until the test releases it: a real wedged hook, released by a channel.
#[derive(Debug)]
struct Wedged {
    release: Mutex<mpsc::Receiver<()>>,
    n_entered: std::sync::atomic::AtomicUsize,
}

impl Hook for Wedged {
    fn name(&self) -> &str {
        "wedged"
    }
    fn transform(&self, _: &OutputContext<'_>, _: &str) -> Result<Option<String>, HookError> {
        self.n_entered
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let release = self.release.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = release.recv_timeout(Duration::from_secs(30));
        Ok(Some("too late".to_owned()))
    }
}

#[test]
fn b30_hooks_compose_in_order_then_redaction() {
    let chain = HookChain::new(vec![Arc::new(Append("-a")), Arc::new(Append("-b"))]);
    let pipeline = Pipeline::new(chain, &RedactorConfig::default()).expect("no extra patterns");
    assert_eq!(pipeline.show(&ctx(), crate::Window::all("x")), "x-a-b");
}

/// A hook that injects a secret cannot get it past the redactor.
#[derive(Debug)]
struct Leaky;

impl Hook for Leaky {
    fn name(&self) -> &str {
        "leaky"
    }
    fn transform(&self, _: &OutputContext<'_>, output: &str) -> Result<Option<String>, HookError> {
        Ok(Some(format!("{output} {KEY}")))
    }
}

#[test]
fn b30_redaction_runs_after_a_hook_that_adds_a_secret() {
    let pipeline = Pipeline::with_redactor(
        HookChain::new(vec![Arc::new(Leaky)]),
        Arc::new(Redactor::builtin()),
    );
    let out = pipeline.show(&ctx(), crate::Window::all("done"));
    assert_eq!(out, "done sk-pro...0123");
}

#[test]
fn b30_failing_and_panicking_hooks_fail_open_and_are_counted() {
    let chain = HookChain::new(vec![
        Arc::new(Failing),
        Arc::new(Panicking),
        Arc::new(Append(" ok")),
    ])
    // Errors and panics are counted here, not time: a budget no loaded machine
    // reaches keeps a slow thread start from counting as a timeout.
    .with_budget(Duration::from_secs(600));
    let pipeline = Pipeline::new(chain, &RedactorConfig::default()).expect("no extra patterns");
    for _ in 0..2 {
        assert_eq!(
            pipeline.show(&ctx(), crate::Window::all(&format!("out {KEY}"))),
            "out sk-pro...0123 ok"
        );
    }
    let stats = pipeline.hook_stats();
    assert_eq!(stats[0].n_errors, 2);
    assert_eq!(stats[0].last_failure.as_deref(), Some("no can do"));
    assert_eq!(stats[1].n_panics, 2);
    assert_eq!(
        stats[1].last_failure.as_deref(),
        Some("hook panicked: plugin bug")
    );
    assert_eq!(stats[2].n_replaced, 2);
}

#[test]
fn b30_slow_hook_is_abandoned_then_suppressed() {
    let (release, wait) = mpsc::channel();
    let wedged = Arc::new(Wedged {
        release: Mutex::new(wait),
        n_entered: std::sync::atomic::AtomicUsize::new(0),
    });
    let chain = HookChain::new(vec![wedged.clone(), Arc::new(Append(" after"))])
        .with_budget(Duration::from_millis(50));
    let pipeline = Pipeline::new(chain, &RedactorConfig::default()).expect("no extra patterns");
    let started = Instant::now();
    assert_eq!(
        pipeline.show(&ctx(), crate::Window::all(&format!("a {KEY}"))),
        "a sk-pro...0123 after"
    );
    // Within the 60 s suppression the hook is not even called.
    assert_eq!(pipeline.show(&ctx(), crate::Window::all("b")), "b after");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the caller waited for the wedged hook"
    );
    let stats = pipeline.hook_stats();
    assert_eq!(
        (stats[0].n_calls, stats[0].n_timeouts, stats[0].n_suppressed),
        (1, 1, 1)
    );
    assert_eq!(
        wedged.n_entered.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    release.send(()).expect("the wedged hook is still waiting");
}

#[test]
fn b30_stream_masks_a_token_split_across_chunks() {
    let pipeline = std::sync::Arc::new(Pipeline::redaction_only());
    let mut stream = Pipeline::show_stream(&pipeline, &ctx());
    let mut out = stream
        .push("line one\nkey: sk-proj-abcdefghij")
        .into_string();
    out.push_str(&stream.push("klmnopqrstuvwxyz0123 end\nnext"));
    out.push_str(&stream.finish());
    assert_eq!(out, "line one\nkey: sk-pro...0123 end\nnext");
}

#[test]
fn pipeline_is_send_sync_and_debug() {
    fn check<T: Send + Sync + fmt::Debug>() {}
    check::<Pipeline>();
}

/// Blocks on the completion route until released; transforms every other route.
#[derive(Debug)]
struct SlowOnCompletion {
    entered: std::sync::atomic::AtomicBool,
    release: Mutex<mpsc::Receiver<()>>,
}

impl Hook for SlowOnCompletion {
    fn name(&self) -> &str {
        "slow-completion"
    }
    fn transform(
        &self,
        ctx: &OutputContext<'_>,
        output: &str,
    ) -> Result<Option<String>, HookError> {
        if ctx.route == Route::Completion {
            self.entered
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let release = self.release.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = release.recv_timeout(Duration::from_secs(30));
        }
        Ok(Some(format!("{output} [{}]", ctx.route.as_str())))
    }
}

#[test]
fn b30_a_hook_slow_on_completions_does_not_hold_up_answers_a_caller_waits_on() {
    let (release, wait) = mpsc::channel();
    let hook = Arc::new(SlowOnCompletion {
        entered: std::sync::atomic::AtomicBool::new(false),
        release: Mutex::new(wait),
    });
    let chain = HookChain::new(vec![hook.clone()]).with_budget(Duration::from_secs(60));
    let pipeline = Arc::new(Pipeline::new(chain, &RedactorConfig::default()).expect("valid"));
    let background = {
        let pipeline = Arc::clone(&pipeline);
        std::thread::spawn(move || {
            let completion = OutputContext {
                route: Route::Completion,
                ..ctx()
            };
            pipeline
                .show(&completion, crate::Window::all("done"))
                .to_string()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !hook.entered.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the completion call never started"
        );
        std::thread::yield_now();
    }
    // The completion is stuck inside the hook; a poll answer still goes through it
    // on the other worker, at once.
    assert_eq!(
        pipeline.show(&ctx(), crate::Window::all("out")),
        "out [poll]"
    );
    release.send(()).expect("the completion call waits");
    assert_eq!(background.join().expect("no panic"), "done [completion]");
}

/// Names of this process's threads.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|c| c.trim_end().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// [`Wedged`] under a name no other test's hook has, so its threads can be counted.
#[derive(Debug)]
struct Hung(Wedged);

impl Hook for Hung {
    fn name(&self) -> &str {
        "hung"
    }
    fn transform(
        &self,
        ctx: &OutputContext<'_>,
        output: &str,
    ) -> Result<Option<String>, HookError> {
        self.0.transform(ctx, output)
    }
}

#[test]
fn b30_a_hung_hook_costs_one_thread_per_lane_not_one_per_timeout() {
    let (release, wait) = mpsc::channel();
    let wedged = Arc::new(Hung(Wedged {
        release: Mutex::new(wait),
        n_entered: std::sync::atomic::AtomicUsize::new(0),
    }));
    // No suppression: every call after a timeout tries the hook again.
    let chain = HookChain::new(vec![wedged.clone()])
        .with_budget(Duration::from_millis(20))
        .with_suppression(Duration::ZERO);
    let pipeline = Pipeline::new(chain, &RedactorConfig::default()).expect("valid");
    for _ in 0..20 {
        assert_eq!(pipeline.show(&ctx(), crate::Window::all("x")), "x");
    }
    let hook_threads = thread_names()
        .iter()
        .filter(|n| n.as_str() == "herd-hook-hung")
        .count();
    assert_eq!(hook_threads, 1, "{:?}", thread_names());
    assert_eq!(
        wedged.0.n_entered.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the hung call was not the only one"
    );
    let stats = pipeline.hook_stats();
    assert_eq!((stats[0].n_timeouts, stats[0].n_suppressed), (1, 19));
    release.send(()).expect("the wedged hook is still waiting");
}

/// Records every call: its text and whether it was flagged partial.
#[derive(Debug, Default)]
struct Recorder {
    calls: Mutex<Vec<(String, bool)>>,
}

impl Hook for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn transform(
        &self,
        ctx: &OutputContext<'_>,
        output: &str,
    ) -> Result<Option<String>, HookError> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((output.to_owned(), ctx.partial));
        Ok(None)
    }
}

#[test]
fn b30_a_stream_calls_hooks_per_batch_of_whole_lines_and_flags_the_idle_flush_partial() {
    let recorder = Arc::new(Recorder::default());
    let chain = HookChain::new(vec![Arc::clone(&recorder) as Arc<dyn Hook>]);
    let pipeline = Arc::new(Pipeline::new(chain, &RedactorConfig::default()).expect("default"));
    let mut stream = Pipeline::show_stream(&pipeline, &ctx());
    let mut shown = String::new();
    for chunk in ["", "one\ntw", "", "o\nthree\n", "", "prompt> "] {
        shown.push_str(&stream.push(chunk));
    }
    shown.push_str(&stream.release_idle());
    shown.push_str(&stream.release_idle());
    shown.push_str(&stream.push("yes\n"));
    shown.push_str(&stream.finish());
    assert_eq!(shown, "one\ntwo\nthree\nprompt> yes\n");
    let calls = recorder
        .calls
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert_eq!(
        calls,
        vec![
            ("one\n".to_owned(), false),
            ("two\nthree\n".to_owned(), false),
            ("prompt> ".to_owned(), true),
            ("yes\n".to_owned(), false),
        ]
    );
}

#[test]
fn b32_a_hook_that_could_not_start_is_skipped_uncounted() {
    #[derive(Debug)]
    struct NeverStarts;
    impl Hook for NeverStarts {
        fn name(&self) -> &str {
            "never"
        }
        fn transform(&self, _: &OutputContext<'_>, _: &str) -> Result<Option<String>, HookError> {
            Ok(Some("transformed".to_owned()))
        }
        fn ready(&self) -> Result<(), String> {
            Err("init did not return".to_owned())
        }
        fn start(&self) -> HookStart {
            HookStart::Failed {
                reason: "init did not return".to_owned(),
            }
        }
    }
    let chain = HookChain::new(vec![Arc::new(NeverStarts) as Arc<dyn Hook>]);
    assert_eq!(chain.run(&ctx(), "text"), "text");
    let stats = &chain.stats()[0];
    assert_eq!((stats.n_calls, stats.n_errors), (0, 0), "{stats:?}");
    assert!(matches!(stats.start, HookStart::Failed { .. }), "{stats:?}");
}
