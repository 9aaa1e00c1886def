//! What executions run on: the sandbox's worker pool, the store of records and outputs, how
//! results are shaped and the operator's limits; and how a caller cancels one. The gateway is
//! built with it (or without it, when `call_tool_chain` is not served), and `call_tool_chain`
//! and stored tools read it.

use sandgate_output::OutputConfig;
use sandgate_sandbox::{LimitRequest, Limits, Sandbox};
use sandgate_store::StoreHandle;
use sandgate_upstream::Backends;
use tokio_util::sync::CancellationToken;

/// What `call_tool_chain` runs on; given to the gateway when it is built ([`crate::GatewayBuilder::chain`]).
#[derive(Debug, Clone)]
pub struct ChainRuntime {
    /// The worker pool.
    pub sandbox: Sandbox,
    /// Where records and full outputs go (`None`: not kept; shaping then never drops data,
    /// it only truncates what the response shows and says the rest could not be kept).
    pub store: Option<StoreHandle>,
    /// How results are shaped.
    pub output: OutputConfig,
    /// The operator's limits; callers may only lower them.
    pub limits: Limits,
    /// The engine executions run on unless their profile or call says otherwise
    /// (`[sandbox] engine`).
    pub default_engine: sandgate_policy::Engine,
}

impl ChainRuntime {
    /// The limits of one execution: the operator's, lowered by `request`, letting no call out
    /// of the worker with arguments larger than the largest any backend takes now (each
    /// backend's own bound is checked again on the host; a reload may change them).
    pub(crate) fn execution_limits(
        &self,
        request: &LimitRequest,
        backends: &dyn Backends,
    ) -> Limits {
        let mut limits = self.limits.lowered(request);
        limits.max_call_args_bytes = backends.largest_argument_bytes();
        limits
    }
}

/// How a caller cancels an execution: its request's token (`notifications/cancelled`), and,
/// over HTTP, the token of the request's response, cancelled when the client goes away.
#[derive(Debug, Clone, Default)]
pub struct Cancellation {
    request: CancellationToken,
    response_gone: Option<CancellationToken>,
}

impl Cancellation {
    /// Cancelled by `request` only (stdio; or a caller that never cancels).
    pub fn new(request: CancellationToken) -> Self {
        Cancellation {
            request,
            response_gone: None,
        }
    }

    /// Cancelled also when `gone` is: the HTTP response to the request was dropped.
    pub fn or_response_gone(mut self, gone: CancellationToken) -> Self {
        self.response_gone = Some(gone);
        self
    }

    /// Whether either token is cancelled now.
    pub fn is_cancelled(&self) -> bool {
        self.request.is_cancelled()
            || self
                .response_gone
                .as_ref()
                .is_some_and(CancellationToken::is_cancelled)
    }

    /// Completes when either token is cancelled.
    pub async fn cancelled(&self) {
        match &self.response_gone {
            None => self.request.cancelled().await,
            Some(gone) => tokio::select! {
                () = self.request.cancelled() => {}
                () = gone.cancelled() => {}
            },
        }
    }
}

/// Cancelled when the HTTP response to a request is gone: sent in full, or dropped because the
/// client went away. The handler reads it from the request's parts, so an execution whose
/// client disconnected is cancelled like one the client cancelled.
#[derive(Debug, Clone)]
pub(crate) struct ResponseGone(pub CancellationToken);
