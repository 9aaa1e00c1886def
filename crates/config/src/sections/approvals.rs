//! `[approvals]`: how long a call that needs a person's approval waits for an answer, and how
//! many may wait at once. Which calls need one is written where tools are granted: a profile's
//! `approve` (`backend.tool` patterns) and a backend's own `approve` (its tools' names); which
//! scripts are approved whole before they run, in a profile's `approve_scripts`, else here
//! (`scripts`).

use std::time::Duration;

use sandgate_policy::ScriptApproval;
use serde_json::Value;

use crate::error::ConfigError;
use crate::walker::{Walker, duration, whole_number};

/// `[approvals]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApprovalsConfig {
    /// How long a question waits for its answer; then the call throws `ApprovalDenied`.
    pub timeout: Duration,
    /// The most questions one caller may have waiting at once; another is refused.
    pub max_waiting_per_caller: usize,
    /// The most questions waiting on this gateway at once.
    pub max_waiting: usize,
    /// Which scripts a person approves before they run, for profiles that do not say
    /// (`scripts`; a profile's `approve_scripts` decides for its own).
    pub scripts: ScriptApproval,
}

/// Default wait for an answer.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);
/// Default most questions waiting per caller.
pub const DEFAULT_MAX_WAITING_PER_CALLER: usize = 16;
/// Default most questions waiting on the gateway.
pub const DEFAULT_MAX_WAITING: usize = 4096;

impl Default for ApprovalsConfig {
    fn default() -> Self {
        ApprovalsConfig {
            timeout: DEFAULT_APPROVAL_TIMEOUT,
            max_waiting_per_caller: DEFAULT_MAX_WAITING_PER_CALLER,
            max_waiting: DEFAULT_MAX_WAITING,
            scripts: ScriptApproval::Never,
        }
    }
}

impl Walker<'_> {
    pub(crate) fn approvals_section(
        &self,
        key: &str,
        value: Option<&Value>,
    ) -> Result<ApprovalsConfig, ConfigError> {
        let Some(value) = value else {
            return Ok(ApprovalsConfig::default());
        };
        let table = self.table(key, value)?;
        self.check_keys(
            key,
            table,
            &[
                "timeout",
                "max_waiting_per_caller",
                "max_waiting",
                "scripts",
            ],
            &[],
        )?;
        let sub = |k: &str| format!("{key}.{k}");
        let timeout = duration(self, &sub("timeout"), table.get("timeout"))?
            .unwrap_or(DEFAULT_APPROVAL_TIMEOUT);
        if timeout.is_zero() || timeout > Duration::from_secs(24 * 3600) {
            return Err(self.invalid(
                &sub("timeout"),
                format!("is {timeout:?}"),
                "give a wait between 1s and 24h, e.g. \"5m\"",
            ));
        }
        Ok(ApprovalsConfig {
            timeout,
            max_waiting_per_caller: whole_number(
                self,
                &sub("max_waiting_per_caller"),
                table.get("max_waiting_per_caller"),
                DEFAULT_MAX_WAITING_PER_CALLER,
                1..=100_000,
            )?,
            max_waiting: whole_number(
                self,
                &sub("max_waiting"),
                table.get("max_waiting"),
                DEFAULT_MAX_WAITING,
                1..=1_000_000,
            )?,
            scripts: self
                .script_approval(&sub("scripts"), table.get("scripts"))?
                .unwrap_or_default(),
        })
    }
}
