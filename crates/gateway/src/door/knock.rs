//! Who knocks at the door: the caller, the execution it runs, the stored tools it runs inside
//! (for the cycle and depth guard), and where its progress goes.

use crate::approvals::Asking;
use crate::caller::Caller;
use crate::progress::ProgressSink;

/// Who is knocking: the caller and the execution it runs.
#[derive(Debug, Clone)]
pub struct Knock {
    /// The caller (profile, token, owner).
    pub caller: Caller,
    /// The execution's id.
    pub execution_id: String,
    /// The stored tools running, outermost first, when the knock comes from inside one
    /// (for the cycle and depth guard).
    pub within: Vec<String>,
    /// Where the execution's progress goes, when its client asked for it: finished calls and
    /// the backends' own progress notices.
    pub progress: Option<ProgressSink>,
    /// How a person is asked to approve a call that needs it.
    pub asking: Asking,
    /// The line of the user's code that makes this call, when known (an execution with
    /// approvals reports its calls' sites).
    pub line: Option<u32>,
    /// What a person said about the whole script, when a rule asks them first.
    pub script: ScriptPass,
}

/// What a person said about the script a call comes from (`approve_scripts`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ScriptPass {
    /// No rule asks about this execution's script (or it is no script: a JSON call).
    #[default]
    Unasked,
    /// A person approved the script before it ran; a yes to its code is a yes to the gated
    /// calls of the tools it names.
    Approved {
        /// Who said yes.
        by: String,
        /// The tools the question listed (`backend.tool`).
        tools: Vec<String>,
        /// The rule that asked.
        rule: String,
    },
    /// The rule asks only about scripts that may write, and this one named no tool that may:
    /// it ran at once, and a call it makes to a tool that may write is refused.
    ReadOnly {
        /// The rule that let it run unasked.
        rule: String,
    },
}

impl Knock {
    /// A knock by `caller` for execution `execution_id`, outside any stored tool.
    pub fn new(caller: Caller, execution_id: impl Into<String>) -> Knock {
        Knock {
            caller,
            execution_id: execution_id.into(),
            within: Vec::new(),
            progress: None,
            asking: Asking::Nobody,
            line: None,
            script: ScriptPass::Unasked,
        }
    }
}
