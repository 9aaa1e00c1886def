//! Per-profile execution rates (`limits.executions_per_minute`): a sliding window of start
//! times per profile, so one busy profile is slowed without touching the others.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use sandgate_policy::Profile;

const WINDOW: Duration = Duration::from_secs(60);

/// Start times within the last minute, per profile.
#[derive(Debug, Default)]
pub(crate) struct Rates {
    starts: BTreeMap<String, VecDeque<Instant>>,
}

impl Rates {
    /// Counts a start now, or says when the next one is allowed.
    fn admit(&mut self, profile: &str, per_minute: u32, now: Instant) -> Result<(), Duration> {
        let starts = self.starts.entry(profile.to_string()).or_default();
        while starts
            .front()
            .is_some_and(|t| now.duration_since(*t) >= WINDOW)
        {
            starts.pop_front();
        }
        if starts.len() >= per_minute as usize {
            let oldest = starts.front().copied().unwrap_or(now);
            return Err(WINDOW.saturating_sub(now.duration_since(oldest)));
        }
        starts.push_back(now);
        Ok(())
    }
}

/// Start times per profile, shared by every request.
#[derive(Debug, Default)]
pub(crate) struct Admission {
    rates: std::sync::Mutex<Rates>,
}

impl Admission {
    /// Admits one execution of `profile`, or says why not and when to retry.
    pub(crate) fn admit_execution(&self, profile: &Profile) -> Result<(), String> {
        let Some(per_minute) = profile.limits.executions_per_minute else {
            return Ok(());
        };
        self.rates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .admit(&profile.name, per_minute, Instant::now())
            .map_err(|wait| {
                format!(
                    "busy: profile `{}` may start {per_minute} executions a minute ({}.limits.executions_per_minute in {}), and has. Retry in {:.1} s.",
                    profile.name,
                    profile.key,
                    profile.file,
                    wait.as_secs_f64()
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_gets_its_rate_and_no_more() {
        let mut rates = Rates::default();
        let start = Instant::now();
        for _ in 0..3 {
            assert!(rates.admit("reader", 3, start).is_ok());
        }
        let wait = rates.admit("reader", 3, start).expect_err("fourth");
        assert!(wait <= WINDOW);
        assert!(
            rates.admit("writer", 3, start).is_ok(),
            "other profiles are not slowed"
        );
        assert!(rates.admit("reader", 3, start + WINDOW).is_ok());
    }
}
