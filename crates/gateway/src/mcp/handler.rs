//! The rmcp `ServerHandler`: routes MCP requests to the meta-tools and resources, and streams
//! tool-set changes to clients of both protocol eras (notifications for 2025-11-25 sessions,
//! `subscriptions/listen` for stateless 2026-07-28).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use rmcp::ServerHandler;
#[allow(deprecated)]
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, ErrorData, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig, SubscriptionFilter,
};
use rmcp::model::{CancelTaskParams, GetTaskParams, GetTaskResult, UpdateTaskParams};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};

use super::{asking, meta_tools, resources, routes, tasks};
use crate::caller::Caller;
use crate::gateway::Gateway;
use crate::progress::progress_sink;
use crate::runtime::{Cancellation, ResponseGone};

/// What the client's model reads first: the gateway in a few lines.
const INSTRUCTIONS: &str = "sandgate is one gateway to many MCP servers (backends). Their tools are found on demand instead of listed: \
call search_tools with what you want to do, then tool_info for a tool's TypeScript declaration. Tools are named backend.tool \
(e.g. memory.create_entities). Run them with call_tool_chain: TypeScript in which each backend is an object and each tool an async \
function (loop, filter and combine there; return only what you need), or one JSON call {\"tool\": ..., \"arguments\": ...}. \
Large results are shortened and kept whole; read_output reads any part. sandgate://overview lists the backends; sandgate://types.d.ts has declarations for every tool.";

/// One MCP session's handler; cheap to clone, all state is in [`Gateway`].
#[derive(Debug, Clone)]
pub struct SandgateServer {
    gateway: Arc<Gateway>,
}

impl SandgateServer {
    /// A handler over shared gateway state.
    pub fn new(gateway: Arc<Gateway>) -> Self {
        SandgateServer { gateway }
    }
}

impl ServerHandler for SandgateServer {
    // logging/setLevel is deprecated by SEP-2577 but still required by 2025-11-25 clients.
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_logging()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("sandgate", env!("CARGO_PKG_VERSION")))
            .with_instructions(match self.gateway.http_problem() {
                // The stdio client's first answer says what its person would otherwise only
                // find on the server's stderr.
                Some(problem) => {
                    format!("{INSTRUCTIONS}\n\nNote for the person running this client: {problem}")
                }
                None => INSTRUCTIONS.to_string(),
            })
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if let Some(cursor) = request.and_then(|r| r.cursor) {
            // All meta-tools fit on one page, so no cursor we issue is ever valid.
            return Err(ErrorData::invalid_params(
                format!("unknown cursor {cursor:?}: tools/list has a single page"),
                None,
            ));
        }
        let caller = Caller::of(self.gateway.profiles(), &context);
        // Answered at once with what is known: a client waits on this list when it connects,
        // and a slow backend must not hold it up (one that answers `initialize` after 25 s, or
        // never answers `tools/list`). The list names the backends that are ready; when one
        // more comes up, connected clients hear `tools/list_changed` (see `Gateway::refresh`).
        // The meta-tools answer at once too, naming the backends still starting; this list and
        // they wait for them only when the operator wrote `startup_wait` in the config.
        if self.gateway.catalogs().list_waits() {
            self.gateway.settled_view(&caller.access).await;
        }
        // What a caller is shown depends on its profile: no cache may hand it to another.
        Ok(
            ListToolsResult::with_all_items(routes::definitions(&self.gateway, &caller))
                .with_cache_scope(CacheScope::Private),
        )
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = Caller::of(self.gateway.profiles(), &context);
        let cancel = cancellation(&context);
        if request.name == "call_tool_chain" {
            // A client that takes tasks gets one; a 2026-07-28 client that can be asked gets
            // its questions as input-required results (and continues with its retry).
            let tasks = context
                .client_capabilities()
                .is_some_and(|caps| caps.supports_tasks());
            let answering = request.request_state.is_some() || request.input_responses.is_some();
            if tasks && !answering {
                let work = tasks::create(&self.gateway, &caller, request.arguments.clone());
                if let Some(response) = contained("call_tool_chain", work).await? {
                    return Ok(response);
                }
            } else if answering || matches!(caller.reach, crate::caller::Reach::Retry(_)) {
                let work = asking::call(&self.gateway, &caller, request, &cancel);
                return contained("call_tool_chain", work).await;
            }
        }
        let progress = progress_sink(context.peer.clone(), context.meta.get_progress_token());
        let call = ToolCall {
            name: &request.name,
            arguments: request.arguments,
            progress,
        };
        answer_call(&self.gateway, &caller, call, &cancel)
            .await
            .map(Into::into)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let caller = Caller::of(self.gateway.profiles(), &context);
        tasks::get(&self.gateway, &caller, &request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = Caller::of(self.gateway.profiles(), &context);
        tasks::update(
            &self.gateway,
            &caller,
            &request.task_id,
            &request.input_responses,
        )
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = Caller::of(self.gateway.profiles(), &context);
        tasks::cancel(&self.gateway, &caller, &request.task_id)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        // prompts/list answers with an empty list; there is nothing to get.
        Err(ErrorData::invalid_params(
            format!(
                "no prompt named `{}`: sandgate serves no prompts",
                request.name
            ),
            None,
        ))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = Caller::of(self.gateway.profiles(), &context);
        Ok(
            ListResourcesResult::with_all_items(routes::list_resources(&self.gateway, &caller))
                .with_cache_scope(CacheScope::Private),
        )
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = Caller::of(self.gateway.profiles(), &context);
        let read = routes::read_resource(&self.gateway, &caller, &request.uri);
        match contained("resources/read", read.map(Ok)).await? {
            Some(Ok(result)) => Ok(result.with_cache_scope(CacheScope::Private).into()),
            Some(Err(reason)) => Err(ErrorData::resource_not_found(
                reason,
                Some(serde_json::json!({"uri": request.uri})),
            )),
            None => Err(ErrorData::resource_not_found(
                format!(
                    "no resource {}. Available: sandgate://overview, sandgate://backends, sandgate://stats, sandgate://types.d.ts, sandgate://types.pyi, sandgate://backend/{{{}}}",
                    request.uri,
                    resources::backend_names(&self.gateway, &caller).join("|")
                ),
                Some(serde_json::json!({"uri": request.uri})),
            )),
        }
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // sandgate logs to stderr for operators; it sends no log notifications to clients yet,
        // so every level is accepted and trivially honoured.
        Ok(())
    }

    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        // A 2025-11-25 session that declared the tasks extension also has that revision's
        // tasks/result and tasks/list; 2026-07-28 removed them.
        let legacy = context
            .protocol_version()
            .is_some_and(|v| v.as_str() < rmcp::model::ProtocolVersion::V_2026_07_28.as_str());
        let tasks = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        if legacy && tasks {
            let caller = Caller::of(self.gateway.profiles(), &context);
            let cancel = cancellation(&context);
            let answered = tasks::legacy(
                &self.gateway,
                &caller,
                &request.method,
                request.params.as_ref(),
                &cancel,
            )
            .await;
            if let Some(answer) = answered {
                return answer.map(rmcp::model::CustomResult::new);
            }
        }
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            unsupported_method(&request.method),
            None,
        ))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.gateway.clients().add_legacy_peer(context.peer);
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.gateway.clients().subscribe_changes();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                change = changes.recv() => {
                    if let Err(tokio::sync::broadcast::error::RecvError::Closed) = change {
                        return Ok(());
                    }
                    // The sink drops categories the client did not subscribe to.
                    let _ = context.sink().notify_tool_list_changed().await;
                    let _ = context.sink().notify_resource_list_changed().await;
                }
            }
        }
    }
}

/// One `tools/call` as the gateway answers it.
pub(super) struct ToolCall<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// Its arguments.
    pub arguments: Option<rmcp::model::JsonObject>,
    /// Where its progress goes, when the client asked for progress.
    pub progress: Option<crate::progress::ProgressSink>,
}

/// Answers one `tools/call` for `caller`: a meta-tool or a stored tool, with a panic contained
/// to this request, and an unknown name refused with the names there are. The handler and the
/// direct stateless path (`direct`) both answer through it.
pub(super) async fn answer_call(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    call: ToolCall<'_>,
    cancel: &Cancellation,
) -> Result<rmcp::model::CallToolResult, ErrorData> {
    let work = routes::call(
        gateway,
        caller,
        call.name,
        call.arguments,
        call.progress,
        cancel,
    );
    match contained(call.name, work.map(Ok)).await? {
        Some(result) => Ok(result),
        None => Err(ErrorData::invalid_params(
            format!(
                "unknown tool `{}`. This gateway's tools are {}; backend tools are found with search_tools.",
                call.name,
                meta_tools::META_TOOLS.join(", ")
            ),
            None,
        )),
    }
}

/// How the client can cancel this request: `notifications/cancelled`, and over HTTP also by
/// going away (the request's response is then dropped).
fn cancellation(context: &RequestContext<RoleServer>) -> Cancellation {
    let cancellation = Cancellation::new(context.ct.clone());
    match context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<ResponseGone>())
    {
        Some(ResponseGone(gone)) => cancellation.or_response_gone(gone.clone()),
        None => cancellation,
    }
}

/// Runs one request's work so that a panic in it fails that request alone, with an internal
/// error the client reads, instead of leaving the client waiting for an answer that never
/// comes. The gateway, its other sessions and its backends go on.
async fn contained<T>(
    what: &str,
    work: impl Future<Output = Result<T, ErrorData>>,
) -> Result<T, ErrorData> {
    match AssertUnwindSafe(work).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => {
            let detail = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            tracing::error!(request = what, %detail, "a request panicked; only it fails");
            Err(ErrorData::internal_error(
                format!(
                    "internal error while serving {what}: {detail}. This is a bug in sandgate; the gateway is still running, so other requests are unaffected."
                ),
                None,
            ))
        }
    }
}

/// The methods this server answers, for the error a client gets for any other.
const SUPPORTED_METHODS: &str = "initialize, ping, tools/list, tools/call, resources/list, resources/templates/list, resources/read, prompts/list, logging/setLevel, subscriptions/listen, and (to clients that declare the tasks extension) tasks/get, tasks/update and tasks/cancel, with tasks/result and tasks/list on 2025-11-25 sessions";

/// Why a method is refused, with what is supported instead (bounded: a method name comes
/// from the client).
fn unsupported_method(method: &str) -> String {
    let shown: String = method.chars().take(100).collect();
    format!(
        "Method not found: sandgate does not serve `{shown}`. It serves {SUPPORTED_METHODS}; its tools are reached through tools/call (search_tools, tool_info, call_tool_chain)."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_request_fails_alone_with_an_internal_error() {
        let work = async {
            if std::hint::black_box(true) {
                panic!("the bug");
            }
            Ok(1)
        };
        let error = contained("call_tool_chain", work)
            .await
            .expect_err("contained");
        assert_eq!(error.code, rmcp::model::ErrorCode::INTERNAL_ERROR);
        assert!(error.message.contains("the bug"), "{}", error.message);
        assert_eq!(contained("x", async { Ok(2) }).await.ok(), Some(2));
    }
}
