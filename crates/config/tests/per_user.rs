//! `[credentials]` and a backend's `per_user` keys: what loads, and what each mistake says.

#![allow(clippy::expect_used)] // test helpers panic on broken fixtures by design

use std::time::Duration;

use sandgate_config::{Format, PerUser, UserSecret, parse_str};

const KEY: &str = "[credentials]\nkey = \"${SANDGATE_CREDENTIAL_KEY}\"\n";

fn per_user(text: &str) -> Option<PerUser> {
    parse_str(text, Format::Toml, "sandgate.toml")
        .expect("config loads")
        .backends
        .remove(0)
        .per_user
}

fn refused(text: &str) -> String {
    parse_str(text, Format::Toml, "sandgate.toml")
        .expect_err("config should be refused")
        .to_string()
}

#[test]
fn a_header_secret_an_env_secret_and_a_token_exchange_load() {
    let http = per_user(&format!(
        "{KEY}[servers.notes]\nurl = \"http://127.0.0.1:9/mcp\"\nuser_secret = {{ header = \"Authorization\", format = \"Bearer {{secret}}\" }}\nmax_users = 3\nuser_idle_timeout = \"2s\"\n"
    ))
    .expect("per user");
    assert_eq!(
        http.secret,
        UserSecret::Header {
            name: "Authorization".into(),
            format: "Bearer {secret}".into()
        }
    );
    assert_eq!(
        (http.max_users, http.idle_timeout),
        (3, Duration::from_secs(2))
    );
    let stdio = per_user(&format!(
        "{KEY}[servers.notes]\ncommand = \"notes\"\nuser_secret = {{ env = \"NOTES_TOKEN\" }}\n"
    ))
    .expect("per user");
    assert_eq!(
        stdio.secret,
        UserSecret::Env {
            name: "NOTES_TOKEN".into()
        }
    );
    assert_eq!(stdio.max_users, sandgate_config::DEFAULT_MAX_USERS);
    let alone =
        per_user("[servers.notes]\ncommand = \"notes\"\nper_user = true\n").expect("per user");
    assert_eq!(alone.secret, UserSecret::None);
    assert_eq!(per_user("[servers.notes]\ncommand = \"notes\"\n"), None);
}

#[test]
fn each_mistake_names_its_key_and_the_fix() {
    let cases = [
        (
            "[servers.n]\nurl = \"http://127.0.0.1:9/mcp\"\nuser_secret = { header = \"Authorization\" }\n",
            "[credentials]",
        ),
        (
            "[credentials]\nkey = \"c2VjcmV0\"\n[servers.n]\ncommand = \"x\"\n",
            "must not sit beside the config",
        ),
        (
            "[credentials]\nkey = \"${K}\"\nkey_file = \"/k\"\n[servers.n]\ncommand = \"x\"\n",
            "keep one",
        ),
        (
            &format!(
                "{KEY}[servers.n]\ncommand = \"x\"\nuser_secret = {{ header = \"Authorization\" }}\n"
            ),
            "user_secret = { env",
        ),
        (
            &format!(
                "{KEY}[servers.n]\nurl = \"http://127.0.0.1:9/mcp\"\nuser_secret = {{ env = \"T\" }}\n"
            ),
            "takes the secret in a header",
        ),
        (
            &format!(
                "{KEY}[servers.n]\nurl = \"http://127.0.0.1:9/mcp\"\nuser_secret = {{ header = \"Bad Header\" }}\n"
            ),
            "not a header name",
        ),
        (
            &format!(
                "{KEY}[servers.n]\nurl = \"http://127.0.0.1:9/mcp\"\nuser_secret = {{ header = \"X\", format = \"no placeholder\" }}\n"
            ),
            "{secret} exactly once",
        ),
        (
            &format!("{KEY}[servers.n]\ncommand = \"x\"\nuser_secret = {{ env = \"1BAD\" }}\n"),
            "not a variable name",
        ),
        (
            &format!(
                "{KEY}[servers.n]\ncommand = \"x\"\nper_user = false\nuser_secret = {{ env = \"T\" }}\n"
            ),
            "set per_user = true",
        ),
        (
            "[servers.n]\ncommand = \"x\"\nmax_users = 3\n",
            "only to per-user backends",
        ),
        (
            "[servers.n]\nurl = \"http://127.0.0.1:9/mcp\"\ntoken_exchange = { audience = \"a\" }\n",
            "no issuer of [auth.oauth] says how",
        ),
        (
            "[servers.n]\ncommand = \"x\"\ntoken_exchange = { audience = \"a\" }\n",
            "only to HTTP backends",
        ),
        (
            "[servers.n]\ncommand = \"x\"\nper_user = true\nuser_idle_timeout = \"10ms\"\n",
            "at least 1s",
        ),
    ];
    for (text, says) in cases {
        let error = refused(text);
        assert!(error.contains(says), "{text}\n=> {error}");
    }
}

#[test]
fn a_token_exchange_backend_loads_beside_an_issuer_that_exchanges() {
    let text = "[auth.oauth]\nresource = \"http://127.0.0.1:8931/mcp\"\n[[auth.oauth.issuers]]\nissuer = \"http://127.0.0.1:9\"\ntoken_exchange = { client_id = \"gw\", client_secret = \"${X}\" }\n[profiles.default]\ntools = [\"*\"]\n[[auth.oauth.rules]]\nclaim = \"g\"\nvalue = \"v\"\nprofile = \"default\"\n[servers.n]\nurl = \"http://127.0.0.1:9/mcp\"\ntoken_exchange = { audience = \"http://127.0.0.1:9/mcp\", scope = \"notes\" }\n";
    assert_eq!(
        per_user(text).expect("per user").secret,
        UserSecret::TokenExchange {
            audience: "http://127.0.0.1:9/mcp".into(),
            scope: Some("notes".into())
        }
    );
}

#[test]
fn the_key_comes_from_the_environment_and_a_missing_one_is_named() {
    let config = parse_str(
        &format!("{KEY}[servers.n]\ncommand = \"x\"\nuser_secret = {{ env = \"T\" }}\n"),
        Format::Toml,
        "sandgate.toml",
    )
    .expect("loads");
    let resolved = config
        .resolved(&|name| (name == "SANDGATE_CREDENTIAL_KEY").then(|| "k".repeat(44)))
        .expect("resolves");
    assert_eq!(
        resolved.credentials.key.expect("key").expose(),
        "k".repeat(44)
    );
    let missing = config.resolved(&|_| None).expect_err("refused").to_string();
    assert!(missing.contains("credentials.key"), "{missing}");
}
