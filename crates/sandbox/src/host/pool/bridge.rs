//! Where calls from the guest go: the one trait an embedder implements.

use futures::future::BoxFuture;

use crate::wire::protocol::{CallFailure, FailureKind, ToolAnswer, ToolBinding};

/// Where calls from the guest go. The gateway implements it over its backends; an embedding
/// service implements it over its own functions.
pub trait Bridge: Send + Sync + 'static {
    /// Calls a tool; `args` is JSON text. Returns the raw MCP result as JSON text, and whether
    /// it is an error result.
    fn call_tool(
        &self,
        tool: &ToolBinding,
        args: String,
    ) -> BoxFuture<'static, Result<ToolAnswer, CallFailure>>;
    /// Calls `tool` from `line` of the user's code: known when the run asked for its calls'
    /// sites (`Limits::report_call_sites`). The default forgets the line.
    fn call_tool_at(
        &self,
        tool: &ToolBinding,
        args: String,
        line: Option<u32>,
    ) -> BoxFuture<'static, Result<ToolAnswer, CallFailure>> {
        let _ = line;
        self.call_tool(tool, args)
    }
    /// Calls a named host function; `args` is a JSON array. Returns JSON text.
    fn call_host(
        &self,
        name: &str,
        _args: String,
    ) -> BoxFuture<'static, Result<String, CallFailure>> {
        let message = format!("host function `{name}` is not implemented");
        Box::pin(async move { Err(CallFailure::new(FailureKind::Internal, message)) })
    }
    /// Sees a console line as the code writes it (the result holds them all at the end): for
    /// whoever shows a running execution's logs so far. It must not block.
    fn logged(&self, _line: &crate::host::result::LogLine) {}
}
