//! Unit tests of the heartbeat schedule the one timer serves (B21), on an explicit clock.

use std::time::{Duration, Instant};

use super::*;
use crate::watch::Heartbeat;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn b21_schedule_orders_by_due_time_and_reschedules_after_a_tick() {
    let t0 = Instant::now();
    let mut schedule: BeatSchedule<u32, ()> = BeatSchedule::default();
    schedule.arm(1, (), Heartbeat::new(t0, secs(60)));
    schedule.arm(2, (), Heartbeat::new(t0, secs(30)));
    assert_eq!(schedule.len(), 2);
    assert_eq!(schedule.next_due(), Some(t0 + secs(30)));
    let mut ticked = Vec::new();
    schedule.run_due(t0 + secs(30), |key, heartbeat, ()| {
        ticked.push(*key);
        assert!(heartbeat.tick(t0 + secs(30), 10).is_some());
    });
    assert_eq!(ticked, [2]);
    // Session 2 is due again 30 s after its tick; session 1 at 60 s comes first.
    assert_eq!(schedule.next_due(), Some(t0 + secs(60)));
    ticked.clear();
    schedule.run_due(t0 + secs(60), |key, heartbeat, ()| {
        ticked.push(*key);
        let _ = heartbeat.tick(t0 + secs(60), 10);
    });
    ticked.sort_unstable();
    assert_eq!(ticked, [1, 2]);
}

#[test]
fn b21_forgotten_heartbeats_are_never_due() {
    let t0 = Instant::now();
    let mut schedule: BeatSchedule<u32, ()> = BeatSchedule::default();
    schedule.arm(1, (), Heartbeat::new(t0, secs(60)));
    schedule.forget(&1);
    assert_eq!(schedule.len(), 0);
    assert_eq!(schedule.next_due(), None);
    schedule.run_due(t0 + secs(600), |_, _, ()| panic!("nothing is due"));
}

#[test]
fn b21_a_caller_that_does_not_tick_cannot_spin_the_timer() {
    let t0 = Instant::now();
    let mut schedule: BeatSchedule<u32, ()> = BeatSchedule::default();
    schedule.arm(1, (), Heartbeat::new(t0, secs(60)));
    let mut n_calls = 0;
    schedule.run_due(t0 + secs(60), |_, _, ()| n_calls += 1);
    assert_eq!(n_calls, 1);
    assert!(schedule.next_due().is_some_and(|at| at > t0 + secs(60)));
}
