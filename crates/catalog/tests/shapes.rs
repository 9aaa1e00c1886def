//! Learned return shapes: what they declare, that they never keep a value, and that no backend
//! can grow them past their bounds.

#![allow(clippy::expect_used)]

use sandgate_catalog::{Catalog, LearnedShape, MAX_SHAPE_NODES, Observed, ToolSpec, TsDecl};
use serde_json::{Value, json};

fn learned(results: &[Value]) -> LearnedShape {
    let mut shape = LearnedShape::default();
    for (i, result) in results.iter().enumerate() {
        shape.observe(result, 1_700_000_000_000 + i as i64);
    }
    shape
}

fn declared(shape: &LearnedShape) -> TsDecl {
    let spec: ToolSpec = serde_json::from_value(json!({
        "backend": "gh",
        "name": "list_issues",
        "input_schema": {"type": "object", "properties": {}}
    }))
    .expect("a spec");
    let catalog = Catalog::new(vec![spec]);
    let observed = Observed {
        schema: shape.schema(),
        calls: shape.calls(),
        since: "2026-11-27".into(),
    };
    TsDecl::for_entry_observed(&catalog.entries()[0], Some(&observed))
}

#[test]
fn keys_kinds_optional_keys_and_a_small_vocabulary_are_declared() {
    let issue = |n: u64, state: &str, labels: Value| json!({"number": n, "title": format!("bug {n}"), "state": state, "labels": labels});
    let shape = learned(&[
        json!([
            issue(1, "open", json!([])),
            issue(2, "closed", json!(["x"]))
        ]),
        json!([issue(3, "open", json!(null)), {"number": 4, "title": "t", "state": "closed"}]),
    ]);
    let decl = declared(&shape);
    assert!(
        decl.signature.contains(
            "Promise<{ labels?: string[] | null; number: number; state: \"closed\" | \"open\"; title: string; }[]>"
        ),
        "{}",
        decl.signature
    );
    assert!(
        decl.signature
            .contains("observed in 2 calls since 2026-11-27")
    );
    assert!(decl.declaration.contains("@returns observed in 2 calls"));
    // An array of objects is a type, not an interface (which would not parse).
    assert!(
        decl.declaration.contains("type GhListIssuesOutput = {"),
        "{}",
        decl.declaration
    );
}

#[test]
fn a_declared_output_schema_wins_over_a_learned_shape() {
    let spec: ToolSpec = serde_json::from_value(json!({
        "backend": "b", "name": "t",
        "input_schema": {"type": "object"},
        "output_schema": {"type": "object", "properties": {"declared": {"type": "string"}}}
    }))
    .expect("a spec");
    let catalog = Catalog::new(vec![spec]);
    let shape = learned(&[json!({"seen": 1})]);
    let observed = Observed {
        schema: shape.schema(),
        calls: 1,
        since: "2026-11-27".into(),
    };
    let decl = TsDecl::for_entry_observed(&catalog.entries()[0], Some(&observed));
    assert!(
        decl.signature.contains("declared?: string"),
        "{}",
        decl.signature
    );
    assert!(!decl.signature.contains("seen") && !decl.signature.contains("observed"));
}

/// Secrets a backend might return, as values and as keys.
const SECRETS: [&str; 8] = [
    "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "sk-live-abcdefghijklmnopqrstuvwx",
    "hunter",
    "correcthorsebatterystaple",
    "eyJhbGciOiJSUzI1NiJ9.payload.sig",
    "Bearer abcdef",
    "alice@example.com",
    "4111111111111111",
];

#[test]
fn no_value_seen_appears_in_a_declaration_or_what_is_stored() {
    let mut results = Vec::new();
    for round in 0..5 {
        for secret in SECRETS {
            results.push(json!({
                "password": secret,
                "note": secret,
                "items": [{"value": secret}, {"value": secret}],
                "by_key": {secret: {"ok": true}},
                "round": round,
            }));
        }
    }
    let shape = learned(&results);
    let shown = format!(
        "{}\n{}\n{}",
        declared(&shape).declaration,
        declared(&shape).signature,
        shape.to_json()
    );
    for secret in SECRETS {
        assert!(!shown.contains(secret), "{secret} leaked into:\n{shown}");
    }
    // A password that repeats is still no enum, though it reads as a word.
    assert!(shown.contains("password: string"), "{shown}");
    // Keys that are data make a map, whose keys are not kept.
    assert!(
        shown.contains("by_key: Record<string, { ok: boolean; }>"),
        "{shown}"
    );
}

#[test]
fn a_word_seen_once_is_kept_only_as_a_hash() {
    let shape = learned(&[
        json!({"kind": "rare"}),
        json!({"kind": "common"}),
        json!({"kind": "common"}),
    ]);
    assert!(!shape.to_json().contains("rare"), "{}", shape.to_json());
    assert!(shape.to_json().contains("common"));
    // With a value seen once, the vocabulary is not known whole: a plain string.
    assert!(declared(&shape).signature.contains("kind: string"));
}

#[test]
fn a_backend_with_a_new_key_set_every_call_cannot_grow_the_shape() {
    let mut shape = LearnedShape::default();
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut largest = 0;
    for call in 0..4_000 {
        let mut object = serde_json::Map::new();
        for _ in 0..8 {
            let key = format!("k{}", next() % 1_000_000_000);
            object.insert(key, json!({ format!("f{}", next() % 99): [1, {"x": "y"}] }));
        }
        // Deep nesting too.
        let mut deep = json!(1);
        for _ in 0..50 {
            deep = json!({ "d": deep });
        }
        shape.observe(&json!({"o": object, "deep": deep}), call);
        if call % 100 == 0 {
            largest = largest.max(shape.to_json().len());
        }
    }
    assert!(shape.nodes() <= MAX_SHAPE_NODES, "{} nodes", shape.nodes());
    assert!(largest < 64 * 1024, "{largest} bytes stored");
    assert_eq!(shape.calls(), 4_000);
}

#[test]
fn merging_is_the_same_either_way_and_stays_bounded() {
    let a = learned(&[json!({"a": 1, "s": "open"}), json!({"a": 2, "s": "open"})]);
    let b = learned(&[
        json!({"b": [true], "s": "closed"}),
        json!({"s": "closed", "a": null}),
    ]);
    let mut ab = a.clone();
    ab.merge(&b);
    let mut ba = b.clone();
    ba.merge(&a);
    assert_eq!(ab.schema(), ba.schema());
    assert_eq!(ab.calls(), 4);
    assert_eq!(
        ab.schema(),
        json!({"type": "object", "properties": {
            "a": {"anyOf": [{"type": "number"}, {"type": "null"}]},
            "b": {"type": "array", "items": {"type": "boolean"}},
            "s": {"enum": ["closed", "open"]}
        }, "required": ["s"]})
    );
    // A stored shape read back is the same shape; text that is not one is refused.
    assert_eq!(LearnedShape::from_json(&ab.to_json()), Some(ab));
    assert_eq!(LearnedShape::from_json("{\"shape\": 5}"), None);
}

#[test]
fn a_shape_that_forgets_its_values_keeps_its_structure_and_no_word() {
    let login =
        |name: &str| json!({"login": name, "plan": "pro", "repos": [{"visibility": "private"}]});
    let results: Vec<Value> = ["ada", "alan", "ada", "alan", "ada"]
        .iter()
        .map(|n| login(n))
        .collect();
    let mut shape = learned(&results);
    assert!(
        declared(&shape).signature.contains("\"ada\""),
        "the words are kept before"
    );
    shape.forget_values();
    let stored = shape.to_json();
    let signature = declared(&shape).signature;
    for word in ["ada", "alan", "pro", "private"] {
        assert!(
            !signature.contains(&format!("\"{word}\"")),
            "{word} in {signature}"
        );
        assert!(
            !stored.contains(&format!("\"{word}\"")),
            "{word} in {stored}"
        );
    }
    assert!(
        signature.contains("login: string; plan: string; repos: { visibility: string; }[];"),
        "{signature}"
    );
    // Merged with a shape that kept words (another replica, the store from before), it keeps
    // none of them either way.
    let mut other = learned(&results);
    other.merge(&shape);
    assert!(!declared(&other).signature.contains("\"ada\""));
    shape.merge(&learned(&results));
    assert!(!declared(&shape).signature.contains("\"ada\""));
}
