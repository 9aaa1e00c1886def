//! Loading both formats, and the error messages for bad configs.

#![allow(clippy::expect_used)] // test helpers panic on broken fixtures by design

use std::time::Duration;

use sandgate_config::{Format, Transport, load_file, parse_str};

fn toml_err(text: &str) -> String {
    parse_str(text, Format::Toml, "sandgate.toml")
        .expect_err("config should be rejected")
        .to_string()
}

fn json_err(text: &str) -> String {
    parse_str(text, Format::McpServersJson, ".mcp.json")
        .expect_err("config should be rejected")
        .to_string()
}

#[test]
fn toml_and_json_load_the_same_backends() {
    let toml = r#"
        [servers.memory]
        command = "npx"
        args = ["-y", "@modelcontextprotocol/server-memory"]
        env = { MEMORY_FILE_PATH = "/tmp/m.json" }
        timeout = "5s"
        max_concurrent_calls = 4
        allow_tools = ["create_*", "read_graph"]

        [servers.remote]
        url = "https://example.com/mcp"
        headers = { Authorization = "Bearer ${TOKEN}" }
    "#;
    let json = r#"{"mcpServers": {
        "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"],
                   "env": {"MEMORY_FILE_PATH": "/tmp/m.json"}, "timeout": 5, "max_concurrent_calls": 4,
                   "allow_tools": ["create_*", "read_graph"]},
        "remote": {"type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
    }}"#;
    let a = parse_str(toml, Format::Toml, "t").expect("toml loads");
    let b = parse_str(json, Format::McpServersJson, "j").expect("json loads");
    assert_eq!(a.backends, b.backends);
    let memory = &a.backends[0];
    assert_eq!(memory.timeout, Duration::from_secs(5));
    assert_eq!(memory.max_concurrent_calls, 4);
    assert!(
        memory.tools.permits(&sandgate_policy::ToolName::plain(
            "memory",
            "create_entities"
        )) && !memory.tools.permits(&sandgate_policy::ToolName::plain(
            "memory",
            "delete_entities"
        ))
    );
    assert!(
        matches!(&a.backends[1].transport, Transport::Http { url, .. } if url == "https://example.com/mcp")
    );
}

#[test]
fn unknown_key_names_file_key_and_suggestion() {
    let msg = toml_err("[servers.gh]\ncomand = \"x\"\n");
    assert!(msg.contains("sandgate.toml"), "{msg}");
    assert!(msg.contains("servers.gh.comand"), "{msg}");
    assert!(msg.contains("did you mean `command`"), "{msg}");
    let msg = json_err(r#"{"mcpServers": {"a": {"command": "x", "agrs": []}}}"#);
    assert!(
        msg.contains("mcpServers.a.agrs") && msg.contains("`args`"),
        "{msg}"
    );
}

#[test]
fn wrong_types_are_named() {
    let msg = toml_err("[servers.a]\ncommand = \"x\"\nargs = \"--flag\"\n");
    assert!(
        msg.contains("servers.a.args") && msg.contains("list of strings"),
        "{msg}"
    );
    let msg = toml_err("[servers.a]\ncommand = \"x\"\ntimeout = \"soon\"\n");
    assert!(
        msg.contains("servers.a.timeout") && msg.contains("not a duration"),
        "{msg}"
    );
    let msg = toml_err("[servers.a]\ncommand = \"x\"\nmax_concurrent_calls = 0\n");
    assert!(msg.contains("max_concurrent_calls"), "{msg}");
}

#[test]
fn empty_command_and_missing_transport_fail() {
    assert!(toml_err("[servers.a]\ncommand = \"  \"\n").contains("servers.a.command` is empty"));
    assert!(toml_err("[servers.a]\nargs = []\n").contains("neither `command` nor `url`"));
    assert!(toml_err("[servers.a]\ncommand = \"x\"\nurl = \"http://h\"\n").contains("both"));
}

#[test]
fn duplicate_names_fail_case_insensitively() {
    let msg =
        json_err(r#"{"mcpServers": {"GitHub": {"command": "a"}, "github": {"command": "b"}}}"#);
    assert!(msg.contains("duplicates backend `GitHub`"), "{msg}");
    // TOML itself refuses an exact duplicate table, with the line.
    let msg = toml_err("[servers.a]\ncommand = \"x\"\n[servers.a]\ncommand = \"y\"\n");
    assert!(
        msg.contains("sandgate.toml") && msg.contains("line"),
        "{msg}"
    );
}

#[test]
fn entries_of_other_clients_are_skipped_with_the_reason_and_the_others_load() {
    let cfg = parse_str(
        r#"{
          // Claude Desktop's own settings sit beside the servers
          "globalShortcut": "Ctrl+Space", "preferences": {"x": 1},
          "mcpServers": {
            "legacy": {"type": "sse", "url": "http://h/sse"},
            "signed": {"type": "http", "url": "https://h/mcp", "oauth": {"clientId": "x"}},
            "helped": {"type": "http", "url": "https://h/mcp", "headersHelper": "get-headers.sh"},
            "prompted": {"command": "x", "env": {"KEY": "${input:api-key}"}},
            "trusted": {"command": "x", "trust": true},
            "gemini": {"httpUrl": "https://g/mcp"},
          },
        }"#,
        Format::McpServersJson,
        "claude_desktop_config.json",
    )
    .expect("one entry it cannot use never stops the file");
    let by_name = |n: &str| cfg.backends.iter().find(|b| b.name == n).expect(n);
    for (name, why) in [
        ("legacy", "HTTP+SSE"),
        ("signed", "oauth"),
        ("helped", "headersHelper"),
        ("prompted", "VS Code input"),
    ] {
        let b = by_name(name);
        assert!(!b.enabled, "{name}");
        assert!(
            b.skipped.as_deref().unwrap_or("").contains(why),
            "{name}: {:?}",
            b.skipped
        );
    }
    assert!(by_name("trusted").enabled && by_name("gemini").enabled);
    assert!(
        matches!(&by_name("gemini").transport, Transport::Http { url, .. } if url == "https://g/mcp")
    );
    // URLs are checked when the file is loaded.
    for bad in [
        "https://exa mple.com/mcp",
        "http://:80/mcp",
        "https://[::1/mcp",
    ] {
        let msg = json_err(&format!(r#"{{"mcpServers": {{"a": {{"url": "{bad}"}}}}}}"#));
        assert!(msg.contains("`mcpServers.a.url`"), "{bad}: {msg}");
    }
    // A misspelling of a key sandgate owns is still an error.
    let msg = json_err(r#"{"mcpServer": {}}"#);
    assert!(msg.contains("did you mean `mcpServers`"), "{msg}");
    let msg = json_err(r#"{"mcpServers": {"a": {"comand": "x"}}}"#);
    assert!(msg.contains("did you mean `command`"), "{msg}");
}

#[test]
fn vs_code_servers_and_inputs_load() {
    let cfg = parse_str(
        r#"{"inputs": [{"type": "promptString", "id": "k"}], "servers": {"a": {"type": "stdio", "command": "x"}}}"#,
        Format::McpServersJson,
        ".vscode/mcp.json",
    )
    .expect("loads");
    assert_eq!(cfg.backends[0].name, "a");
}

#[test]
fn an_env_file_is_loaded_under_the_entry_env() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        dir.path().join(".env"),
        "# secrets\nexport A=from-file\nB=\"quoted\"\nC='single'\n",
    )
    .expect("env");
    std::fs::write(
        dir.path().join("mcp.json"),
        r#"{"mcpServers": {"a": {"command": "x", "envFile": ".env", "env": {"A": "from-entry"}}, "b": {"command": "x", "envFile": "missing.env"}}}"#,
    )
    .expect("config");
    let cfg = load_file(&dir.path().join("mcp.json")).expect("loads");
    let a = &cfg.backends[0];
    assert_eq!(
        (
            a.env["A"].expose(),
            a.env["B"].expose(),
            a.env["C"].expose()
        ),
        ("from-entry", "quoted", "single")
    );
    assert!(!cfg.backends[1].enabled);
    assert!(
        cfg.backends[1]
            .skipped
            .as_deref()
            .unwrap_or("")
            .contains("missing.env")
    );
}

#[test]
fn foreign_client_keys_are_tolerated_and_disabled_maps() {
    let cfg = parse_str(
        r#"{"mcpServers": {"a": {"command": "x", "autoApprove": [], "disabled": true}}}"#,
        Format::McpServersJson,
        "j",
    )
    .expect("loads");
    assert!(!cfg.backends[0].enabled);
}

#[test]
fn an_unset_variable_disables_only_the_backend_that_needs_it() {
    let cfg = parse_str(
        "[servers.a]\ncommand = \"x\"\nenv = { T = \"${TOKEN}\", U = \"${NOPE}\" }\n[servers.b]\ncommand = \"${TOOL_HOME:-/opt}/bin/b\"\nargs = [\"--token=${TOKEN}\"]\n[servers.c]\nurl = \"https://${HOST}/mcp\"\n",
        Format::Toml,
        "t",
    )
    .expect("loads");
    let partly = cfg
        .resolved(&|v| (v == "TOKEN").then(|| "abc".into()))
        .expect("one unset variable does not stop the config");
    let a = &partly.backends[0];
    assert!(!a.enabled, "a needs NOPE");
    let why = a.skipped.as_deref().unwrap_or("");
    assert!(why.contains("${NOPE}") && why.contains("env.U"), "{why}");
    let b = &partly.backends[1];
    assert!(b.enabled && b.skipped.is_none());
    match &b.transport {
        Transport::Stdio { command, args, .. } => {
            assert_eq!(
                (command.as_str(), args[0].as_str()),
                ("/opt/bin/b", "--token=abc")
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        partly.backends[2]
            .skipped
            .as_deref()
            .unwrap_or("")
            .contains("`url` needs ${HOST}")
    );
    let resolved = cfg.resolved(&|_| Some("v".into())).expect("resolves");
    assert_eq!(resolved.backends[0].env["T"].expose(), "v");
    assert_eq!(
        cfg.backends[0].env["T"].expose(),
        "${TOKEN}",
        "the original is untouched"
    );
}

#[test]
fn format_is_detected_and_relative_paths_follow_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("servers.conf");
    std::fs::write(
        &path,
        r#"{"mcpServers": {"a": {"command": "x", "cwd": "sub"}}}"#,
    )
    .expect("write");
    let cfg = load_file(&path).expect("content sniffing picks JSON");
    match &cfg.backends[0].transport {
        Transport::Stdio { cwd: Some(cwd), .. } => assert_eq!(cwd, &dir.path().join("sub")),
        other => panic!("unexpected transport {other:?}"),
    }
    let missing = load_file(&dir.path().join("nope.toml")).expect_err("missing file");
    assert!(missing.to_string().contains("nope.toml"));
}

#[test]
fn the_example_configs_load() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for file in ["examples/sandgate.toml", "examples/mcp.json"] {
        let cfg = load_file(&root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            cfg.backends.len() >= 3,
            "{file} lists the three reference servers"
        );
    }
}

#[test]
fn output_and_store_sections_load_and_explain_mistakes() {
    let cfg = parse_str(
        "[output]\nmax_chars = 5000\nintent_filter = false\n[store]\npath = \"s.db\"\noutput_retention_hours = 24\n",
        Format::Toml,
        "t",
    )
    .expect("loads");
    assert_eq!(cfg.output.max_chars, 5000);
    assert!(!cfg.output.intent_filter);
    assert_eq!(
        cfg.output.json_chunk_min_bytes, 10_240,
        "unset keys keep their defaults"
    );
    assert_eq!(cfg.store.output_retention_hours, 24);
    assert_eq!(cfg.store.max_records, sandgate_config::DEFAULT_MAX_RECORDS);
    let json = parse_str(
        r#"{"mcpServers": {}, "sandgate": {"output": {"max_chars": 300}, "store": {"max_records": 5}, "sandbox": {"workers": 2}}}"#,
        Format::McpServersJson,
        "j",
    )
    .expect("json loads");
    assert_eq!(
        (
            json.output.max_chars,
            json.store.max_records,
            json.sandbox.workers
        ),
        (300, 5, Some(2))
    );

    let sandbox = parse_str(
        "[sandbox]\nworkers = 2\nmax_workers = 6\nmax_executions = 5000\n",
        Format::Toml,
        "t",
    )
    .expect("sandbox keys load");
    assert_eq!(
        (
            sandbox.sandbox.workers,
            sandbox.sandbox.max_workers,
            sandbox.sandbox.max_executions
        ),
        (Some(2), Some(6), Some(5000))
    );
    let fewer = toml_err("[sandbox]\nworkers = 4\nmax_workers = 2\n");
    assert!(
        fewer.contains("sandbox.max_workers") && fewer.contains("at least workers"),
        "{fewer}"
    );

    let typo = toml_err("[output]\nmax_char = 100\n");
    assert!(
        typo.contains("output.max_char") && typo.contains("max_chars"),
        "{typo}"
    );
    let ratio = toml_err("[output]\nintent_min_term_ratio = 3\n");
    assert!(
        ratio.contains("intent_min_term_ratio") && ratio.contains("from 0 to 1"),
        "{ratio}"
    );
    let tiny = toml_err("[output]\nmax_chars = 10\n");
    assert!(tiny.contains("at least 200"), "{tiny}");
    let zero = toml_err("[store]\nmax_records = 0\n");
    assert!(
        zero.contains("store.max_records") && zero.contains("above 0"),
        "{zero}"
    );
    let kind = toml_err("[output]\nmax_chars = \"lots\"\n");
    assert!(
        kind.contains("output") && kind.contains("bad value"),
        "{kind}"
    );
}

#[test]
fn gemini_writes_timeouts_in_milliseconds_and_sandgate_reads_them_so() {
    let servers = r#"{"mcpServers": {
        "slow": {"command": "x", "timeout": 45000},
        "unit": {"command": "x", "timeout": "2m"}
    }}"#;
    let timeout = |cfg: &sandgate_config::Config, name: &str| {
        cfg.backends
            .iter()
            .find(|b| b.name == name)
            .map(|b| b.timeout)
            .expect(name)
    };
    // By its place: Gemini CLI's settings file.
    let gemini = parse_str(
        servers,
        Format::McpServersJson,
        "/home/u/.gemini/settings.json",
    )
    .expect("loads");
    assert_eq!(timeout(&gemini, "slow"), Duration::from_secs(45));
    assert_eq!(timeout(&gemini, "unit"), Duration::from_secs(120));
    // By a key only Gemini writes, wherever the file is.
    let marked = servers.replace(r#""timeout": 45000"#, r#""timeout": 45000, "trust": true"#);
    let marked = parse_str(&marked, Format::McpServersJson, "settings.json").expect("loads");
    assert_eq!(timeout(&marked, "slow"), Duration::from_secs(45));
    // Elsewhere a bare number is seconds, as in sandgate.toml; `timeoutMs` is milliseconds.
    let plain = servers
        .replace("45000", "45")
        .replace(r#""timeout": "2m""#, r#""timeoutMs": 1500"#);
    let plain = parse_str(&plain, Format::McpServersJson, ".mcp.json").expect("loads");
    assert_eq!(timeout(&plain, "slow"), Duration::from_secs(45));
    assert_eq!(timeout(&plain, "unit"), Duration::from_millis(1500));
}

#[test]
fn the_store_is_sqlite_by_default_and_postgres_takes_a_url_from_the_environment() {
    let cfg = parse_str("", Format::Toml, "t").expect("loads");
    assert_eq!(cfg.store.backend, sandgate_config::StoreBackend::Sqlite);
    let pg = parse_str(
        "[store]\nbackend = \"postgres\"\nurl = \"${DATABASE_URL}\"\nca_file = \"ca.pem\"\n",
        Format::Toml,
        "t",
    )
    .expect("loads");
    assert_eq!(pg.store.backend, sandgate_config::StoreBackend::Postgres);
    assert_eq!(
        pg.store.rate_limit_when_unreachable,
        sandgate_config::RateLimitFallback::Local,
        "each replica counts alone while the database is away, unless told otherwise"
    );
    let closed = parse_str(
        "[store]\nbackend = \"postgres\"\nurl = \"x\"\nrate_limit_when_unreachable = \"closed\"\n",
        Format::Toml,
        "t",
    )
    .expect("loads");
    assert_eq!(
        closed.store.rate_limit_when_unreachable,
        sandgate_config::RateLimitFallback::Closed
    );
    assert_eq!(
        cfg.store.records,
        sandgate_config::RecordWrites::Batched,
        "records are off the request path unless asked"
    );
    let waited = parse_str(
        "[store]\nrecords = \"before_response\"\n",
        Format::Toml,
        "t",
    )
    .expect("loads");
    assert_eq!(
        waited.store.records,
        sandgate_config::RecordWrites::BeforeResponse
    );
    let resolved = pg
        .resolved(&|var| (var == "DATABASE_URL").then(|| "postgres://db/x".to_string()))
        .expect("resolves");
    assert_eq!(
        resolved.store.url.as_ref().map(|u| u.expose().to_string()),
        Some("postgres://db/x".to_string())
    );
    // The CA file may come from the environment too (a mounted secret's path).
    let from_env = parse_str(
        "[store]\nbackend = \"postgres\"\nurl = \"x\"\nca_file = \"${PGSSLROOTCERT}\"\n",
        Format::Toml,
        "t",
    )
    .expect("loads")
    .resolved(&|var| (var == "PGSSLROOTCERT").then(|| "/run/ca.pem".to_string()))
    .expect("resolves");
    assert_eq!(
        from_env.store.ca_file.as_deref(),
        Some(std::path::Path::new("/run/ca.pem"))
    );
    let unset = pg.resolved(&|_| None).expect_err("the variable is not set");
    assert!(
        unset.to_string().contains("store.url") && unset.to_string().contains("DATABASE_URL"),
        "{unset}"
    );
    for (text, says) in [
        ("[store]\nbackend = \"postgres\"\n", "needs url"),
        (
            "[store]\nurl = \"postgres://db/x\"\n",
            "add backend = \"postgres\"",
        ),
        ("[store]\nbackend = \"mysql\"\n", "\"sqlite\" (one machine"),
        (
            "[store]\nrate_limit_when_unreachable = \"maybe\"\n",
            "\"local\" (each replica counts alone",
        ),
        (
            "[store]\nbackend = \"postgres\"\nurl = \"x\"\npath = \"s.db\"\n",
            "remove path",
        ),
        (
            "[store]\nrecords = \"always\"\n",
            "\"before_response\" (every answer waits",
        ),
    ] {
        let error = toml_err(text);
        assert!(error.contains(says), "{text}: {error}");
    }
}

#[test]
fn a_drain_is_off_by_default_and_bounded() {
    let cfg = parse_str("", Format::Toml, "t").expect("loads");
    assert!(cfg.http.limits.drain.is_zero());
    let set = parse_str("[http]\ndrain = \"3s\"\n", Format::Toml, "t").expect("loads");
    assert_eq!(set.http.limits.drain, Duration::from_secs(3));
    let long = parse_str("[http]\ndrain = \"10m\"\n", Format::Toml, "t").expect_err("too long");
    assert!(long.to_string().contains("http.drain"), "{long}");
}

#[test]
fn auth_oauth_names_issuers_rules_and_an_introspection_secret_from_the_environment() {
    let text = r#"
[profiles.builder]
tools = ["*"]

[auth.oauth]
resource = "https://gw.example/mcp"

[[auth.oauth.issuers]]
issuer = "https://idp.example"
algorithms = ["ES256"]
introspection = { client_id = "gw", client_secret = "${INTROSPECTION_SECRET}" }

[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "builder"
"#;
    let cfg = parse_str(text, Format::Toml, "t").expect("loads");
    let oauth = cfg.auth.oauth.as_ref().expect("oauth");
    assert_eq!(
        oauth.issuers[0].audience, "https://gw.example/mcp",
        "the audience defaults to the resource"
    );
    assert_eq!(oauth.rules[0].profile, "builder");
    let unset = cfg
        .resolved(&|_| None)
        .expect_err("the secret's variable is not set");
    assert!(
        unset.to_string().contains("INTROSPECTION_SECRET"),
        "{unset}"
    );
    let resolved = cfg
        .resolved(&|v| (v == "INTROSPECTION_SECRET").then(|| "s3cret".to_string()))
        .expect("resolves");
    let how = resolved.auth.oauth.expect("oauth").issuers[0]
        .introspection
        .clone()
        .expect("introspection");
    assert_eq!(how.client_secret.expose(), "s3cret");
    assert!(
        !format!("{how:?}").contains("s3cret"),
        "the secret never prints"
    );
    for (bad, says) in [
        (
            text.replace("\"ES256\"", "\"HS256\""),
            "shared-secret HS* and none are refused",
        ),
        (
            text.replace("profile = \"builder\"", "profile = \"nobody\""),
            "which is not a profile",
        ),
        (
            text.replace("resource = \"https://gw.example/mcp\"\n", ""),
            "auth.oauth.resource",
        ),
        (
            text.replace("[auth.oauth]\n", "[auth.oauth]\nleeway = \"10m\"\n"),
            "at most 5 minutes",
        ),
    ] {
        let error = toml_err(&bad);
        assert!(error.contains(says), "{error}");
    }
}
