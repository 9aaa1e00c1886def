//! The clock Python code may read: `datetime.now()`, `datetime.now(timezone.utc)` and
//! `date.today()`, which Monty asks the host for. TypeScript has `Date.now()`; Python gets the
//! same time. The worker has no time-zone database (its environment is empty), so a naive time
//! is UTC, and an aware one is UTC moved to the zone's fixed offset.

use chrono::{Datelike, Duration, Timelike, Utc};
use monty_types::{MontyDate, MontyDateTime, MontyObject, OsFunctionCall};

/// The answer to an OS call that reads the clock; `None` for any other OS call.
pub fn answer(call: &OsFunctionCall) -> Option<MontyObject> {
    let now = Utc::now();
    match call {
        OsFunctionCall::DateToday => Some(MontyObject::Date(MontyDate {
            year: now.year(),
            month: now.month() as u8,
            day: now.day() as u8,
        })),
        OsFunctionCall::DateTimeNow(zone) => {
            let offset = zone.as_ref().map(|z| z.offset_seconds);
            let local = now + Duration::seconds(offset.unwrap_or(0).into());
            Some(MontyObject::DateTime(MontyDateTime {
                year: local.year(),
                month: local.month() as u8,
                day: local.day() as u8,
                hour: local.hour() as u8,
                minute: local.minute() as u8,
                second: local.second() as u8,
                microsecond: local.timestamp_subsec_micros().min(999_999),
                offset_seconds: offset,
                timezone_name: zone.as_ref().and_then(|z| z.name.clone()),
            }))
        }
        _ => None,
    }
}
