//! `approve` on profiles and backends, and `[approvals]`: read as written, and bad values
//! refused with the key and a fix.

use sandgate_config::{Config, Format, parse_str};

fn parse(text: &str) -> Result<Config, String> {
    parse_str(text, Format::Toml, "sandgate.toml").map_err(|e| e.to_string())
}

#[test]
fn approvals_have_defaults_and_bad_values_name_the_key() {
    let config =
        parse("[approvals]\ntimeout = \"90s\"\nmax_waiting_per_caller = 3\n").expect("parses");
    assert_eq!(config.approvals.timeout.as_secs(), 90);
    assert_eq!(config.approvals.max_waiting_per_caller, 3);
    assert_eq!(
        parse("").expect("parses").approvals,
        sandgate_config::ApprovalsConfig::default()
    );
    let bad = parse("[approvals]\ntimeout = \"0s\"\n").expect_err("zero");
    assert!(bad.contains("approvals.timeout"), "{bad}");
    let bad = parse("[approvals]\nwait = 3\n").expect_err("unknown");
    assert!(bad.contains("approvals"), "{bad}");
}

#[test]
fn profiles_and_backends_name_the_tools_that_need_approval() {
    let config = parse(
        "[servers.github]\ncommand = \"gh\"\napprove = [\"merge_*\"]\n\n[profiles.ops]\ntools = [\"*\"]\napprove = [\"db.delete_*\"]\n",
    )
    .expect("parses");
    assert_eq!(
        config.backends[0].approve,
        vec!["github.merge_*".to_string()]
    );
    let ops = config
        .profiles
        .iter()
        .find(|p| p.name == "ops")
        .expect("ops");
    assert_eq!(ops.approve, vec!["db.delete_*".to_string()]);
    let bad = parse("[profiles.ops]\ntools = [\"*\"]\napprove = [\"delete_rows\"]\n")
        .expect_err("no backend");
    assert!(bad.contains("profiles.ops.approve"), "{bad}");
}

#[test]
fn the_longest_execution_is_the_operators_to_raise_for_long_runs() {
    let config = parse("[sandbox]\ntimeout = \"10m\"\n").expect("parses");
    assert_eq!(config.sandbox.timeout.map(|t| t.as_secs()), Some(600));
    assert_eq!(parse("").expect("parses").sandbox.timeout, None);
    for bad in ["\"10ms\"", "\"48h\""] {
        let refused = parse(&format!("[sandbox]\ntimeout = {bad}\n")).expect_err(bad);
        assert!(refused.contains("sandbox.timeout"), "{refused}");
    }
}
