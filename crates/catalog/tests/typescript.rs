//! Snapshot tests of TypeScript declarations generated from JSON Schema.

#![allow(clippy::expect_used)] // test helpers panic on broken fixtures by design

use sandgate_catalog::{Catalog, ToolSpec, TsDecl};
use serde_json::{Value, json};

fn decl(
    backend: &str,
    name: &str,
    description: Option<&str>,
    input: Value,
    output: Option<Value>,
) -> TsDecl {
    let catalog = Catalog::new(vec![ToolSpec {
        backend: backend.into(),
        name: name.into(),
        description: description.map(str::to_string),
        input_schema: input,
        output_schema: output,
        annotations: None,
        origin: Default::default(),
    }]);
    TsDecl::for_entry(&catalog.entries()[0])
}

fn render(d: &TsDecl) -> String {
    format!(
        "// signature\n{}\n// example\n{}\n// declaration\n{}",
        d.signature, d.example, d.declaration
    )
}

#[test]
fn memory_create_entities() {
    // The real schema of @modelcontextprotocol/server-memory's create_entities.
    let d = decl(
        "memory",
        "create_entities",
        Some("Create multiple new entities in the knowledge graph"),
        json!({"type": "object", "properties": {"entities": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string", "description": "The name of the entity"},
            "entityType": {"type": "string", "description": "The type of the entity"},
            "observations": {"type": "array", "items": {"type": "string"}, "description": "An array of observation contents associated with the entity"}
        }, "required": ["name", "entityType", "observations"], "additionalProperties": false}}}, "required": ["entities"]}),
        None,
    );
    insta::assert_snapshot!(render(&d));
}

#[test]
fn enums_unions_optional_and_quoted_keys() {
    let d = decl(
        "my-server",
        "get-sum",
        Some("Adds numbers.\nSecond line of detail with */ inside."),
        json!({"type": "object", "properties": {
            "a": {"type": "number", "description": "First"},
            "b": {"type": "integer"},
            "mode": {"enum": ["fast", "exact"]},
            "tag": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "either": {"oneOf": [{"type": "object", "properties": {"x": {"type": "number"}}}, {"type": "array", "items": {"type": ["string", "number"]}}]},
            "content-type": {"type": "string", "const": "json"},
            "meta": {"type": "object", "additionalProperties": {"type": "string"}},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}]},
            "nullable": {"type": "string", "nullable": true}
        }, "required": ["a", "b"]}),
        Some(
            json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}),
        ),
    );
    insta::assert_snapshot!(render(&d));
}

#[test]
fn recursive_refs_become_named_types() {
    let d = decl(
        "tree",
        "insert",
        None,
        json!({"type": "object", "properties": {"node": {"$ref": "#/$defs/Node"}}, "required": ["node"],
            "$defs": {"Node": {"type": "object", "properties": {
                "value": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
            }, "required": ["value"]}}}),
        None,
    );
    insta::assert_snapshot!(render(&d));
}

#[test]
fn no_schema_and_all_optional_tools() {
    let none = decl("x", "ping", Some("Ping"), json!({}), None);
    let empty = decl(
        "x",
        "list",
        None,
        json!({"type": "object", "properties": {}}),
        None,
    );
    let optional = decl(
        "x",
        "find",
        None,
        json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        None,
    );
    insta::assert_snapshot!(format!(
        "{}\n{}\n{}",
        render(&none),
        render(&empty),
        render(&optional)
    ));
}

#[test]
fn hostile_schemas_do_not_panic() {
    let deep = (0..200).fold(
        json!({"type": "string"}),
        |inner, _| json!({"type": "object", "properties": {"x": inner}}),
    );
    for schema in [
        json!(null),
        json!("string"),
        json!({"$ref": "#/nope"}),
        json!({"$ref": "http://x"}),
        json!({"$ref": "#"}),
        json!({"type": 5}),
        json!({"enum": []}),
        deep,
    ] {
        let d = decl("x", "y", None, schema, None);
        assert!(d.signature.starts_with("x.y("), "{}", d.signature);
    }
}

#[test]
fn whole_catalog_declarations() {
    let catalog = Catalog::new(vec![
        ToolSpec {
            backend: "everything".into(),
            name: "echo".into(),
            description: Some("Echoes back the input".into()),
            input_schema: json!({"type": "object", "properties": {"message": {"type": "string", "description": "Message to echo"}}, "required": ["message"]}),
            output_schema: None,
            annotations: None,
            origin: Default::default(),
        },
        ToolSpec {
            backend: "everything".into(),
            name: "get-sum".into(),
            description: Some("Returns the sum of two numbers".into()),
            input_schema: json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
            output_schema: None,
            annotations: None,
            origin: Default::default(),
        },
        ToolSpec {
            backend: "my-server".into(),
            name: "delete".into(),
            description: None,
            input_schema: json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
            output_schema: None,
            annotations: None,
            origin: Default::default(),
        },
    ]);
    insta::assert_snapshot!(catalog.declarations());
}

/// Issue 47, item 14: two tools whose names read alike in Pascal case (`getSum`, `get_sum`,
/// `get-sum`) each declare types of their own names in `types.d.ts` (they used to declare
/// `HostileGetSumInput` and `HostileGetSumOutput` twice, and `tsc` refused the file).
#[test]
fn tools_whose_names_read_alike_get_type_names_of_their_own() {
    let tool = |name: &str| ToolSpec {
        backend: "hostile".into(),
        name: name.into(),
        description: None,
        input_schema: json!({"type": "object", "properties": {"a": {"type": "number"}}}),
        output_schema: Some(json!({"type": "object", "properties": {"sum": {"type": "number"}}})),
        annotations: None,
        origin: Default::default(),
    };
    let catalog = Catalog::new(vec![tool("getSum"), tool("get_sum"), tool("get-sum")]);
    let declarations = catalog.declarations();
    let mut declared: Vec<&str> = declarations
        .lines()
        .filter_map(|line| {
            let line = line.trim_start();
            line.strip_prefix("interface ")
                .or_else(|| line.strip_prefix("type "))
                .and_then(|rest| rest.split([' ', '<']).next())
        })
        .collect();
    let all = declared.len();
    declared.sort_unstable();
    declared.dedup();
    assert_eq!(
        declared.len(),
        all,
        "a type is declared twice:\n{declarations}"
    );
    assert_eq!(all, 6, "{declarations}");
    // Each function names its own types.
    for function in declarations
        .lines()
        .filter(|l| l.trim_start().starts_with("function "))
    {
        let input = function
            .split("args")
            .nth(1)
            .map(|r| r.trim_start_matches('?').trim_start_matches(": "))
            .and_then(|r| r.split(')').next());
        assert!(input.is_some_and(|i| declared.contains(&i)), "{function}");
    }
}
