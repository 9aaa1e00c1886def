//! What a call to a per-user backend carries of its user, and the wait for a user who must
//! sign in to the backend first (`oauth`): the call parks, the person behind its client is sent
//! a link to sign in (URL-mode elicitation, an input-required result, a task's
//! `input_required`), and the call goes on once their tokens are kept, whichever replica took
//! the sign-in. Other calls of the script go on meanwhile.

use std::time::Duration;

use sandgate_config::PerUser;
use sandgate_sandbox::{CallFailure, FailureKind};
use sandgate_upstream::UserConnection;

use super::{Door, Knock};
use crate::audit::Subject;
use crate::credentials::{CredentialError, connection_for, owner_of};

/// How often a call waiting for its user's sign-in looks for their tokens.
const LOOK_EVERY: Duration = Duration::from_secs(1);

impl Door {
    /// What a call by `knock` to per-user `backend` carries; a user who must sign in first is
    /// asked to, and the call waits for it.
    pub(super) async fn user_connection(
        &self,
        knock: &Knock,
        backend: &str,
        per_user: &PerUser,
        scope: Option<&str>,
    ) -> Result<UserConnection, CallFailure> {
        let credentials = self.credentials.as_deref();
        match connection_for(credentials, &knock.caller, backend, per_user).await {
            Ok(connection) => return Ok(connection),
            Err(CredentialError::SignIn { .. }) => {}
            Err(e) => return Err(failure_of(e)),
        }
        let Some(credentials) = self.credentials.clone() else {
            return Err(failure_of(CredentialError::NotKept));
        };
        let url = credentials
            .sign_ins()
            .and_then(|s| s.connect_url(backend, scope))
            .unwrap_or_default();
        let owner = owner_of(&knock.caller);
        let target = format!("sign-in to {backend}");
        self.record_line(
            knock,
            Subject::Http,
            &target,
            false,
            "asked: the user has not signed in",
            None,
        );
        let signed_in = {
            let (credentials, owner, backend) =
                (credentials.clone(), owner.clone(), backend.to_string());
            async move {
                loop {
                    tokio::time::sleep(LOOK_EVERY).await;
                    if credentials.kept_now(&owner, &backend).await {
                        return;
                    }
                }
            }
        };
        let asked = self
            .approvals
            .ask_sign_in(
                &knock.asking,
                &knock.caller,
                &knock.execution_id,
                backend,
                url,
                signed_in,
            )
            .await;
        if let Err(failure) = asked {
            self.record_line(knock, Subject::Http, &target, false, &failure.message, None);
            return Err(failure);
        }
        self.record_line(
            knock,
            Subject::Http,
            &target,
            true,
            "signed in while the call waited",
            None,
        );
        connection_for(Some(&credentials), &knock.caller, backend, per_user)
            .await
            .map_err(failure_of)
    }
}

impl Door {
    /// Forgets the caller's tokens for `backend`, which refused them (revoked) or wants a
    /// wider `scope`, so the next look asks them to sign in again.
    pub(super) async fn sign_in_again(
        &self,
        knock: &Knock,
        backend: &str,
        scope: Option<&str>,
    ) -> Result<(), CallFailure> {
        let why = match scope {
            Some(scope) => format!("the backend wants a wider scope ({scope}): signing in again"),
            None => "the backend refused the sign-in's token (401): signing in again".to_string(),
        };
        self.record_line(
            knock,
            Subject::Http,
            &format!("sign-in to {backend}"),
            false,
            &why,
            None,
        );
        let Some(credentials) = self.credentials.as_ref() else {
            return Err(failure_of(CredentialError::NotKept));
        };
        credentials
            .remove(&owner_of(&knock.caller), backend)
            .await
            .map(|_| ())
            .map_err(|why| CallFailure::new(FailureKind::Failed, why))
    }
}

/// The call's failure for why its user's credential is not at hand.
fn failure_of(error: CredentialError) -> CallFailure {
    let kind = match error {
        CredentialError::SignIn { .. } => FailureKind::SignInRequired,
        _ => FailureKind::Failed,
    };
    CallFailure::new(kind, error.to_string())
}
