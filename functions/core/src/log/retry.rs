//! Backoff between optimistic-concurrency attempts: exponential growth from `backon`, with
//! "full jitter" (a uniformly random wait between zero and the exponential delay), which spreads
//! competing writers out better than adding a little noise to a shared schedule.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use rand::Rng;

use crate::config::LogConfig;

/// Waits between attempts: exponential from a first delay to a cap, each wait a uniformly random
/// part of the current delay. The log's algorithms take their bounds from [`LogConfig`]; other
/// retry loops (the sync writer's group commit) give theirs with [`Backoff::between`].
#[derive(Debug)]
pub struct Backoff {
    delays: backon::ExponentialBackoff,
    max: Duration,
}

impl Backoff {
    pub(super) fn new(cfg: &LogConfig) -> Self {
        Self::between(cfg.min_backoff, cfg.max_backoff)
    }

    /// Delays from `first`, doubling, up to `max`.
    pub fn between(first: Duration, max: Duration) -> Self {
        let delays = ExponentialBuilder::default()
            .with_min_delay(first)
            .with_max_delay(max)
            .with_factor(2.0)
            .without_max_times()
            .build();
        Self { delays, max }
    }

    /// The next wait: uniform in `[0, delay]`.
    pub fn next_delay(&mut self) -> Duration {
        let cap = self.delays.next().unwrap_or(self.max);
        let micros = u64::try_from(cap.as_micros()).unwrap_or(u64::MAX);
        Duration::from_micros(rand::rng().random_range(0..=micros))
    }

    pub async fn sleep(&mut self) {
        tokio::time::sleep(self.next_delay()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_are_jittered_below_an_exponential_cap() {
        let cfg = LogConfig {
            min_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(80),
            ..LogConfig::default()
        };
        let mut b = Backoff::new(&cfg);
        let caps = [10u64, 20, 40, 80, 80, 80];
        for cap in caps {
            let d = b.next_delay();
            assert!(d <= Duration::from_millis(cap), "{d:?} above cap {cap} ms");
        }
        // Full jitter: over many draws the waits are spread, not all at the cap.
        let mut b = Backoff::new(&cfg);
        let draws: Vec<Duration> = (0..200).map(|_| b.next_delay()).collect();
        assert!(draws.iter().any(|d| *d < Duration::from_millis(40)));
    }
}
