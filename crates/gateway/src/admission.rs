//! Per-profile execution rates (`limits.executions_per_minute`), so one busy profile is slowed
//! without touching the others. With a shared store (PostgreSQL) the rate is one limit for
//! every replica, kept in the store (GCRA on the database's clock); otherwise, or while the
//! store cannot be reached and `[store] rate_limit_when_unreachable = "local"`, a sliding
//! window of start times in this process.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use sandgate_config::RateLimitFallback;
use sandgate_policy::Profile;
use sandgate_store::{Admitted, StoreHandle};

const WINDOW: Duration = Duration::from_secs(60);

/// Start times within the last minute, per profile.
#[derive(Debug, Default)]
pub(crate) struct Rates {
    starts: BTreeMap<String, VecDeque<Instant>>,
}

/// The most callers counted at once in the process; past it, those with no start in the last
/// minute are forgotten (each user of an identity provider is counted on its own).
const MAX_COUNTED: usize = 10_000;

impl Rates {
    /// Counts a start of `key` now, or says when the next one is allowed.
    fn admit(&mut self, key: &str, per_minute: u32, now: Instant) -> Result<(), Duration> {
        if self.starts.len() >= MAX_COUNTED && !self.starts.contains_key(key) {
            self.starts.retain(|_, starts| {
                starts
                    .back()
                    .is_some_and(|t| now.duration_since(*t) < WINDOW)
            });
        }
        let starts = self.starts.entry(key.to_string()).or_default();
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

/// Start times per profile, shared by every request, and what to do when the shared store
/// cannot be asked.
#[derive(Debug, Default)]
pub(crate) struct Admission {
    rates: std::sync::Mutex<Rates>,
    fallback: RateLimitFallback,
}

impl Admission {
    pub(crate) fn new(fallback: RateLimitFallback) -> Admission {
        Admission {
            rates: Default::default(),
            fallback,
        }
    }

    /// Admits one execution of `profile` (across replicas when `store` is shared), or says
    /// why not and when to retry. A `user` an identity provider proved has the profile's rate
    /// to itself; everyone else of the profile shares one.
    pub(crate) async fn admit_execution(
        &self,
        profile: &Profile,
        user: Option<&str>,
        store: Option<&StoreHandle>,
    ) -> Result<(), String> {
        let Some(per_minute) = profile.limits.executions_per_minute else {
            return Ok(());
        };
        let who = if user.is_some() {
            "each user of profile"
        } else {
            "profile"
        };
        let busy = |wait: Duration| {
            format!(
                "busy: {who} `{}` may start {per_minute} executions a minute ({}.limits.executions_per_minute in {}), and has. Retry in {:.1} s.",
                profile.name,
                profile.key,
                profile.file,
                wait.as_secs_f64()
            )
        };
        let key = match user {
            Some(user) => format!("executions:{}:user:{user}", profile.name),
            None => format!("executions:{}", profile.name),
        };
        if let Some(shared) = store.filter(|s| s.is_shared()) {
            match shared.admit_shared(&key, per_minute).await {
                Some(Ok(Admitted::Yes)) => return Ok(()),
                Some(Ok(Admitted::No { retry_in })) => return Err(busy(retry_in)),
                Some(Err(e)) => match self.fallback {
                    RateLimitFallback::Open => {
                        tracing::warn!(
                            "the shared rate limit could not be checked, so it is not applied: {e}"
                        );
                        return Ok(());
                    }
                    RateLimitFallback::Closed => {
                        return Err(format!(
                            "busy: profile `{}` has a shared rate limit that cannot be checked now ({e}); [store] rate_limit_when_unreachable = \"closed\" refuses meanwhile. Retry in a few seconds.",
                            profile.name
                        ));
                    }
                    RateLimitFallback::Local => {
                        tracing::warn!(
                            "the shared rate limit could not be checked; this replica counts alone meanwhile: {e}"
                        );
                    }
                },
                None => {}
            }
        }
        self.rates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .admit(&key, per_minute, Instant::now())
            .map_err(busy)
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
