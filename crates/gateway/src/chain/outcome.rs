//! What an execution produced, whichever tier ran it: what the response is shaped from and
//! the record is written from.

use sandgate_sandbox::{CallRecord, ExecError, LogLine};
use serde_json::Value;

use super::route::Tier;

/// What an execution produced, whichever tier ran it.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The path taken.
    pub tier: Tier,
    /// The result, when it succeeded.
    pub value: Option<Value>,
    /// The failure, if any.
    pub error: Option<ExecError>,
    /// Console output.
    pub logs: Vec<LogLine>,
    /// Every call, finished or not.
    pub calls: Vec<CallRecord>,
    /// Wall time.
    pub duration_ms: f64,
}

impl Outcome {
    /// An execution on `tier` that ended in `error`, none of its code having run.
    pub fn failed(tier: Tier, error: ExecError) -> Outcome {
        Outcome {
            tier,
            value: None,
            error: Some(error),
            logs: vec![],
            calls: vec![],
            duration_ms: 0.0,
        }
    }
}
