//! What a user's own credential costs a call once it is at hand (issue 29): a token exchange
//! found kept (target ≤ 20 µs), and a stored secret opened from its sealed bytes.
//!
//! The exchange is real: `tests/bench/user_credentials.py` starts `oidc-provider`, gets a user's
//! access token, and runs this benchmark with where to find them:
//!
//!     SANDGATE_BENCH_ISSUER=... SANDGATE_BENCH_SUBJECT_TOKEN=... SANDGATE_BENCH_AUDIENCE=... \
//!     SANDGATE_BENCH_EXCHANGE_SECRET=... cargo bench -p sandgate-identity --bench credentials
//!
//! The first exchange goes to the issuer; the benchmark measures the later ones, which are
//! what every call of a script after its first costs.

#![allow(clippy::expect_used)]
#![allow(missing_docs)]
// criterion_group! generates undocumented functions
// Where the benchmark's issuer is comes from the environment.
#![allow(clippy::disallowed_methods)]

use criterion::{Criterion, criterion_group, criterion_main};
use sandgate_identity::{DEFAULT_ALGORITHMS, Exchanger, IssuerClient, IssuerSettings, Vault};

fn exchange(c: &mut Criterion) {
    let vars = [
        "SANDGATE_BENCH_ISSUER",
        "SANDGATE_BENCH_SUBJECT_TOKEN",
        "SANDGATE_BENCH_AUDIENCE",
        "SANDGATE_BENCH_EXCHANGE_SECRET",
    ]
    .map(std::env::var);
    let [Ok(issuer), Ok(token), Ok(audience), Ok(secret)] = vars else {
        eprintln!(
            "skipping the exchange: run tests/bench/user_credentials.py, which starts an issuer and sets SANDGATE_BENCH_*"
        );
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let exchanger = Exchanger::new(&[IssuerSettings {
        issuer: issuer.clone(),
        audience: "unused".into(),
        algorithms: DEFAULT_ALGORITHMS.to_vec(),
        jwks_uri: None,
        introspection: None,
        token_exchange: Some(IssuerClient {
            endpoint: None,
            client_id: "gateway".into(),
            client_secret: secret,
        }),
    }])
    .expect("settings")
    .expect("an exchanger");
    let first = runtime
        .block_on(exchanger.exchange(&issuer, &token, &audience, None))
        .expect("the issuer exchanges the token");
    c.bench_function("token exchange, kept", |b| {
        b.iter(|| {
            let kept = runtime
                .block_on(exchanger.exchange(&issuer, &token, &audience, None))
                .expect("kept");
            assert_eq!(kept.expose().len(), first.expose().len());
        })
    });
}

fn stored_secret(c: &mut Criterion) {
    let vault =
        Vault::from_key_text("c2FuZGdhdGUtdGVzdC1rZXktMzItYnl0ZXMtbG9uZyE=").expect("a key");
    let sealed = vault
        .seal(
            "user:0123456789abcdef0123456789abcdef",
            "notes",
            &"t".repeat(40),
        )
        .expect("sealed");
    c.bench_function("stored secret, opened", |b| {
        b.iter(|| {
            vault
                .open("user:0123456789abcdef0123456789abcdef", "notes", &sealed)
                .expect("opens")
        })
    });
}

criterion_group!(benches, exchange, stored_secret);
criterion_main!(benches);
