//! Accepting HTTP connections within bounds: a total cap and a per-address cap on open
//! connections, and a deadline for each request's headers.
//!
//! Without these, 20,000 connections that trickle their headers used up the file descriptors,
//! and every healthy client timed out until the attackers left. A connection over a cap is
//! closed at once (it never waits in the backlog holding a descriptor); one whose headers do
//! not arrive in time is closed by hyper, and so is a keep-alive connection that stays idle
//! that long.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use sandgate_config::HttpLimits;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Open connections, in all and per address.
#[derive(Debug, Default)]
struct Open {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// Counts open connections against the limits.
#[derive(Debug)]
pub(crate) struct Admission {
    open: Mutex<Open>,
    max_total: usize,
    max_per_ip: usize,
}

/// One admitted connection; dropping it frees its place.
#[derive(Debug)]
pub(crate) struct Admitted {
    admission: Arc<Admission>,
    ip: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Ok(mut open) = self.admission.open.lock() {
            open.total = open.total.saturating_sub(1);
            if let Some(n) = open.per_ip.get_mut(&self.ip) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    open.per_ip.remove(&self.ip);
                }
            }
        }
    }
}

impl Admission {
    pub(crate) fn new(limits: &HttpLimits) -> Arc<Admission> {
        Arc::new(Admission {
            open: Mutex::default(),
            max_total: limits.max_connections,
            max_per_ip: limits.max_connections_per_ip,
        })
    }

    /// A place for a connection from `ip`, or why there is none.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admitted, &'static str> {
        let mut open = self
            .open
            .lock()
            .map_err(|_| "the connection table is poisoned")?;
        if open.total >= self.max_total {
            return Err("http.max_connections");
        }
        let from_ip = open.per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= self.max_per_ip {
            return Err("http.max_connections_per_ip");
        }
        open.total += 1;
        open.per_ip.insert(ip, from_ip + 1);
        Ok(Admitted {
            admission: self.clone(),
            ip,
        })
    }
}

/// Accepts connections until `shutdown`, serving each with `app` on a task of its own.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    app: axum::Router,
    limits: HttpLimits,
    shutdown: CancellationToken,
) {
    let admission = Admission::new(&limits);
    let mut refused_logged = tokio::time::Instant::now() - Duration::from_secs(60);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors or similar: back off a little instead of spinning.
                    tracing::warn!("accepting an HTTP connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => return,
        };
        let admitted = match admission.admit(peer.ip()) {
            Ok(admitted) => admitted,
            Err(limit) => {
                if refused_logged.elapsed() >= Duration::from_secs(10) {
                    refused_logged = tokio::time::Instant::now();
                    tracing::warn!(%peer, "refusing HTTP connections over {limit}");
                }
                drop(stream);
                continue;
            }
        };
        // Without TCP_NODELAY a response written in two pieces waits for the client's delayed
        // ACK: about 40 ms per request on a keep-alive connection.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY on an accepted connection: {e}");
        }
        let service = TowerToHyperService::new(app.clone());
        let shutdown = shutdown.clone();
        let header_timeout = limits.header_timeout;
        tokio::spawn(async move {
            let _admitted = admitted;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .keep_alive(true);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let ended = tokio::select! {
                ended = connection.as_mut() => ended,
                () = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = ended {
                tracing::debug!(%peer, "HTTP connection ended: {e}");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_count_in_all_and_per_address_and_free_on_drop() {
        let limits = HttpLimits {
            max_connections: 3,
            max_connections_per_ip: 2,
            ..HttpLimits::default()
        };
        let admission = Admission::new(&limits);
        let a: IpAddr = "127.0.0.2".parse().expect("ip");
        let b: IpAddr = "127.0.0.3".parse().expect("ip");
        let first = admission.admit(a).expect("first");
        let _second = admission.admit(a).expect("second");
        assert_eq!(
            admission.admit(a).err(),
            Some("http.max_connections_per_ip")
        );
        let _third = admission.admit(b).expect("another address");
        assert_eq!(admission.admit(b).err(), Some("http.max_connections"));
        drop(first);
        assert!(
            admission.admit(b).is_ok(),
            "a closed connection frees its place"
        );
    }
}
