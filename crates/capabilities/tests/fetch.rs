//! `fetch` against servers of this test's own, on loopback, with names resolved by a resolver
//! under the test's control: every hop is checked, and sizes, time and redirects are limited.

#![allow(clippy::expect_used, missing_docs)]

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sandgate_capabilities::{FetchLimits, FetchRequest, Host, Redirect, StaticResolver};
use sandgate_policy::{Access, HostPattern, NetGrant, Profile};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A server that answers every request with `respond(path)`, counting requests.
async fn serve(
    respond: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static,
) -> (SocketAddr, Arc<AtomicUsize>) {
    let respond = Arc::new(respond);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let hits = counted.clone();
            let respond = respond.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                hits.fetch_add(1, Ordering::SeqCst);
                let head = String::from_utf8_lossy(&got);
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let _ = socket.write_all(&respond(&path)).await;
            });
        }
    });
    (addr, hits)
}

fn ok(body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

fn redirect(to: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
    .into_bytes()
}

fn access(entries: &[String]) -> Access {
    let mut profile = Profile::implicit_default("test.toml");
    profile.net = NetGrant::new(
        entries
            .iter()
            .map(|e| HostPattern::parse(e).expect(e))
            .collect(),
    );
    Access::new(Arc::new(profile))
}

fn get(url: String) -> FetchRequest {
    FetchRequest {
        url,
        method: "GET".into(),
        headers: vec![],
        body: None,
        redirect: Redirect::Follow,
    }
}

async fn run(
    fetcher: &Host,
    access: &Access,
    request: FetchRequest,
    limits: &FetchLimits,
) -> Result<sandgate_capabilities::FetchResponse, String> {
    fetcher
        .fetch(request, limits, access)
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn a_literal_grant_reaches_its_server_and_nothing_else() {
    let (a, hits_a) = serve(|_| ok(b"fine")).await;
    let (b, hits_b) = serve(|_| ok(b"other")).await;
    let fetcher = Host::new(Arc::new(StaticResolver::default()));
    let access = access(&[a.to_string()]);
    let limits = FetchLimits::default();
    let page = run(&fetcher, &access, get(format!("http://{a}/x")), &limits)
        .await
        .expect("fetched");
    assert_eq!(
        (page.status, page.body.as_slice()),
        (200, b"fine".as_slice())
    );
    let refused = run(&fetcher, &access, get(format!("http://{b}/x")), &limits)
        .await
        .expect_err("refused");
    assert!(refused.contains("matches no entry"), "{refused}");
    assert_eq!(
        (hits_a.load(Ordering::SeqCst), hits_b.load(Ordering::SeqCst)),
        (1, 0)
    );
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused_whatever_else_it_resolves_to() {
    let (a, hits) = serve(|_| ok(b"fine")).await;
    let public: IpAddr = "93.184.216.34".parse().expect("ip");
    let resolver = StaticResolver::default()
        .with("rebind.test", &[a.ip()])
        .with("mixed.test", &[public, a.ip()]);
    let fetcher = Host::new(Arc::new(resolver));
    let access = access(&["*.test".to_string()]);
    for name in ["rebind.test", "mixed.test"] {
        let refused = run(
            &fetcher,
            &access,
            get(format!("http://{name}:{}/", a.port())),
            &FetchLimits::default(),
        )
        .await
        .expect_err(name);
        assert!(refused.contains("loopback"), "{name}: {refused}");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0, "no refused fetch connected");
}

#[tokio::test]
async fn every_redirect_is_checked_and_counted() {
    let (b, hits_b) = serve(|_| ok(b"not for you")).await;
    let (a, _) = serve(move |path| match path {
        "/to-b" => redirect(&format!("http://{b}/")),
        "/loop" => redirect("/loop"),
        "/metadata" => redirect("http://169.254.169.254/latest/meta-data/"),
        _ => ok(b"fine"),
    })
    .await;
    let fetcher = Host::new(Arc::new(StaticResolver::default()));
    let access = access(&[a.to_string()]);
    let limits = FetchLimits {
        max_redirects: 3,
        ..FetchLimits::default()
    };
    let refused = run(&fetcher, &access, get(format!("http://{a}/to-b")), &limits)
        .await
        .expect_err("to b");
    assert!(
        refused.contains(&format!("127.0.0.1:{}", b.port())),
        "{refused}"
    );
    let refused = run(
        &fetcher,
        &access,
        get(format!("http://{a}/metadata")),
        &limits,
    )
    .await
    .expect_err("metadata");
    assert!(refused.contains("169.254.169.254"), "{refused}");
    let looped = run(&fetcher, &access, get(format!("http://{a}/loop")), &limits)
        .await
        .expect_err("loop");
    assert!(looped.contains("more than 3 redirects"), "{looped}");
    assert_eq!(hits_b.load(Ordering::SeqCst), 0);
    let mut manual = get(format!("http://{a}/loop"));
    manual.redirect = Redirect::Manual;
    let answer = run(&fetcher, &access, manual, &limits)
        .await
        .expect("manual");
    assert_eq!(answer.status, 302);
}

#[tokio::test]
async fn size_and_time_are_limited() {
    let (a, _) = serve(|path| match path {
        "/big" => ok(&vec![b'x'; 64 * 1024]),
        _ => {
            std::thread::sleep(Duration::from_millis(400));
            ok(b"late")
        }
    })
    .await;
    let fetcher = Host::new(Arc::new(StaticResolver::default()));
    let access = access(&[a.to_string()]);
    let limits = FetchLimits {
        max_response_bytes: 1024,
        timeout: Duration::from_millis(150),
        ..FetchLimits::default()
    };
    let big = run(&fetcher, &access, get(format!("http://{a}/big")), &limits)
        .await
        .expect_err("big");
    assert!(big.contains("over the 1024 byte limit"), "{big}");
    let slow = run(&fetcher, &access, get(format!("http://{a}/slow")), &limits)
        .await
        .expect_err("slow");
    assert!(slow.contains("no answer within"), "{slow}");
    for bad in [
        "file:///etc/passwd",
        "http://user:pass@127.0.0.1/",
        "not a url",
    ] {
        assert!(
            run(&fetcher, &access, get(bad.into()), &limits)
                .await
                .is_err(),
            "{bad}"
        );
    }
}

/// A resolver that writes down every name it is asked, and knows none.
#[derive(Default)]
struct Recording(std::sync::Mutex<Vec<String>>);

impl sandgate_capabilities::Resolve for Recording {
    fn resolve(
        &self,
        lookup: &sandgate_policy::Authorized<sandgate_policy::NetLookup>,
    ) -> sandgate_capabilities::BoxFuture<'_, std::io::Result<Vec<IpAddr>>> {
        if let Ok(mut asked) = self.0.lock() {
            asked.push(lookup.get().host.clone());
        }
        Box::pin(async { Err(std::io::Error::other("no such name")) })
    }
}

#[tokio::test]
async fn no_name_outside_the_grant_is_ever_looked_up() {
    let (a, hits) = serve(|_| redirect("http://leak-after-redirect.attacker.example/x")).await;
    let recording = Arc::new(Recording::default());
    let fetcher = Host::new(recording.clone());
    // A grant of one address only: no name is ever looked up.
    let literal = access(&[a.to_string()]);
    let limits = FetchLimits::default();
    for url in [
        format!("http://secret-data.attacker.example:{}/", a.port()),
        format!("http://localhost:{}/", a.port()),
        format!("http://{a}/redirect"),
    ] {
        let refused = run(&fetcher, &literal, get(url.clone()), &limits)
            .await
            .expect_err(&url);
        assert!(refused.contains("matches no entry"), "{url}: {refused}");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 1, "only the granted server");
    // A name grant looks up only the names it holds.
    let named = access(&["*.allowed.test".to_string()]);
    let refused = run(
        &fetcher,
        &named,
        get("http://x.attacker.example/".into()),
        &limits,
    )
    .await
    .expect_err("refused");
    assert!(refused.contains("matches no entry"), "{refused}");
    let _ = run(
        &fetcher,
        &named,
        get("http://api.allowed.test/".into()),
        &limits,
    )
    .await;
    let asked = recording.0.lock().map(|a| a.clone()).unwrap_or_default();
    assert_eq!(asked, ["api.allowed.test"]);
}

#[tokio::test]
async fn code_does_not_choose_the_host_header() {
    let (a, hits) = serve(|_| ok(b"fine")).await;
    let fetcher = Host::new(Arc::new(StaticResolver::default()));
    let access = access(&[a.to_string()]);
    for header in [
        "Host",
        "host",
        "Transfer-Encoding",
        "Content-Length",
        "Connection",
    ] {
        let mut request = get(format!("http://{a}/x"));
        request.headers = vec![(header.into(), "internal.example".into())];
        let refused = run(&fetcher, &access, request, &FetchLimits::default())
            .await
            .expect_err(header);
        assert!(
            refused.contains("set by the gateway"),
            "{header}: {refused}"
        );
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}
