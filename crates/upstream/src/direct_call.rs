//! A tool call to a stdio backend, written to its stdin and answered from its stdout without
//! rmcp's request machinery.
//!
//! Through rmcp, one call hops between four tasks: the caller hands the request to rmcp's
//! serve loop, which hands it to a task that writes it; the answer comes back from the stdout
//! inspector to the serve loop, which hands it to the caller. Each hop wakes a task, and with
//! rmcp's bookkeeping they were about 8% of the gateway's CPU for a tier-1 call. Here the
//! caller writes its request line itself (under the lock every writer of that stdin takes,
//! rmcp included, so lines never interleave), and the inspector hands the answer to the caller
//! directly: two hops instead of six.
//!
//! Only what rmcp would do plainly takes this path: a `tools/call` to a 2025 (legacy) backend
//! with no progress asked for. rmcp keeps the connection, the handshake, every other request,
//! the backend's own requests and notifications, and calls that want progress. A call dropped
//! before its answer tells the backend, as rmcp does (`notifications/cancelled`, "request
//! abandoned by the caller"), and its late answer is dropped. When the backend's stdout ends,
//! every waiting call ends with the connection lost, and later ones fail at once.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, JsonRpcMessage, NumberOrString, ServerResult,
};
use rmcp::service::{RoleClient, ServiceError, TxJsonRpcMessage};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;

/// A message from a backend as rmcp reads it (what the stdout inspector in `frames` passes on).
pub(crate) type Incoming = rmcp::service::RxJsonRpcMessage<rmcp::service::RoleClient>;

/// Every request id of this path starts so; rmcp numbers its own, the era probe has its own
/// prefix.
const ID_PREFIX: &str = "sandgate-call-";
/// The reason rmcp gives a backend for a request its caller dropped.
const ABANDONED: &str = "request abandoned by the caller";

/// A backend's stdin, shared by rmcp and the calls of this path; each takes the lock for a
/// whole line.
#[derive(Clone)]
pub(crate) struct SharedStdin(Arc<tokio::sync::Mutex<ChildStdin>>);

impl SharedStdin {
    pub(crate) fn new(stdin: ChildStdin) -> SharedStdin {
        SharedStdin(Arc::new(tokio::sync::Mutex::new(stdin)))
    }

    /// Writes `line` (a JSON message and its newline) whole.
    async fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
        let mut stdin = self.0.lock().await;
        stdin.write_all(line).await?;
        stdin.flush().await
    }

    /// The sink rmcp writes its messages to, one JSON line each.
    pub(crate) fn sink(&self) -> LineSink {
        LineSink {
            stdin: self.clone(),
            writing: None,
        }
    }
}

/// rmcp's side of a [`SharedStdin`]: a message is serialized when sent and written under the
/// lock when flushed (rmcp flushes every message).
pub(crate) struct LineSink {
    stdin: SharedStdin,
    writing: Option<BoxFuture<'static, std::io::Result<()>>>,
}

impl LineSink {
    fn poll_writing(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let Some(writing) = self.writing.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let done = std::task::ready!(writing.as_mut().poll(cx));
        self.writing = None;
        Poll::Ready(done)
    }
}

impl futures::Sink<TxJsonRpcMessage<RoleClient>> for LineSink {
    type Error = std::io::Error;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.poll_writing(cx)
    }

    fn start_send(
        mut self: Pin<&mut Self>,
        message: TxJsonRpcMessage<RoleClient>,
    ) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(&message).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let stdin = self.stdin.clone();
        self.writing = Some(Box::pin(async move { stdin.write_line(&line).await }));
        Ok(())
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.poll_writing(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        std::task::ready!(self.poll_writing(cx))?;
        let stdin = self.stdin.clone();
        let closing = self
            .writing
            .get_or_insert_with(|| Box::pin(async move { stdin.0.lock().await.shutdown().await }));
        let done = std::task::ready!(closing.as_mut().poll(cx));
        self.writing = None;
        Poll::Ready(done)
    }
}

/// The calls of this path waiting for their answers, by number (`None` once the backend's
/// stdout has ended).
#[derive(Debug)]
pub(crate) struct Waiting {
    calls: Mutex<Option<HashMap<u64, tokio::sync::oneshot::Sender<Incoming>>>>,
    next: AtomicU64,
}

impl Waiting {
    pub(crate) fn new() -> Arc<Waiting> {
        Arc::new(Waiting {
            calls: Mutex::new(Some(HashMap::new())),
            next: AtomicU64::new(0),
        })
    }

    /// Hands `message` to the call it answers, if it answers one of this path's; otherwise
    /// gives it back (for rmcp). An answer whose call was dropped is dropped too.
    pub(crate) fn deliver(&self, message: Incoming) -> Option<Incoming> {
        let id = match &message {
            JsonRpcMessage::Response(response) => &response.id,
            JsonRpcMessage::Error(error) => match &error.id {
                Some(id) => id,
                None => return Some(message),
            },
            _ => return Some(message),
        };
        let NumberOrString::String(text) = id else {
            return Some(message);
        };
        let Some(number) = text
            .strip_prefix(ID_PREFIX)
            .and_then(|n| n.parse::<u64>().ok())
        else {
            return Some(message);
        };
        if let Some(waiter) = self.take(number) {
            let _ = waiter.send(message);
        }
        None
    }

    /// The backend's stdout ended: every waiting call ends, and later ones fail at once.
    pub(crate) fn close(&self) {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    /// A new call's number and where its answer will come, or `None` once closed.
    fn register(&self) -> Option<(u64, tokio::sync::oneshot::Receiver<Incoming>)> {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = tokio::sync::oneshot::channel();
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()?
            .insert(number, sender);
        Some((number, receiver))
    }

    /// The waiter of call `number`, taken out, if it still waits.
    fn take(&self, number: u64) -> Option<tokio::sync::oneshot::Sender<Incoming>> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
            .and_then(|calls| calls.remove(&number))
    }

    /// Forgets call `number`; whether it still waited.
    fn forget(&self, number: u64) -> bool {
        self.take(number).is_some()
    }

    /// How many calls wait (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map_or(0, HashMap::len)
    }
}

/// Tool calls straight to one stdio backend.
#[derive(Clone)]
pub(crate) struct DirectCalls {
    stdin: SharedStdin,
    waiting: Arc<Waiting>,
}

impl std::fmt::Debug for DirectCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DirectCalls")
    }
}

impl DirectCalls {
    pub(crate) fn new(stdin: SharedStdin, waiting: Arc<Waiting>) -> DirectCalls {
        DirectCalls { stdin, waiting }
    }

    /// Calls a tool; the errors are rmcp's, so the caller reads them as it reads rmcp's.
    pub(crate) async fn call_tool(
        &self,
        params: CallToolRequestParams,
    ) -> Result<CallToolResult, ServiceError> {
        let (number, answer) = self
            .waiting
            .register()
            .ok_or(ServiceError::TransportClosed)?;
        let _pending = Pending {
            calls: self,
            number,
        };
        let request = ToolRequest {
            jsonrpc: "2.0",
            id: format!("{ID_PREFIX}{number}"),
            method: "tools/call",
            params: &params,
        };
        let mut line = serde_json::to_vec(&request).map_err(|e| {
            ServiceError::McpError(rmcp::model::ErrorData::internal_error(e.to_string(), None))
        })?;
        line.push(b'\n');
        if self.stdin.write_line(&line).await.is_err() {
            // The backend is gone: there is no one to tell.
            self.waiting.forget(number);
            return Err(ServiceError::TransportClosed);
        }
        match answer.await.map_err(|_| ServiceError::TransportClosed)? {
            JsonRpcMessage::Response(response) => match response.result {
                ServerResult::CallToolResult(result) => Ok(result),
                _ => Err(ServiceError::UnexpectedResponse),
            },
            JsonRpcMessage::Error(error) => Err(ServiceError::McpError(error.error)),
            _ => Err(ServiceError::UnexpectedResponse),
        }
    }
}

/// A `tools/call` request as it is written (the arguments serialized once, straight from
/// the parameters).
#[derive(serde::Serialize)]
struct ToolRequest<'a> {
    jsonrpc: &'static str,
    id: String,
    method: &'static str,
    params: &'a CallToolRequestParams,
}

/// A call on its way: dropped while it still waits (its answer was not delivered), it is
/// forgotten and the backend is told.
struct Pending<'a> {
    calls: &'a DirectCalls,
    number: u64,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.calls.waiting.forget(self.number) {
            return;
        }
        let notice = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": format!("{ID_PREFIX}{}", self.number), "reason": ABANDONED},
        });
        let mut line = notice.to_string().into_bytes();
        line.push(b'\n');
        let stdin = self.calls.stdin.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = stdin.write_line(&line).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ErrorData, JsonRpcMessage, RequestId};

    use super::*;

    fn answer(id: RequestId) -> Incoming {
        JsonRpcMessage::response(
            ServerResult::CallToolResult(CallToolResult::success(vec![])),
            id,
        )
    }

    #[tokio::test]
    async fn only_answers_to_this_paths_calls_are_taken_from_rmcp() {
        let waiting = Waiting::new();
        let (number, receiver) = waiting.register().expect("open");
        // rmcp's numbered ids, the era probe's, another prefix, and a number no call has.
        for id in [
            RequestId::Number(i64::try_from(number).expect("small")),
            RequestId::String("sandgate-era-ping".into()),
            RequestId::String(format!("other-{number}").into()),
        ] {
            assert!(waiting.deliver(answer(id)).is_some());
        }
        assert!(
            waiting
                .deliver(answer(RequestId::String("sandgate-call-999".into())))
                .is_none(),
            "an answer to a call no one waits for is dropped"
        );
        let error = JsonRpcMessage::error(
            ErrorData::invalid_params("no", None),
            Some(RequestId::String(format!("{ID_PREFIX}{number}").into())),
        );
        assert!(waiting.deliver(error).is_none());
        assert!(matches!(
            receiver.await.expect("delivered"),
            JsonRpcMessage::Error(_)
        ));
        assert_eq!(waiting.len(), 0);
    }

    #[tokio::test]
    async fn when_stdout_ends_waiting_calls_end_and_new_ones_fail_at_once() {
        let waiting = Waiting::new();
        let (_, receiver) = waiting.register().expect("open");
        waiting.close();
        assert!(receiver.await.is_err());
        assert!(waiting.register().is_none());
    }
}
