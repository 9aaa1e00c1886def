//! The door's one check before a call goes out that a person may have to answer: the call's
//! own approval (a profile's or a backend's `approve`), and what a person said about the whole
//! script it comes from (`approve_scripts`). A yes to a script is a yes to the gated calls of
//! the tools its question listed; a script that ran unasked because it named no tool that may
//! write has any call to a tool that may write refused, so reaching one by a name computed as
//! it runs gains nothing.

use sandgate_catalog::Entry;
use sandgate_policy::ToolCall;
use sandgate_sandbox::{CallFailure, FailureKind};

use super::{Door, Knock, ScriptPass};
use crate::audit::{Decision, Subject};

impl Door {
    /// Waits for a person's yes when a rule asks for one before `call` (to `entry`) runs (see
    /// `crate::approvals`): `Ok` at once when none does. The question and its answer are audit
    /// lines.
    pub(super) async fn approved(
        &self,
        knock: &Knock,
        entry: &Entry,
        call: &ToolCall,
        args: &str,
    ) -> Result<(), CallFailure> {
        let backend_rules = self.backends.approval_patterns(&call.backend);
        let gated = knock.caller.access.approval_rule(call, &backend_rules);
        // Most calls need neither a question nor a refusal: nothing is built for them.
        let asks = gated.is_some()
            || matches!(knock.script, ScriptPass::ReadOnly { .. }) && !entry.spec.says_read_only();
        if !asks {
            return Ok(());
        }
        let target = call.qualified();
        match (&knock.script, gated) {
            (ScriptPass::Approved { by, tools, rule }, Some(gate)) if tools.contains(&target) => {
                self.record_line(
                    knock,
                    Subject::Approval,
                    &target,
                    true,
                    &format!("approved with its script by {by} ({rule}): {gate}"),
                    None,
                );
                Ok(())
            }
            (_, Some(rule)) => self.ask_for_call(knock, &target, &rule, args).await,
            (ScriptPass::ReadOnly { rule }, None) => {
                let why = format!(
                    "`{target}` may write (its annotations do not say readOnlyHint: true), and this script ran without a person's approval because no tool it names may write ({rule}). The call did not run. Name the tool in the code as `backend.tool`, so the script is shown to a person before it runs"
                );
                self.record_line(knock, Subject::Approval, &target, false, &why, None);
                Err(CallFailure::new(FailureKind::ApprovalDenied, why))
            }
            _ => Ok(()),
        }
    }

    /// Asks a person about one gated call and waits for the answer.
    async fn ask_for_call(
        &self,
        knock: &Knock,
        target: &str,
        rule: &str,
        args: &str,
    ) -> Result<(), CallFailure> {
        self.audit.record(&Decision {
            profile: Some(knock.caller.profile()),
            token_id: knock.caller.name.as_deref(),
            execution_id: Some(knock.execution_id.as_str()),
            subject: Subject::Approval,
            target,
            allowed: false,
            rule: &format!("asked: {rule}"),
            arguments: Some(args),
            asked: true,
        });
        let answer = self
            .approvals
            .ask(
                &knock.asking,
                &knock.caller,
                &knock.execution_id,
                crate::approvals::GatedCall {
                    tool: target,
                    arguments: args,
                    rule,
                    line: knock.line,
                },
            )
            .await;
        match &answer {
            Ok(crate::approvals::Verdict::Approved { by }) => {
                self.record_line(
                    knock,
                    Subject::Approval,
                    target,
                    true,
                    &format!("approved by {by}: {rule}"),
                    None,
                );
            }
            Ok(crate::approvals::Verdict::Denied { .. }) => {}
            Err(failure) => {
                self.record_line(
                    knock,
                    Subject::Approval,
                    target,
                    false,
                    &failure.message,
                    None,
                );
            }
        }
        answer.map(|_| ())
    }
}
