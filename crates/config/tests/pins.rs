//! `pin` on backends and `[gateway] pin`: how tool definitions are pinned (issue 49), read as
//! written, with the gateway's default for entries that do not say, and bad values refused
//! with the key and a fix.

use sandgate_config::{Config, Format, PinMode, parse_str};

fn parse(text: &str) -> Result<Config, String> {
    parse_str(text, Format::Toml, "sandgate.toml").map_err(|e| e.to_string())
}

fn modes(config: &Config) -> Vec<(String, PinMode)> {
    config
        .backends
        .iter()
        .map(|b| (b.name.clone(), b.pin))
        .collect()
}

#[test]
fn backends_pin_on_first_use_unless_they_or_the_gateway_say_otherwise() {
    let config = parse(
        "[servers.a]\ncommand = \"x\"\n[servers.b]\ncommand = \"x\"\npin = false\n[servers.c]\ncommand = \"x\"\npin = \"review\"\n",
    )
    .expect("parses");
    assert_eq!(
        modes(&config),
        vec![
            ("a".into(), PinMode::FirstUse),
            ("b".into(), PinMode::Off),
            ("c".into(), PinMode::Review)
        ]
    );
    let config = parse(
        "[gateway]\npin = \"review\"\n[servers.a]\ncommand = \"x\"\n[servers.b]\ncommand = \"x\"\npin = true\n",
    )
    .expect("parses");
    assert_eq!(
        modes(&config),
        vec![
            ("a".into(), PinMode::Review),
            ("b".into(), PinMode::FirstUse)
        ]
    );
    let json = parse_str(
        r#"{"mcpServers": {"a": {"command": "x"}}, "sandgate": {"gateway": {"pin": "review"}}}"#,
        Format::McpServersJson,
        "mcp.json",
    )
    .expect("parses");
    assert_eq!(modes(&json), vec![("a".into(), PinMode::Review)]);
}

#[test]
fn bad_pin_values_name_the_key_and_the_choices() {
    let bad = parse("[servers.a]\ncommand = \"x\"\npin = \"sometimes\"\n").expect_err("bad");
    assert!(
        bad.contains("servers.a.pin") && bad.contains("\"review\""),
        "{bad}"
    );
    let bad = parse("[gateway]\npin = false\n").expect_err("off for all");
    assert!(
        bad.contains("gateway.pin") && bad.contains("on a backend of its own"),
        "{bad}"
    );
}
