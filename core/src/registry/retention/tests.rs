//! Tests for the retention timer's schedule.

use std::time::Duration;

use super::{MAX_TICK, tick_for};

#[test]
fn b38_the_retention_tick_is_a_quarter_of_a_short_ttl_and_at_most_a_minute() {
    assert_eq!(tick_for(Duration::from_secs(1)), Duration::from_secs(1));
    assert_eq!(tick_for(Duration::from_secs(20)), Duration::from_secs(5));
    assert_eq!(tick_for(Duration::from_secs(7 * 86_400)), MAX_TICK);
    assert_eq!(MAX_TICK, Duration::from_secs(60));
}
