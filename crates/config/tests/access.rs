//! The access sections: profiles, HTTP tokens and auth, and the audit log, in both formats.

#![allow(clippy::expect_used)] // test helpers panic on broken fixtures by design

use sandgate_config::{Format, HttpAuth, TokenSecret, parse_str};

fn toml_err(text: &str) -> String {
    parse_str(text, Format::Toml, "sandgate.toml")
        .expect_err("config should be rejected")
        .to_string()
}

const READER: &str = r#"
    [profiles.reader]
    tools = ["memory.read_*", "memory.search_*", "fs.read_*"]
    deny_tools = ["fs.read_media_file"]
    net = ["api.github.com:443", "*.example.com"]
    fs = [{ path = "/srv/data", write = false }]
    env = ["GITHUB_TOKEN"]
    limits = { timeout_ms = 10000, max_calls = 200, executions_per_minute = 120 }

    [[http.tokens]]
    token = "${READER_TOKEN}"
    profile = "reader"
    name = "research-agent"

    [audit]
    path = "/var/log/sandgate-audit.jsonl"
"#;

#[test]
fn the_issue_profile_loads_in_toml_and_json_alike() {
    let toml = parse_str(READER, Format::Toml, "sandgate.toml").expect("toml loads");
    let json = r#"{"mcpServers": {}, "sandgate": {
        "profiles": {"reader": {
            "tools": ["memory.read_*", "memory.search_*", "fs.read_*"],
            "deny_tools": ["fs.read_media_file"],
            "net": ["api.github.com:443", "*.example.com"],
            "fs": [{"path": "/srv/data", "write": false}],
            "env": ["GITHUB_TOKEN"],
            "limits": {"timeout_ms": 10000, "max_calls": 200, "executions_per_minute": 120}}},
        "http": {"tokens": [{"token": "${READER_TOKEN}", "profile": "reader", "name": "research-agent"}]},
        "audit": {"path": "/var/log/sandgate-audit.jsonl"}}}"#;
    let json = parse_str(json, Format::McpServersJson, ".mcp.json").expect("json loads");
    let (a, b) = (&toml.profiles[0], &json.profiles[0]);
    assert_eq!(a.tools, b.tools);
    assert_eq!(a.net, b.net);
    assert_eq!(a.fs, b.fs);
    assert_eq!(a.env, b.env);
    assert_eq!(a.limits, b.limits);
    assert_eq!(a.key, "profiles.reader");
    assert_eq!(b.key, "sandgate.profiles.reader");
    assert_eq!(a.limits.max_calls, Some(200));
    assert_eq!(toml.http.tokens, json.http.tokens);
    assert_eq!(toml.http.tokens[0].id(), "research-agent");
    assert_eq!(toml.http.auth, HttpAuth::Tokens);
    assert_eq!(toml.audit, json.audit);
    assert!(!toml.audit.arguments);
}

#[test]
fn without_profiles_the_default_grants_every_tool_and_nothing_else() {
    let config = parse_str("", Format::Toml, "sandgate.toml").expect("loads");
    let profiles = config.access_profiles();
    assert_eq!(profiles.len(), 1);
    let default = &profiles[0];
    assert_eq!(default.name, "default");
    assert!(default.tools.allows_everything());
    assert!(default.net.is_empty() && default.fs.is_empty() && default.env.is_empty());
    // With profiles written but no default, the default grants nothing.
    let config = parse_str(READER, Format::Toml, "sandgate.toml").expect("loads");
    let default = config
        .access_profiles()
        .into_iter()
        .find(|p| p.name == "default")
        .expect("a default");
    assert!(
        !default
            .tools
            .permits(&sandgate_policy::ToolName::plain("memory", "read_graph"))
    );
}

#[test]
fn tokens_resolve_from_the_environment_and_must_be_long() {
    let config = parse_str(READER, Format::Toml, "sandgate.toml").expect("loads");
    let resolved = config
        .resolved(&|v| (v == "READER_TOKEN").then(|| "0123456789abcdef0123".into()))
        .expect("resolves");
    assert_eq!(
        resolved.http.tokens[0].secret,
        TokenSecret::Plain("0123456789abcdef0123".into())
    );
    let err = config.resolved(&|_| None).expect_err("unset").to_string();
    assert!(err.contains("READER_TOKEN"), "{err}");
    let err = config
        .resolved(&|_| Some("short".into()))
        .expect_err("weak")
        .to_string();
    assert!(err.contains("shorter than 16"), "{err}");
    let hashed = parse_str(
        &format!("[[http.tokens]]\ntoken_sha256 = \"{}\"\n", "ab".repeat(32)),
        Format::Toml,
        "sandgate.toml",
    )
    .expect("loads");
    assert_eq!(
        hashed.http.tokens[0].secret,
        TokenSecret::Sha256([0xab; 32])
    );
    assert_eq!(hashed.http.tokens[0].profile, "default");
}

#[test]
fn access_mistakes_name_the_key_and_the_fix() {
    for (text, expect) in [
        (
            "[profiles.r]\ntols = []",
            "unknown key `profiles.r.tols` (did you mean `tools`?)",
        ),
        ("[profiles.r]\ntools = [\"read_file\"]", "names no backend"),
        ("[profiles.r]\nnet = [\"http://x.com\"]", "`profiles.r.net`"),
        ("[profiles.r]\nfs = [{ write = true }]", "has no `path`"),
        (
            "[profiles.r]\nenv = [\"GITHUB_*\"]",
            "patterns are not accepted",
        ),
        (
            "[profiles.r]\nlimits = { max_calls = 0 }",
            "`profiles.r.limits.max_calls`",
        ),
        ("[profiles.\"a b\"]\n", "not a usable profile name"),
        (
            "[[http.tokens]]\nprofile = \"default\"",
            "exactly one of `token` and `token_sha256`",
        ),
        (
            "[[http.tokens]]\ntoken_sha256 = \"abc\"",
            "64 hexadecimal digits",
        ),
        (
            "[profiles.r]\n[[http.tokens]]\ntoken = \"${T}\"\nprofile = \"writer\"",
            "use one of: r",
        ),
        ("[http]\nauth = \"basic\"", "`http.auth` is `basic`"),
        (
            "[http]\nauth = \"none\"\nlisten = \"0.0.0.0:8931\"",
            "not loopback",
        ),
        ("[audit]\npth = \"x\"", "did you mean `path`"),
        (
            "[servers.user]\ncommand = \"x\"",
            "is reserved: stored tools",
        ),
    ] {
        let err = toml_err(text);
        assert!(err.contains(expect), "{text:?}: {err}");
    }
    assert!(
        parse_str(
            "[http]\nauth = \"none\"\nlisten = \"127.0.0.1:8931\"",
            Format::Toml,
            "x"
        )
        .is_ok()
    );
}

#[test]
fn a_token_never_shows_in_debug_output() {
    let plain = sandgate_config::TokenSecret::Plain("very-secret-token-value-123456".into());
    let shown = format!("{plain:?}");
    assert!(!shown.contains("very-secret"), "{shown}");
    assert!(shown.contains("30 characters, hidden"), "{shown}");
    // Before `${VAR}` is resolved there is nothing secret in it, and it helps to see which.
    let unresolved = sandgate_config::TokenSecret::Plain("${READER_TOKEN}".into());
    assert_eq!(format!("{unresolved:?}"), "Plain(\"${READER_TOKEN}\")");
    let digest = sandgate_config::TokenSecret::Sha256([7; 32]);
    assert_eq!(format!("{digest:?}"), "Sha256(<digest>)");
}

#[test]
fn the_engine_is_chosen_per_sandbox_and_profile_and_a_wrong_name_says_which_exist() {
    use sandgate_policy::{Engine, EngineGrant};
    let config = parse_str(
        "[sandbox]\nengine = \"v8\"\ndeno = \"deno\"\n\n[profiles.any]\ntools = [\"*\"]\nengine = \"any\"\n\n[profiles.quick]\ntools = [\"*\"]\nengine = \"quickjs\"\n\n[profiles.plain]\ntools = [\"*\"]\n",
        Format::Toml,
        "t",
    )
    .expect("engines load");
    assert_eq!(config.sandbox.engine, Engine::V8);
    assert_eq!(
        config.sandbox.deno.as_deref(),
        Some(std::path::Path::new("deno"))
    );
    let grant = |name: &str| {
        config
            .access_profiles()
            .into_iter()
            .find(|p| p.name == name)
            .map(|p| p.engine)
            .expect(name)
    };
    assert_eq!(grant("any"), EngineGrant::Either);
    assert_eq!(grant("quick"), EngineGrant::Only(Engine::Quickjs));
    assert_eq!(grant("plain"), EngineGrant::Default);
    assert_eq!(
        parse_str("[profiles.a]\ntools = [\"*\"]\n", Format::Toml, "t")
            .expect("loads")
            .sandbox
            .engine,
        Engine::Quickjs,
        "QuickJS unless the config says otherwise"
    );
    let wrong = toml_err("[sandbox]\nengine = \"spidermonkey\"\n");
    assert!(
        wrong.contains("sandbox.engine")
            && wrong.contains("\"quickjs\"")
            && wrong.contains("\"v8\""),
        "{wrong}"
    );
    let wrong = toml_err("[profiles.a]\ntools = [\"*\"]\nengine = \"both\"\n");
    assert!(
        wrong.contains("profiles.a.engine") && wrong.contains("\"any\""),
        "{wrong}"
    );
    let empty = toml_err("[sandbox]\ndeno = \"\"\n");
    assert!(
        empty.contains("sandbox.deno") && empty.contains("PATH"),
        "{empty}"
    );
}

/// Issue 47, item 10: advice in the config's own syntax, and nothing of sandgate's ignored.
#[test]
fn a_bare_fs_path_and_settings_at_the_top_of_a_json_file_are_named_in_its_syntax() {
    let toml = toml_err("[profiles.docs]\nfs = [\"/srv/docs\"]\n");
    assert!(
        toml.contains("profiles.docs.fs[0]")
            && toml.contains("is a bare path")
            && toml.contains(r#"[{ path = "/srv/docs", write = false }]"#),
        "{toml}"
    );
    let json = parse_str(
        r#"{"mcpServers": {}, "sandgate": {"profiles": {"docs": {"fs": ["/srv/docs"]}}}}"#,
        Format::McpServersJson,
        ".mcp.json",
    )
    .expect_err("a bare path is refused")
    .to_string();
    assert!(
        json.contains(r#"[{"path": "/srv/docs", "write": false}]"#) && !json.contains("path = "),
        "{json}"
    );
    let misplaced = parse_str(
        r#"{"mcpServers": {}, "profiles": {"docs": {"tools": ["*"]}}}"#,
        Format::McpServersJson,
        ".mcp.json",
    )
    .expect_err("profiles at the top is not ignored")
    .to_string();
    assert!(
        misplaced.contains("one of sandgate's settings")
            && misplaced.contains(r#""sandgate": {"profiles": ...}"#),
        "{misplaced}"
    );
    // The client's own keys stay the client's.
    parse_str(
        r#"{"mcpServers": {}, "globalShortcut": "Ctrl+Space", "preferences": {}}"#,
        Format::McpServersJson,
        "claude_desktop_config.json",
    )
    .expect("a client's own keys are left alone");
}

#[test]
fn a_profile_lists_its_languages_and_python_is_on_unless_turned_off() {
    let config = parse_str(
        "[sandbox]\npython = false\n\n[profiles.ts]\ntools = [\"*\"]\nlanguages = [\"typescript\"]\n\n[profiles.both]\ntools = [\"*\"]\n",
        Format::Toml,
        "t",
    )
    .expect("languages load");
    assert!(
        !config.sandbox.python,
        "[sandbox] python = false turns the engine off"
    );
    let languages = |name: &str| {
        config
            .access_profiles()
            .into_iter()
            .find(|p| p.name == name)
            .map(|p| p.languages)
            .expect(name)
    };
    assert!(languages("ts").typescript && !languages("ts").python);
    assert!(languages("both").typescript && languages("both").python);
    assert!(
        parse_str("[profiles.a]\ntools = [\"*\"]\n", Format::Toml, "t")
            .expect("loads")
            .sandbox
            .python,
        "Python runs unless the config turns it off"
    );
    let wrong = toml_err("[profiles.a]\ntools = [\"*\"]\nlanguages = [\"ruby\"]\n");
    assert!(
        wrong.contains("profiles.a.languages") && wrong.contains("\"python\""),
        "{wrong}"
    );
    let empty = toml_err("[profiles.a]\ntools = [\"*\"]\nlanguages = []\n");
    assert!(
        empty.contains("profiles.a.languages") && empty.contains("empty"),
        "{empty}"
    );
}

#[test]
fn which_scripts_a_person_approves_is_the_profiles_else_the_configs_and_a_bad_word_says_the_words()
{
    use sandgate_policy::ScriptApproval;
    let config = parse_str(
        "[approvals]\nscripts = \"writes\"\n\n[profiles.ops]\ntools = [\"*\"]\napprove_scripts = \"always\"\n\n[profiles.rest]\ntools = [\"*\"]\n",
        Format::Toml,
        "t",
    )
    .expect("script approvals load");
    assert_eq!(config.approvals.scripts, ScriptApproval::Writes);
    let rule = |name: &str| {
        config
            .access_profiles()
            .into_iter()
            .find(|p| p.name == name)
            .map(|p| p.approve_scripts)
            .expect(name)
    };
    assert_eq!(rule("ops"), Some(ScriptApproval::Always));
    assert_eq!(
        rule("rest"),
        None,
        "a profile that does not say follows [approvals] scripts"
    );
    let unset = parse_str("[profiles.a]\ntools = [\"*\"]\n", Format::Toml, "t").expect("loads");
    assert_eq!(unset.approvals.scripts, ScriptApproval::Never);
    let wrong = toml_err("[profiles.a]\ntools = [\"*\"]\napprove_scripts = \"sometimes\"\n");
    assert!(
        wrong.contains("profiles.a.approve_scripts") && wrong.contains("\"writes\""),
        "{wrong}"
    );
    let wrong = toml_err("[approvals]\nscripts = true\n");
    assert!(wrong.contains("approvals.scripts"), "{wrong}");
}
