//! What the host-side `fetch` adds to an HTTP round trip (issue 16: ≤ 150 µs), on loopback,
//! against a keep-alive server of the bench's own:
//!
//! - `raw`: one reqwest client, kept, `GET` and read the body: the round trip itself;
//! - `capability`: `Host::fetch` for a profile that grants the address literally: URL
//!   parsing, the policy check of the address, the pinned client, the limits, the body.
//!
//! Run: `cargo bench -p sandgate-capabilities --bench fetch`.

#![allow(missing_docs, clippy::expect_used)]

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use sandgate_capabilities::{FetchLimits, FetchRequest, Host, Redirect, StaticResolver};
use sandgate_policy::{Access, HostPattern, NetGrant, Profile};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A keep-alive HTTP/1.1 server answering every request with a small body.
async fn serve() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let mut pending = Vec::new();
                loop {
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        let reply = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n{\"ok\": \"fine\"}\n";
                        if socket.write_all(reply).await.is_err() {
                            return;
                        }
                    }
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => pending.extend_from_slice(&buf[..n]),
                    }
                }
            });
        }
    });
    addr
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let addr = runtime.block_on(serve());
    let url = format!("http://{addr}/data");

    let raw = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    c.bench_function("fetch/raw", |b| {
        b.to_async(&runtime).iter(|| async {
            let response = raw.get(&url).send().await.expect("sent");
            response.bytes().await.expect("body").len()
        })
    });

    let mut profile = Profile::implicit_default("bench.toml");
    profile.net = NetGrant::new(vec![HostPattern::parse(&addr.to_string()).expect("entry")]);
    let access = Access::new(Arc::new(profile));
    let fetcher = Host::new(Arc::new(StaticResolver::default()));
    let limits = FetchLimits::default();
    c.bench_function("fetch/capability", |b| {
        b.to_async(&runtime).iter(|| async {
            let request = FetchRequest {
                url: url.clone(),
                method: "GET".into(),
                headers: vec![],
                body: None,
                redirect: Redirect::Follow,
            };

            let response = fetcher
                .fetch(request, &limits, &access)
                .await
                .expect("fetched");
            response.body.len()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
