//! The stdio front: one MCP client over stdin and stdout.
//!
//! MCP clients start a server with pipes for its stdin and stdout (Python's `subprocess`), or
//! Unix socket pairs (Node's `child_process`, which Electron apps use). tokio's `stdin()` and
//! `stdout()` hand every read and write to a blocking thread and wake the runtime when it is
//! done, so each message crossed threads twice each way: over stdio, with one client calling in
//! sequence, half of the gateway's CPU per call was the kernel switching threads (issue 35). So
//! stdin and stdout that are pipes or Unix sockets are read and written non-blocking on the
//! runtime's own threads. Anything else (a terminal, a file) goes through tokio's `stdin()` and
//! `stdout()` as before.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rmcp::ServiceExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::unix::pipe;

use crate::error::GatewayError;
use crate::gateway::Gateway;
use crate::mcp::SandgateServer;

/// Serves one MCP client over stdin/stdout until it disconnects.
pub async fn serve_stdio(gateway: Arc<Gateway>) -> Result<(), GatewayError> {
    let server = SandgateServer::new(gateway);
    let running = match (input(), output()) {
        (Some(input), Some(output)) => server.serve((input, output)).await,
        _ => {
            // One end may have been made non-blocking before the other was refused; tokio's
            // `stdin()`/`stdout()` read and write blocking.
            set_blocking(std::io::stdin().as_fd());
            set_blocking(std::io::stdout().as_fd());
            server.serve(rmcp::transport::stdio()).await
        }
    }
    .map_err(|e| GatewayError::Serve(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| GatewayError::Serve(e.to_string()))?;
    Ok(())
}

/// stdin, read on the runtime's threads.
enum Input {
    Pipe(pipe::Receiver),
    Socket(tokio::net::UnixStream),
}

/// stdout, written on the runtime's threads.
enum Output {
    Pipe(pipe::Sender),
    Socket(tokio::net::UnixStream),
}

/// What kind of descriptor a copy of `fd` is: `(copy, is_pipe)`, or `None` when it is neither a
/// pipe nor a socket.
fn kind_of(fd: BorrowedFd<'_>) -> Option<(OwnedFd, bool)> {
    let owned = fd.try_clone_to_owned().ok()?;
    let kind = std::fs::File::from(owned.try_clone().ok()?)
        .metadata()
        .ok()?
        .file_type();
    (kind.is_fifo() || kind.is_socket()).then_some((owned, kind.is_fifo()))
}

/// A copy of `fd` as a non-blocking Unix socket (the copy shares the descriptor's flags). A
/// socket of another family (TCP, from inetd) has no Unix address and is left alone.
fn unix_socket(fd: OwnedFd) -> Option<tokio::net::UnixStream> {
    let socket = std::os::unix::net::UnixStream::from(fd);
    socket.local_addr().ok()?;
    socket.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(socket).ok()
}

/// Clears `O_NONBLOCK` on `fd` (`FIONBIO`, which std exposes on sockets, works on any
/// descriptor).
fn set_blocking(fd: BorrowedFd<'_>) {
    if let Ok(copy) = fd.try_clone_to_owned() {
        let _ = std::os::unix::net::UnixStream::from(copy).set_nonblocking(false);
    }
}

/// stdin as a non-blocking pipe or Unix socket (tokio checks that a pipe reads).
fn input() -> Option<Input> {
    match kind_of(std::io::stdin().as_fd())? {
        (fd, true) => pipe::Receiver::from_owned_fd(fd).ok().map(Input::Pipe),
        (fd, false) => unix_socket(fd).map(Input::Socket),
    }
}

/// stdout as a non-blocking pipe or Unix socket (tokio checks that a pipe writes).
fn output() -> Option<Output> {
    match kind_of(std::io::stdout().as_fd())? {
        (fd, true) => pipe::Sender::from_owned_fd(fd).ok().map(Output::Pipe),
        (fd, false) => unix_socket(fd).map(Output::Socket),
    }
}

impl AsyncRead for Input {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Input::Pipe(r) => Pin::new(r).poll_read(cx, buf),
            Input::Socket(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Output {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Output::Pipe(w) => Pin::new(w).poll_write(cx, data),
            Output::Socket(s) => Pin::new(s).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Output::Pipe(w) => Pin::new(w).poll_flush(cx),
            Output::Socket(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Output::Pipe(w) => Pin::new(w).poll_shutdown(cx),
            Output::Socket(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
