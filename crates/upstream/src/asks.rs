//! A backend's own requests during a call (`elicitation/create`, `sampling/createMessage`),
//! passed on to the client whose call it is.
//!
//! MCP gives such a request no field that names the call it belongs to, so sandgate passes one
//! on only when the answer is certain: the backend (on this connection) has exactly one call in
//! flight. A per-user backend has a connection per user, so only that user's calls count. With
//! none in flight, or several, the request is refused with an error that says why; it never
//! reaches a client whose call it may not be.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use rmcp::model::InputRequest;
use serde_json::Value;

/// Who a call's backend may ask: the person behind the call's client.
pub trait AskClient: Send + Sync + std::fmt::Debug {
    /// Passes `request` from `backend` on, and waits for the client's response (the request's
    /// result, as JSON), or says why it cannot be passed on.
    fn ask(
        &self,
        backend: &str,
        request: InputRequest,
    ) -> BoxFuture<'static, Result<Value, String>>;
}

/// The calls in flight on one backend connection, with who each may ask.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    next: AtomicU64,
    calls: Mutex<HashMap<u64, Option<Arc<dyn AskClient>>>>,
}

impl InFlight {
    /// Notes a call in flight until the returned guard is dropped.
    pub(crate) fn enter(self: &Arc<Self>, asks: Option<Arc<dyn AskClient>>) -> Flying {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, asks);
        Flying {
            in_flight: self.clone(),
            id,
        }
    }

    /// Who a request from the backend goes to: the one call in flight's client.
    pub(crate) fn sole_asker(
        &self,
        backend: &str,
        what: &str,
    ) -> Result<Arc<dyn AskClient>, String> {
        let calls = self.lock();
        match calls.len() {
            0 => Err(format!(
                "backend `{backend}` sent {what} while no call of sandgate's was in flight; sandgate passes such a request on only during the call it belongs to"
            )),
            1 => calls
                .values()
                .next()
                .cloned()
                .flatten()
                .ok_or_else(|| format!(
                    "backend `{backend}` sent {what}, and the client whose call it is cannot take it: it declared neither elicitation nor sampling"
                )),
            n => Err(format!(
                "backend `{backend}` sent {what} while {n} calls were in flight on its connection; MCP does not say which call it belongs to, so sandgate passes it on only when one call is in flight (set max_concurrent_calls = 1 for this backend, or per_user, to make it certain)"
            )),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Option<Arc<dyn AskClient>>>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One call in flight; it leaves when dropped.
pub(crate) struct Flying {
    in_flight: Arc<InFlight>,
    id: u64,
}

impl Drop for Flying {
    fn drop(&mut self) {
        self.in_flight.lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Nobody;

    impl AskClient for Nobody {
        fn ask(&self, _: &str, _: InputRequest) -> BoxFuture<'static, Result<Value, String>> {
            Box::pin(async { Ok(Value::Null) })
        }
    }

    #[test]
    fn a_request_goes_to_the_one_call_in_flight_and_to_no_other() {
        let in_flight = Arc::new(InFlight::default());
        let none = in_flight
            .sole_asker("b", "a question")
            .expect_err("none in flight");
        assert!(none.contains("no call"), "{none}");
        let one = in_flight.enter(Some(Arc::new(Nobody)));
        assert!(in_flight.sole_asker("b", "a question").is_ok());
        let two = in_flight.enter(Some(Arc::new(Nobody)));
        let many = in_flight
            .sole_asker("b", "a question")
            .expect_err("two in flight");
        assert!(many.contains("2 calls"), "{many}");
        drop(one);
        assert!(in_flight.sole_asker("b", "a question").is_ok());
        drop(two);
        assert!(in_flight.sole_asker("b", "a question").is_err());
    }
}
