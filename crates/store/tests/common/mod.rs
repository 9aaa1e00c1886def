//! What the store's test files share: a throwaway database per test on the test server.

#![allow(dead_code)]

/// The CA of the test server's certificate (`scripts/test-postgres` makes one per run).
pub fn test_ca() -> Option<std::path::PathBuf> {
    std::env::var_os("SANDGATE_TEST_DATABASE_CA").map(std::path::PathBuf::from)
}

/// A fresh database for `test` on the test server, as a URL; `None` (said on stderr) when no
/// server is given, which fails the test under `SANDGATE_REQUIRE_POSTGRES=1`.
pub async fn postgres_url(test: &str) -> Option<String> {
    let Ok(admin) = std::env::var("SANDGATE_TEST_DATABASE_URL") else {
        assert!(
            !std::env::var("SANDGATE_REQUIRE_POSTGRES").is_ok_and(|v| v == "1"),
            "SANDGATE_REQUIRE_POSTGRES=1 but SANDGATE_TEST_DATABASE_URL is not set"
        );
        eprintln!(
            "{test}: PostgreSQL skipped (set SANDGATE_TEST_DATABASE_URL, e.g. from scripts/test-postgres start)"
        );
        return None;
    };
    let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
        .await
        .expect("the test server answers");
    tokio::spawn(connection);
    let name = format!("t_{test}_{:x}", rand_suffix());
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("creates a database");
    let base = admin
        .rsplit_once('/')
        .map_or(admin.as_str(), |(base, _)| base);
    Some(format!("{base}/{name}"))
}

pub fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    hasher.finish()
}

/// Two handles on one fresh PostgreSQL database, as two replicas have; `None` when no test
/// server is given (see `postgres_url`).
pub async fn two_replicas(
    test: &str,
) -> Option<(sandgate_store::StoreHandle, sandgate_store::StoreHandle)> {
    let url = postgres_url(test).await?;
    let ca = test_ca();
    let connect = || {
        sandgate_store::StoreHandle::postgres(
            &url,
            ca.as_deref(),
            sandgate_store::Retention::default(),
        )
    };
    let one = connect().await.expect("connects");
    let other = connect().await.expect("connects");
    Some((one, other))
}

/// A store on one engine, with two handles on it.
pub struct Engine {
    pub name: &'static str,
    pub one: sandgate_store::StoreHandle,
    pub other: sandgate_store::StoreHandle,
    _dir: Option<tempfile::TempDir>,
}

pub async fn engines(test: &str, retention: sandgate_store::Retention) -> Vec<Engine> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.db");
    let sqlite = Engine {
        name: "sqlite",
        one: sandgate_store::StoreHandle::spawn(
            sandgate_store::Store::open(&path, retention).expect("opens"),
        )
        .expect("spawns"),
        other: sandgate_store::StoreHandle::spawn(
            sandgate_store::Store::open(&path, retention).expect("opens"),
        )
        .expect("spawns"),
        _dir: Some(dir),
    };
    let mut all = vec![sqlite];
    if let Some(url) = postgres_url(test).await {
        let ca = test_ca();
        let one = sandgate_store::StoreHandle::postgres(&url, ca.as_deref(), retention)
            .await
            .expect("connects");
        let other = sandgate_store::StoreHandle::postgres(&url, ca.as_deref(), retention)
            .await
            .expect("connects");
        all.push(Engine {
            name: "postgres",
            one,
            other,
            _dir: None,
        });
    }
    all
}
