//! Tests for heartbeat bookkeeping and input validation (B21), driven by an explicit clock.

use serde_json::json;

use super::*;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn b21_zero_and_null_mean_off() {
    assert_eq!(validate_heartbeat(&json!(0), HEARTBEAT_FLOOR), Ok(None));
    assert_eq!(validate_heartbeat(&json!(null), HEARTBEAT_FLOOR), Ok(None));
    assert_eq!(validate_heartbeat(&json!(0.0), HEARTBEAT_FLOOR), Ok(None));
}

#[test]
fn b21_positive_values_are_clamped_to_the_floor() {
    assert_eq!(
        validate_heartbeat(&json!(5), HEARTBEAT_FLOOR),
        Ok(Some(secs(60)))
    );
    assert_eq!(
        validate_heartbeat(&json!(600), HEARTBEAT_FLOOR),
        Ok(Some(secs(600)))
    );
    assert_eq!(
        validate_heartbeat(&json!(90.0), HEARTBEAT_FLOOR),
        Ok(Some(secs(90)))
    );
    // Tests lower the floor.
    assert_eq!(validate_heartbeat(&json!(2), secs(1)), Ok(Some(secs(2))));
}

#[test]
fn b21_bad_values_are_refused_with_the_remedy() {
    for bad in [
        json!(-5),
        json!(1.5),
        json!(true),
        json!("60"),
        json!([60]),
        json!({"s": 60}),
        json!(-0.5),
    ] {
        let err = validate_heartbeat(&bad, HEARTBEAT_FLOOR)
            .expect_err("a non-whole-number heartbeat is refused");
        let message = err.to_string();
        assert!(message.contains(&bad.to_string()), "{message}");
        assert!(message.contains("0 turns heartbeats off"), "{message}");
        assert!(message.contains("raised to 60"), "{message}");
        assert!(message.starts_with("invalid heartbeat"), "{message}");
    }
}

#[test]
fn b21_no_beat_before_the_interval() {
    let t0 = Instant::now();
    let mut hb = Heartbeat::new(t0, secs(60));
    assert_eq!(hb.next_due(), t0 + secs(60));
    assert_eq!(hb.tick(t0 + secs(59), 100), None);
    assert_eq!(hb.seq(), 0);
    assert_eq!(hb.interval(), secs(60));
}

#[test]
fn b21_first_beat_includes_output_from_before_arming() {
    let t0 = Instant::now();
    let mut hb = Heartbeat::new(t0, secs(60));
    let beat = hb
        .tick(t0 + secs(60), 42)
        .expect("new output after the interval");
    assert_eq!(
        beat,
        Beat {
            seq: 1,
            from_total: 0,
            to_total: 42,
            interval: secs(60)
        }
    );
    assert_eq!(beat.n_new_bytes(), 42);
}

#[test]
fn b21_empty_ticks_are_skipped_and_do_not_count() {
    let t0 = Instant::now();
    let mut hb = Heartbeat::new(t0, secs(60));
    assert!(hb.tick(t0 + secs(60), 10).is_some());
    // Nothing new: skipped, the interval restarts.
    assert_eq!(hb.tick(t0 + secs(120), 10), None);
    assert_eq!(hb.seq(), 1);
    assert_eq!(hb.next_due(), t0 + secs(180));
    assert_eq!(hb.tick(t0 + secs(150), 20), None);
    let beat = hb.tick(t0 + secs(180), 20).expect("new output");
    assert_eq!((beat.seq, beat.from_total, beat.to_total), (2, 10, 20));
}

#[test]
fn b21_beats_cover_every_byte_exactly_once() {
    let t0 = Instant::now();
    let mut hb = Heartbeat::new(t0, secs(60));
    let totals = [0u64, 5, 5, 17, 17, 17, 90, 91, 300];
    let mut covered = 0u64;
    let mut seqs = Vec::new();
    for (i, &total) in totals.iter().enumerate() {
        // Ticks every 30 s: only every other one can be due.
        let now = t0 + secs(30) * u32::try_from(i + 1).expect("few ticks");
        if let Some(beat) = hb.tick(now, total) {
            assert_eq!(beat.from_total, covered, "a gap or an overlap");
            covered = beat.to_total;
            seqs.push(beat.seq);
        }
    }
    // The last total lands on a non-due tick; the next due tick picks it up.
    if let Some(beat) = hb.tick(t0 + secs(30) * 12, 300) {
        assert_eq!(beat.from_total, covered);
        covered = beat.to_total;
        seqs.push(beat.seq);
    }
    assert_eq!(covered, 300);
    let expected: Vec<u64> = (1..=u64::try_from(seqs.len()).expect("few beats")).collect();
    assert_eq!(seqs, expected);
}

#[test]
fn b21_a_large_delta_keeps_its_tail_and_counts_what_was_omitted() {
    let t0 = Instant::now();
    let mut hb = Heartbeat::new(t0, secs(60));
    let beat = hb.tick(t0 + secs(60), 10_000).expect("new output");
    let small = beat.output("short");
    assert_eq!(
        small,
        BeatOutput {
            text: "short".to_owned(),
            n_omitted_chars: 0
        }
    );
    let text = format!("{}{}", "a".repeat(500), "ü".repeat(HEARTBEAT_MAX_CHARS));
    let out = beat.output(&text);
    assert_eq!(out.n_omitted_chars, 500);
    assert_eq!(out.text, "ü".repeat(HEARTBEAT_MAX_CHARS));
    let exact = "x".repeat(HEARTBEAT_MAX_CHARS);
    assert_eq!(beat.output(&exact).n_omitted_chars, 0);
}
