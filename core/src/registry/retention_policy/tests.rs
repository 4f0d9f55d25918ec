//! Tests for the cache's eviction order: the rule it applies (TTL, then the cap,
//! never a session whose receipt is on its way) and how little a finish asks.

use std::cell::Cell;
use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use super::{EvictionOrder, Retention};
use crate::config::RegistryConfig;
use crate::id::SessionId;

fn retention(cap: usize, ttl: Duration) -> Retention {
    Retention::new(&RegistryConfig {
        finished_cap: cap,
        finished_ttl: ttl,
        ..RegistryConfig::default()
    })
}

fn ids(n: usize) -> Vec<SessionId> {
    (0..n).map(|_| SessionId::generate()).collect()
}

#[test]
fn b11_the_cache_drops_the_expired_then_the_oldest_beyond_the_cap_never_a_pending_one() {
    let now = SystemTime::now();
    let rules = retention(2, Duration::from_secs(60));
    let all = ids(6);
    let mut order = EvictionOrder::default();
    // 0 and 1 expired (1's receipt is on its way); 2..6 recent, 2 the oldest.
    let ages = [120, 90, 50, 40, 30, 20];
    for (id, age) in all.iter().zip(ages) {
        order.enter(id, now - Duration::from_secs(age));
    }
    let pending: HashSet<SessionId> = [all[1].clone(), all[3].clone()].into();
    let out = rules.cache_evictions(&mut order, all.len(), now, |id| pending.contains(id), false);
    assert_eq!(out.expired, vec![all[0].clone()]);
    // Five kept, cap 2: three must go, the oldest that may (1 and 3 may not).
    assert_eq!(
        out.excess,
        vec![all[2].clone(), all[4].clone(), all[5].clone()]
    );
    // Their receipts written, the next round that asks again lets the expired go.
    let out = rules.cache_evictions(&mut order, 2, now, |_| false, true);
    assert_eq!(out.expired, vec![all[1].clone()]);
    assert_eq!(out.excess, Vec::<SessionId>::new());
    assert_eq!(order.n_waiting(), 0);
}

#[test]
fn b11_a_finish_asks_only_about_what_entered_since_not_every_pending_receipt() {
    // A mass shutdown: thousands of finished sessions whose receipts are on
    // their way. Each finish's prune must not ask about all of them again.
    let now = SystemTime::now();
    let rules = retention(64, Duration::from_secs(1_800));
    let waiting = ids(5_000);
    let mut order = EvictionOrder::default();
    let asked = Cell::new(0_usize);
    let pending = |_: &SessionId| {
        asked.set(asked.get() + 1);
        true
    };
    for (n_kept, id) in waiting.iter().enumerate() {
        order.enter(id, now);
        let out = rules.cache_evictions(&mut order, n_kept + 1, now, pending, false);
        assert!(out.expired.is_empty() && out.excess.is_empty());
    }
    assert_eq!(asked.get(), waiting.len(), "one question per finish");
    assert_eq!(order.n_waiting(), waiting.len());
    // Once the receipts are written, one round asks about each once and lets all
    // but the cap's worth go, the oldest first.
    asked.set(0);
    let out = rules.cache_evictions(
        &mut order,
        waiting.len(),
        now,
        |_| {
            asked.set(asked.get() + 1);
            false
        },
        true,
    );
    assert_eq!(asked.get(), waiting.len());
    assert_eq!(out.excess.len(), waiting.len() - 64);
    assert_eq!(order.n_waiting(), 0);
}

#[test]
fn b11_a_session_taken_out_or_entered_again_is_ordered_once() {
    let now = SystemTime::now();
    let rules = retention(0, Duration::from_secs(1_800));
    let all = ids(3);
    let mut order = EvictionOrder::default();
    order.enter(&all[0], now - Duration::from_secs(3));
    order.enter(&all[1], now - Duration::from_secs(2));
    order.enter(&all[1], now - Duration::from_secs(1));
    order.enter(&all[2], now);
    order.leave(&all[0]);
    let out = rules.cache_evictions(&mut order, 2, now, |_| false, false);
    assert_eq!(out.excess, vec![all[1].clone(), all[2].clone()]);
    let out = rules.cache_evictions(&mut order, 0, now, |_| false, true);
    assert!(out.excess.is_empty() && out.expired.is_empty());
}
