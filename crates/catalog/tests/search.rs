//! Search ranking on realistic tool sets.

#![allow(clippy::expect_used)] // test helpers panic on broken fixtures by design

use sandgate_catalog::{Catalog, ToolSpec};
use serde_json::json;

fn tool(backend: &str, name: &str, description: &str, params: &[&str]) -> ToolSpec {
    let props: serde_json::Map<String, serde_json::Value> = params
        .iter()
        .map(|p| (p.to_string(), json!({"type": "string"})))
        .collect();
    ToolSpec {
        backend: backend.into(),
        name: name.into(),
        description: Some(description.into()),
        input_schema: json!({"type": "object", "properties": props}),
        output_schema: None,
        annotations: None,
        origin: Default::default(),
    }
}

/// Names and descriptions as the three reference servers publish them.
fn reference_catalog() -> Catalog {
    Catalog::new(vec![
        tool(
            "everything",
            "echo",
            "Echoes back the input string",
            &["message"],
        ),
        tool(
            "everything",
            "get-sum",
            "Returns the sum of two numbers",
            &["a", "b"],
        ),
        tool(
            "everything",
            "get-env",
            "Returns all environment variables, helpful for debugging MCP server configuration",
            &[],
        ),
        tool(
            "everything",
            "get-tiny-image",
            "Returns a tiny MCP logo image.",
            &[],
        ),
        tool(
            "everything",
            "trigger-long-running-operation",
            "Demonstrates a long running operation with progress updates.",
            &["duration", "steps"],
        ),
        tool(
            "memory",
            "create_entities",
            "Create multiple new entities in the knowledge graph",
            &["entities"],
        ),
        tool(
            "memory",
            "add_observations",
            "Add new observations to existing entities in the knowledge graph",
            &["observations"],
        ),
        tool(
            "memory",
            "read_graph",
            "Read the entire knowledge graph",
            &[],
        ),
        tool(
            "memory",
            "search_nodes",
            "Search for nodes in the knowledge graph based on a query",
            &["query"],
        ),
        tool(
            "filesystem",
            "read_text_file",
            "Read the complete contents of a file from the file system as text.",
            &["path", "head", "tail"],
        ),
        tool(
            "filesystem",
            "list_directory",
            "Get a detailed listing of all files and directories in a specified path.",
            &["path"],
        ),
        tool(
            "filesystem",
            "search_files",
            "Recursively search for files and directories matching a pattern.",
            &["path", "pattern"],
        ),
    ])
}

fn top(catalog: &Catalog, query: &str) -> Vec<String> {
    catalog
        .search_index()
        .search(query, 3)
        .iter()
        .map(|h| catalog.entries()[h.entry].qualified.clone())
        .collect()
}

#[test]
fn natural_queries_rank_the_right_tool_first() {
    let c = reference_catalog();
    assert_eq!(top(&c, "sum two numbers")[0], "everything.get-sum");
    assert_eq!(
        top(&c, "create entities in knowledge graph")[0],
        "memory.create_entities"
    );
    assert_eq!(top(&c, "read a file")[0], "filesystem.read_text_file");
    assert_eq!(top(&c, "list directory")[0], "filesystem.list_directory");
    assert_eq!(top(&c, "environment variables")[0], "everything.get-env");
}

#[test]
fn typos_and_prefixes_still_find_tools() {
    let c = reference_catalog();
    assert_eq!(
        top(&c, "sum two nubmers")[0],
        "everything.get-sum",
        "transposition"
    );
    assert_eq!(
        top(&c, "entites")[0],
        "memory.create_entities",
        "dropped letter"
    );
    assert_eq!(top(&c, "observ")[0], "memory.add_observations", "prefix");
}

#[test]
fn ranking_is_deterministic_and_ties_break_by_name() {
    let c = Catalog::new(vec![
        tool("b", "same", "identical text", &[]),
        tool("a", "same", "identical text", &[]),
    ]);
    assert_eq!(top(&c, "identical"), ["a.same", "b.same"]);
    assert_eq!(
        top(&reference_catalog(), "graph"),
        top(&reference_catalog(), "graph")
    );
    assert!(top(&c, "zzzz qqqq").is_empty());
}
