//! Snapshot tests of every stage of the output pipeline.

use sandgate_output::{OutputConfig, shape, summarize_json, truncate};
use serde_json::json;

#[test]
fn uniform_array_summary() {
    let items: Vec<_> = (0..40)
        .map(|i| json!({"id": i, "title": format!("Issue {i}"), "state": "open"}))
        .collect();
    insta::assert_snapshot!(summarize_json(&json!(items), 2));
}

#[test]
fn key_path_outline() {
    let value = json!({"repo": {"name": "sandgate", "stars": 12, "topics": ["mcp", "rust"]}, "readme": "x".repeat(300), "ok": true});
    insta::assert_snapshot!(summarize_json(&value, 3));
}

#[test]
fn truncation_on_line_boundaries() {
    let text: String = (1..=200)
        .map(|i| format!("line {i}: {}\n", "é".repeat(i % 7)))
        .collect();
    insta::assert_snapshot!(truncate(&text, 300));
}

#[test]
fn truncation_of_one_long_line() {
    insta::assert_snapshot!(truncate(&"0123456789€".repeat(100), 50));
}

#[test]
fn whole_pipeline_with_footer() {
    let items: Vec<_> = (0..500)
        .map(|i| json!({"id": i, "name": format!("entity-{i}"), "observations": ["a", "b"]}))
        .collect();
    let text = serde_json::to_string(&items).unwrap_or_default();
    let shaped = shape(&text, None, 2_000, &OutputConfig::default());
    // Fitted to the budget: no truncation after it, and as many rows as fit (it used to be 3).
    assert_eq!(shaped.stages, ["json_summary"]);
    assert!(shaped.reduced());
    let body = shaped.text.split("\n[Output: ").next().unwrap_or_default();
    assert!(body.chars().count() <= 2_000, "{}", body.len());
    let parsed: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    assert!(
        parsed["first"].as_array().map_or(0, Vec::len) > 10,
        "{body}"
    );
    insta::assert_snapshot!(shaped.text);
}

#[test]
fn results_within_the_budget_are_never_summarised() {
    let items: Vec<_> = (0..200)
        .map(|i| json!({"id": i, "title": format!("Issue {i}: printer jams"), "state": "open"}))
        .collect();
    let text = serde_json::to_string(&items).unwrap_or_default();
    assert!(text.len() > 10_240, "larger than the old summary threshold");
    let shaped = shape(&text, None, 100_000, &OutputConfig::default());
    assert!(!shaped.reduced(), "{:?}", shaped.stages);
    assert_eq!(shaped.text, text);
}

#[test]
fn every_list_in_a_summary_is_bounded() {
    let items: Vec<_> = (0..50_000).map(|i| json!({"id": i, "v": i})).collect();
    let summary = summarize_json(&json!(items), 3);
    assert!(summary.len() < 2_000, "{} bytes", summary.len());
    assert!(summary.contains("\"rest_not_listed\": 49897"), "{summary}");
}

#[test]
fn intent_filter_then_footer() {
    let mut text = String::new();
    for i in 0..60 {
        text.push_str(&format!("Report {i}: shipping volumes were steady across regions and nothing unusual happened.\n\n"));
    }
    text.push_str("Report 60: the invoice for ACME is overdue by 45 days.\n\n");
    let shaped = shape(
        &text,
        Some("overdue invoice"),
        200_000,
        &OutputConfig::default(),
    );
    assert_eq!(shaped.stages, ["intent"]);
    insta::assert_snapshot!(shaped.text);
}

#[test]
fn small_outputs_pass_through_unchanged() {
    let shaped = shape("{\"a\": 1}", Some("a"), 100, &OutputConfig::default());
    assert_eq!(shaped.text, "{\"a\": 1}");
    assert!(!shaped.reduced());
}
