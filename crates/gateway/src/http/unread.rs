//! A response sent before its request's body was read says `Connection: close`.
//!
//! Many answers are given without reading the body: a refused token (401, 403), a refused Host
//! or Origin, an unknown session. hyper then cannot reuse the connection (the unread body is in
//! the way), and closes it after the response; but unless the response says so, the client
//! believes the connection is kept alive and sends its next request on it, which is cut off
//! with no answer ("server disconnected"). Saying `Connection: close` lets every client open a
//! new connection instead. A request whose body was read to its end keeps its connection.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use hyper::body::{Body as HttpBody, Frame, SizeHint};

/// Runs `request`, and marks its response `Connection: close` if the body it declared was not
/// read to its end by then.
pub(crate) async fn close_if_unread(request: Request, next: Next) -> Response {
    let headers = request.headers();
    let declares_body = headers.contains_key(TRANSFER_ENCODING)
        || headers
            .get(CONTENT_LENGTH)
            .is_some_and(|length| length.as_bytes() != b"0");
    if !declares_body {
        return next.run(request).await;
    }
    let finished = Arc::new(AtomicBool::new(false));
    let (parts, body) = request.into_parts();
    let watched = Watched {
        inner: body,
        finished: finished.clone(),
    };
    let mut response = next
        .run(Request::from_parts(parts, Body::new(watched)))
        .await;
    if !finished.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(CONNECTION, http::HeaderValue::from_static("close"));
    }
    response
}

/// Whether a body has ended, after `polled` was its latest frame: it said so, or it says it
/// has nothing more (hyper stops polling a body then, so that counts as ended too).
pub(super) fn ended(polled: &Poll<Option<Result<Frame<Bytes>, axum::Error>>>, body: &Body) -> bool {
    matches!(polled, Poll::Ready(None)) || body.is_end_stream()
}

/// A request body that notes when it has been read to its end.
struct Watched {
    inner: Body,
    finished: Arc<AtomicBool>,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if ended(&polled, &self.inner) {
            self.finished.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
