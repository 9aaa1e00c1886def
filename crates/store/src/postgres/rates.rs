//! Rate limits every replica shares: GCRA (the generic cell rate algorithm) in one statement on
//! the database's clock. Each key keeps one number, its theoretical arrival time; an admission
//! moves it on by the emission interval, unless that would put it more than the window ahead
//! of now. The row lock of the upsert orders replicas that admit at once, so the limit holds
//! exactly across them, and no replica's clock is read.

use std::time::Duration;

use super::PgStore;
use crate::error::StoreError;

/// The window the rate is counted over: `per_minute` admissions in any minute, all at once if
/// they come at once (as the one-process sliding window allowed).
const WINDOW_SECS: f64 = 60.0;

/// What the shared limit said.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Admitted {
    /// Go ahead.
    Yes,
    /// Not now; the next admission is possible in this long.
    No {
        /// When to try again.
        retry_in: Duration,
    },
}

impl PgStore {
    /// Admits one event of `key` at `per_minute` a minute, or says when the next one can be.
    pub async fn admit(&self, key: &str, per_minute: u32) -> Result<Admitted, StoreError> {
        let interval = WINDOW_SECS / f64::from(per_minute.max(1));
        let client = self.client().await?;
        let row = client
            .query_one(
                "WITH now AS (SELECT extract(epoch FROM clock_timestamp())::double precision AS t),
                 admitted AS (
                    INSERT INTO rate_limits AS r (key, tat)
                    SELECT $1, now.t + $2 FROM now
                    ON CONFLICT (key) DO UPDATE
                       SET tat = GREATEST(r.tat, (SELECT t FROM now)) + $2
                     WHERE GREATEST(r.tat, (SELECT t FROM now)) + $2 - (SELECT t FROM now) <= $3
                    RETURNING tat
                 )
                 SELECT (SELECT count(*) FROM admitted),
                        (SELECT tat FROM rate_limits WHERE key = $1),
                        (SELECT t FROM now)",
                &[&key, &interval, &WINDOW_SECS],
            )
            .await?;
        if row.try_get::<_, i64>(0)? > 0 {
            return Ok(Admitted::Yes);
        }
        let tat: Option<f64> = row.try_get(1)?;
        let now: f64 = row.try_get(2)?;
        let wait = tat.map_or(0.0, |tat| tat + interval - WINDOW_SECS - now);
        Ok(Admitted::No {
            retry_in: Duration::from_secs_f64(wait.clamp(0.0, WINDOW_SECS)),
        })
    }
}
