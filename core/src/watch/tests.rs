//! Tests for the watch limiter and the global breaker (B20), driven by an explicit clock.

use super::*;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn watch(patterns: &[&str]) -> WatchState {
    WatchState::new(patterns.iter().map(|p| (*p).to_owned()).collect())
}

/// Feeds one matching line at `t0 + at` and returns what it produced.
fn hit(state: &mut WatchState, t0: Instant, at: Duration) -> Option<WatchDelivery> {
    state.on_line(t0 + at, "ERROR boom")
}

fn delivered(delivery: Option<WatchDelivery>) -> WatchMatch {
    let delivery = delivery.expect("a delivery");
    assert_eq!(delivery.disabled, None, "unexpectedly disabled");
    delivery.matched.expect("a match")
}

#[test]
fn b20_defaults() {
    let state = watch(&["ERROR"]);
    assert!(state.is_active());
    assert_eq!(state.n_delivered(), 0);
    assert_eq!(state.suppressed(), 0);
    assert_eq!(state.disabled_reason(), None);
    assert_eq!(state.patterns(), ["ERROR".to_owned()]);
    assert!(!watch(&[]).is_active());
    assert!(!watch(&[""]).is_active());
}

#[test]
fn b20_basic_match_delivers_pattern_and_line() {
    let mut state = watch(&["ERROR"]);
    let t0 = Instant::now();
    assert_eq!(state.on_line(t0, "all good"), None);
    let m = delivered(state.on_line(t0, "ERROR: disk full  "));
    assert_eq!(m.pattern, "ERROR");
    assert_eq!(m.output, "ERROR: disk full");
    assert!(!m.output_cut);
    assert_eq!(m.suppressed, 0);
    assert_eq!(state.n_delivered(), 1);
}

#[test]
fn b20_first_pattern_of_first_matching_line_is_reported() {
    let mut state = watch(&["ERROR", "WARN"]);
    let m = delivered(state.on_lines(
        Instant::now(),
        ["ok", "WARN low memory", "ERROR crashed", "fine"],
    ));
    assert_eq!(m.pattern, "WARN");
    assert_eq!(m.output, "WARN low memory\nERROR crashed");
}

#[test]
fn b20_a_delivery_carries_at_most_20_lines() {
    let mut state = watch(&["hit"]);
    let lines: Vec<String> = (0..30).map(|i| format!("hit {i}")).collect();
    let m = delivered(state.on_lines(Instant::now(), lines.iter().map(String::as_str)));
    assert_eq!(m.output.lines().count(), WATCH_MAX_LINES);
    assert!(m.output.ends_with("hit 19"));
    assert!(m.output_cut);
}

#[test]
fn b20_a_delivery_carries_at_most_2000_chars() {
    let mut state = watch(&["é"]);
    // 3 lines of 1000 multi-byte characters each: the cut lands on a char boundary.
    let line = "é".repeat(1000);
    let m = delivered(state.on_lines(
        Instant::now(),
        [line.as_str(), line.as_str(), line.as_str()],
    ));
    assert_eq!(m.output.chars().count(), WATCH_MAX_CHARS);
    assert!(m.output_cut);
}

#[test]
fn b20_matches_within_the_spacing_are_counted_and_reported_once() {
    let mut state = watch(&["ERROR"]);
    let t0 = Instant::now();
    delivered(hit(&mut state, t0, secs(0)));
    for at in 1..=3 {
        assert_eq!(hit(&mut state, t0, secs(at)), None);
    }
    // A batch with two matching lines counts two.
    assert_eq!(
        state.on_lines(t0 + secs(4), ["ERROR a", "ERROR b", "ok"]),
        None
    );
    assert_eq!(state.suppressed(), 5);
    // The window ends exactly at 15 s.
    let m = delivered(hit(&mut state, t0, WATCH_SPACING));
    assert_eq!(m.suppressed, 5);
    assert_eq!(state.suppressed(), 0);
    let m = delivered(hit(&mut state, t0, WATCH_SPACING * 2));
    assert_eq!(m.suppressed, 0);
}

#[test]
fn b20_three_consecutive_rate_limited_windows_disable_watching_once() {
    let mut state = watch(&["ERROR"]);
    let t0 = Instant::now();
    delivered(hit(&mut state, t0, secs(0)));
    assert_eq!(hit(&mut state, t0, secs(1)), None); // strike 1
    assert_eq!(hit(&mut state, t0, secs(2)), None); // same window: still 1
    delivered(hit(&mut state, t0, secs(15)));
    assert_eq!(hit(&mut state, t0, secs(16)), None); // strike 2
    delivered(hit(&mut state, t0, secs(30)));
    let delivery = hit(&mut state, t0, secs(31)).expect("the third strike disables"); // strike 3
    assert_eq!(delivery.matched, None);
    assert_eq!(
        delivery.disabled,
        Some(WatchDisabled {
            reason: DisableReason::RateLimited,
            suppressed: 1
        })
    );
    assert!(!state.is_active());
    assert_eq!(state.disabled_reason(), Some(DisableReason::RateLimited));
    // Exactly one disabled event: nothing after it.
    assert_eq!(hit(&mut state, t0, secs(60)), None);
    assert_eq!(hit(&mut state, t0, secs(61)), None);
}

#[test]
fn b20_a_clean_window_resets_the_strike_run() {
    let mut state = watch(&["ERROR"]);
    let t0 = Instant::now();
    delivered(hit(&mut state, t0, secs(0)));
    assert_eq!(hit(&mut state, t0, secs(1)), None); // strike 1
    delivered(hit(&mut state, t0, secs(15)));
    assert_eq!(hit(&mut state, t0, secs(16)), None); // strike 2
    delivered(hit(&mut state, t0, secs(30))); // window 3 stays clean
    delivered(hit(&mut state, t0, secs(50))); // run reset to 0
    assert_eq!(hit(&mut state, t0, secs(51)), None); // strike 1
    delivered(hit(&mut state, t0, secs(65)));
    assert_eq!(hit(&mut state, t0, secs(66)), None); // strike 2
    assert!(state.is_active());
    delivered(hit(&mut state, t0, secs(80)));
    let delivery = hit(&mut state, t0, secs(81)).expect("strike 3 disables");
    assert_eq!(
        delivery.disabled.map(|d| d.reason),
        Some(DisableReason::RateLimited)
    );
}

#[test]
fn b20_the_eighth_delivery_is_the_last_and_disables_watching() {
    let mut state = watch(&["ERROR"]);
    let t0 = Instant::now();
    for n in 1..WATCH_LIFETIME_CAP {
        let at = secs(20) * n;
        delivered(hit(&mut state, t0, at));
        assert_eq!(state.n_delivered(), n);
    }
    // A suppressed match does not count toward the cap; it rides along with the
    // 8th delivery.
    assert_eq!(hit(&mut state, t0, secs(20) * 7 + secs(1)), None);
    assert_eq!(state.n_delivered(), WATCH_LIFETIME_CAP - 1);
    assert!(state.is_active());
    let delivery = hit(&mut state, t0, secs(20) * 8).expect("the 8th delivery");
    let m = delivery.matched.expect("the 8th match is still delivered");
    assert_eq!(m.suppressed, 1);
    assert_eq!(
        delivery.disabled,
        Some(WatchDisabled {
            reason: DisableReason::LifetimeCap,
            suppressed: 0
        })
    );
    assert_eq!(state.n_delivered(), WATCH_LIFETIME_CAP);
    assert_eq!(state.disabled_reason(), Some(DisableReason::LifetimeCap));
    assert_eq!(hit(&mut state, t0, secs(20) * 9), None);
}

#[test]
fn b20_nothing_is_delivered_after_exit() {
    let mut state = watch(&["ERROR"]);
    let t0 = Instant::now();
    state.on_exit();
    assert_eq!(hit(&mut state, t0, secs(0)), None);
    assert!(!state.is_active());
    assert_eq!(state.disabled_reason(), None);
}

#[test]
fn b20_disable_messages_say_why_and_what_follows() {
    let rate = DisableReason::RateLimited.message();
    assert!(rate.contains("15s") && rate.contains("3 windows") && rate.contains("exits"));
    let cap = DisableReason::LifetimeCap.message();
    assert!(cap.contains('8') && cap.contains("exits"));
    assert_eq!(DisableReason::LifetimeCap.as_str(), "lifetime_cap");
}

#[test]
fn b20_breaker_trips_on_the_16th_match_in_10s_and_releases_after_30s() {
    let mut breaker = WatchBreaker::new();
    let t0 = Instant::now();
    // 18 sessions match within a second: 15 admitted, then one trip.
    let answers: Vec<Admission> = (0..18)
        .map(|i| breaker.admit(t0 + Duration::from_millis(i * 50)))
        .collect();
    assert!(
        answers[..15]
            .iter()
            .all(|a| a.is_admitted && a.events.is_empty())
    );
    let tripped_at = t0 + Duration::from_millis(15 * 50);
    assert_eq!(
        answers[15],
        Admission {
            is_admitted: false,
            events: vec![BreakerEvent::Tripped {
                until: tripped_at + BREAKER_TRIP
            }]
        }
    );
    assert!(
        answers[16..]
            .iter()
            .all(|a| !a.is_admitted && a.events.is_empty())
    );
    assert!(breaker.is_tripped(tripped_at + secs(29)));
    // Still dropping just before the trip ends.
    assert!(!breaker.admit(tripped_at + secs(29)).is_admitted);
    // The next match after it ends is admitted, preceded by the release.
    let after = breaker.admit(tripped_at + BREAKER_TRIP);
    assert_eq!(
        after,
        Admission {
            is_admitted: true,
            events: vec![BreakerEvent::Released { suppressed: 4 }]
        }
    );
    assert!(!breaker.is_tripped(tripped_at + BREAKER_TRIP));
}

#[test]
fn b20_breaker_window_restarts_after_10s() {
    let mut breaker = WatchBreaker::new();
    let t0 = Instant::now();
    for _ in 0..BREAKER_MAX_MATCHES {
        assert!(breaker.admit(t0).is_admitted);
    }
    let a = breaker.admit(t0 + BREAKER_WINDOW);
    assert!(a.is_admitted && a.events.is_empty());
}

#[test]
fn b20_breaker_release_is_announced_by_the_timer_once() {
    let mut breaker = WatchBreaker::new();
    let t0 = Instant::now();
    for _ in 0..=BREAKER_MAX_MATCHES {
        breaker.admit(t0);
    }
    assert!(breaker.is_tripped(t0));
    assert_eq!(breaker.tick(t0 + secs(10)), None);
    assert_eq!(
        breaker.tick(t0 + BREAKER_TRIP),
        Some(BreakerEvent::Released { suppressed: 1 })
    );
    assert_eq!(breaker.tick(t0 + BREAKER_TRIP + secs(1)), None);
    let a = breaker.admit(t0 + BREAKER_TRIP + secs(1));
    assert!(a.is_admitted && a.events.is_empty());
}

#[test]
fn b20_breaker_messages_name_the_limits_and_the_count() {
    let t = Instant::now();
    let tripped = BreakerEvent::Tripped { until: t };
    assert_eq!(tripped.as_str(), "watch_overflow_tripped");
    assert!(tripped.message().contains("15") && tripped.message().contains("30s"));
    let released = BreakerEvent::Released { suppressed: 7 };
    assert_eq!(released.as_str(), "watch_overflow_released");
    assert!(released.message().contains('7'));
}

#[test]
fn b20_a_delivery_dropped_by_the_breaker_still_counts_toward_the_cap() {
    let mut breaker = WatchBreaker::new();
    let t0 = Instant::now();
    for _ in 0..=BREAKER_MAX_MATCHES {
        breaker.admit(t0);
    }
    let mut state = watch(&["ERROR"]);
    let mut n_admitted = 0;
    let mut disabled = None;
    for n in 0..WATCH_LIFETIME_CAP {
        // Spaced 16 s apart with no suppressed matches: no strikes.
        let now = t0 + secs(16) * n;
        let delivery = state.on_line(now, "ERROR").expect("spaced matches deliver");
        if breaker.admit(now).is_admitted {
            n_admitted += 1;
        }
        disabled = delivery.disabled.or(disabled);
    }
    // The first two matches fell into the 30 s trip and were dropped, yet the
    // 8th delivery still ended watching.
    assert_eq!(n_admitted, WATCH_LIFETIME_CAP - 2);
    assert_eq!(disabled.map(|d| d.reason), Some(DisableReason::LifetimeCap));
    assert!(!state.is_active());
}
