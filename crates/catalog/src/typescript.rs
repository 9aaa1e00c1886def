//! TypeScript declarations generated from tool JSON Schemas.
//!
//! Models write better code against a typed signature than against raw JSON Schema, and the
//! declarations are far shorter. Each tool becomes an input interface, an output type when
//! the tool declares one, and a function in its backend's namespace, with descriptions as
//! JSDoc. `$ref`s to `$defs`/`definitions` become named types, which also makes recursive
//! schemas finite. Anything the generator cannot express becomes `unknown`, never an error:
//! backends send whatever schemas they like.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use serde_json::{Map, Value};

use crate::catalog::{Catalog, Entry};
use crate::names::pascal_case;
use crate::shapes::Observed;

/// Inline nesting beyond this depth is rendered as `unknown` (it only happens with
/// pathological schemas; recursion through `$ref` is handled by named types).
const MAX_DEPTH: usize = 24;

/// How much of a declaration to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Detail {
    /// One-line call signature with inline argument types.
    Signature,
    /// Full declaration: named types, JSDoc for every property.
    #[default]
    Full,
}

/// A generated declaration for one tool.
#[derive(Debug, Clone, PartialEq)]
pub struct TsDecl {
    /// `backend.tool(args: {...}): Promise<...>` on one line.
    pub signature: String,
    /// The full declaration text.
    pub declaration: String,
    /// An example call with placeholder arguments for the required parameters.
    pub example: String,
}

impl TsDecl {
    /// Generates the declaration for one catalog entry.
    pub fn for_entry(entry: &Entry) -> TsDecl {
        TsDecl::for_entry_observed(entry, None)
    }

    /// Generates the declaration for one catalog entry whose results were seen to have the
    /// shape `observed`; a declared output schema wins over it.
    pub fn for_entry_observed(entry: &Entry, observed: Option<&Observed>) -> TsDecl {
        let prefix = type_prefix(entry);
        let mut inline = Generator::new(&entry.spec.input_schema, &prefix, Detail::Signature);
        inline.taken = reserved_names(std::iter::once(entry));
        let inline_args = inline.render(&entry.spec.input_schema, 0);
        let observed = observed.filter(|_| entry.spec.output_schema.is_none());
        let inline_out = output_schema(entry, observed)
            .map(|s| Generator::new(s, &prefix, Detail::Signature).render(s, 0))
            .unwrap_or_else(|| "unknown".into());
        let args_opt = if all_optional(&entry.spec.input_schema) {
            "?"
        } else {
            ""
        };
        let mut signature = format!(
            "{}(args{args_opt}: {inline_args}): Promise<{inline_out}>",
            entry.js_qualified()
        );
        if let Some(observed) = observed {
            let _ = write!(signature, " // returns: {}", observed_note(observed));
        }

        let declaration = format!(
            "declare namespace {} {{\n{}}}\n",
            entry.js_backend,
            indent(&namespace_body(
                entry,
                &prefix,
                observed,
                &mut reserved_names(std::iter::once(entry))
            ))
        );
        TsDecl {
            signature,
            declaration,
            example: example_call(entry),
        }
    }
}

/// The schema a tool's results are declared with: its own output schema, or else the shape its
/// results were seen to have.
pub(crate) fn output_schema<'a>(
    entry: &'a Entry,
    observed: Option<&'a Observed>,
) -> Option<&'a Value> {
    entry
        .spec
        .output_schema
        .as_ref()
        .or(observed.map(|o| &o.schema))
}

/// "observed in 12 calls since 2026-11-27", said of a learned return type.
fn observed_note(observed: &Observed) -> String {
    format!(
        "observed in {} call{} since {} (the backend declares no output schema)",
        observed.calls,
        if observed.calls == 1 { "" } else { "s" },
        observed.since
    )
}

/// The start of a tool's type names (`EverythingGetSum`): from its identifiers, which are
/// unique, so tools whose names sanitize alike (`get-sum`, `get_sum`) get distinct types.
fn type_prefix(entry: &Entry) -> String {
    format!(
        "{}{}",
        pascal_case(&entry.js_backend),
        pascal_case(&entry.js_tool)
    )
}

/// The `Input` and `Output` type names of `entries`, which their named types must not take.
fn reserved_names<'e>(entries: impl IntoIterator<Item = &'e Entry>) -> BTreeSet<String> {
    reserved_for(entries.into_iter().map(type_prefix))
}

/// The `Input` and `Output` type names of tools with these type prefixes.
fn reserved_for(prefixes: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    prefixes
        .into_iter()
        .flat_map(|prefix| [format!("{prefix}Input"), format!("{prefix}Output")])
        .collect()
}

/// Each tool's type prefix within one backend's namespace: two tools whose names read alike
/// in Pascal case (`getSum` and `get_sum`) would declare `…GetSumInput` twice, which does not
/// type-check; the later one in name order takes the next free number (`…GetSum2Input`).
fn namespace_prefixes<'e>(entries: impl IntoIterator<Item = &'e Entry>) -> Vec<String> {
    let mut given = BTreeSet::new();
    entries
        .into_iter()
        .map(|entry| {
            let base = type_prefix(entry);
            let mut prefix = base.clone();
            let mut n = 2;
            while !given.insert(prefix.clone()) {
                prefix = format!("{base}{n}");
                n += 1;
            }
            prefix
        })
        .collect()
}

/// The members one tool contributes to its backend's namespace: its named types, then the
/// function with its JSDoc. `taken` holds the type names the namespace has already given out;
/// this tool's named types take names outside it (two `$defs` whose names read alike, or an
/// input's and an output's of the same name, or one named like another tool's `Input`, each
/// get a name of their own: declarations that merge or repeat do not type-check).
fn namespace_body(
    entry: &Entry,
    prefix: &str,
    observed: Option<&Observed>,
    taken: &mut BTreeSet<String>,
) -> String {
    let observed = observed.filter(|_| entry.spec.output_schema.is_none());
    let input_name = format!("{prefix}Input");
    let mut body = String::new();
    let mut input = Generator::new(&entry.spec.input_schema, prefix, Detail::Full);
    input.taken = std::mem::take(taken);
    let input_ty = input.render(&entry.spec.input_schema, 0);
    write_type(&mut body, &input_name, &input_ty);
    input.write_defs(&mut body);
    *taken = std::mem::take(&mut input.taken);
    let out_ty = match output_schema(entry, observed) {
        Some(schema) => {
            let output_name = format!("{prefix}Output");
            let mut output = Generator::new(schema, prefix, Detail::Full);
            output.taken = std::mem::take(taken);
            let ty = output.render(schema, 0);
            write_type(&mut body, &output_name, &ty);
            output.write_defs(&mut body);
            *taken = std::mem::take(&mut output.taken);
            output_name
        }
        None => "unknown".to_string(),
    };
    let mut doc = entry.spec.description.clone().unwrap_or_default();
    if let Some(observed) = observed {
        let _ = write!(doc, "\n@returns {}", observed_note(observed));
    }
    if entry.js_qualified() != entry.qualified {
        let _ = write!(
            doc,
            "\n@tool {} (call as {})",
            entry.qualified,
            entry.js_qualified()
        );
    }
    write_jsdoc(&mut body, &doc, "");
    let args_opt = if all_optional(&entry.spec.input_schema) {
        "?"
    } else {
        ""
    };
    let _ = writeln!(
        body,
        "function {}(args{args_opt}: {input_name}): Promise<{out_ty}>;",
        entry.js_tool
    );
    body
}

/// Whether `body` is one object literal type (`{ ... }`), which can be an interface, rather than
/// an array of one, or a union that starts with one (`{ ... }[]`, `{ ... } | string`).
fn is_one_object_literal(body: &str) -> bool {
    if !body.starts_with('{') || !body.ends_with('}') {
        return false;
    }
    let (mut depth, mut quoted, mut escaped) = (0usize, false, false);
    for (at, c) in body.char_indices() {
        if quoted {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => quoted = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 && at + 1 != body.len() {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

/// Indents every non-empty line by two spaces.
fn indent(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.lines() {
        if !line.is_empty() {
            out.push_str("  ");
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `types.d.ts` for a whole catalog: one namespace per backend.
pub fn catalog_declarations(catalog: &Catalog) -> String {
    catalog_declarations_observed(catalog, &|_| None)
}

/// `types.d.ts` for a whole catalog, with the return shapes `observed` gives for tools that
/// declare none.
pub fn catalog_declarations_observed(
    catalog: &Catalog,
    observed: &dyn Fn(&Entry) -> Option<Observed>,
) -> String {
    let mut out =
        String::from("// Generated by sandgate: every tool reachable through call_tool_chain.\n\n");
    for (backend, js_backend) in catalog.backend_idents() {
        let _ = writeln!(
            out,
            "/** Backend `{}`. */\ndeclare namespace {js_backend} {{",
            escape_doc(backend)
        );
        let prefixes = namespace_prefixes(catalog.backend_tools(backend));
        let mut taken = reserved_for(prefixes.iter().cloned());
        for (entry, prefix) in catalog.backend_tools(backend).zip(&prefixes) {
            let seen = observed(entry);
            out.push_str(&indent(&namespace_body(
                entry,
                prefix,
                seen.as_ref(),
                &mut taken,
            )));
        }
        out.push_str("}\n\n");
    }
    out
}

impl Catalog {
    /// `types.d.ts` for every tool in the catalog.
    pub fn declarations(&self) -> String {
        catalog_declarations(self)
    }

    /// `types.d.ts` with the return shapes `observed` gives for tools that declare none.
    pub fn declarations_observed(&self, observed: &dyn Fn(&Entry) -> Option<Observed>) -> String {
        catalog_declarations_observed(self, observed)
    }
}

fn write_type(out: &mut String, name: &str, body: &str) {
    if is_one_object_literal(body) {
        let _ = writeln!(out, "interface {name} {body}");
    } else {
        let _ = writeln!(out, "type {name} = {body};");
    }
}

fn all_optional(schema: &Value) -> bool {
    schema
        .get("required")
        .and_then(Value::as_array)
        .is_none_or(|r| r.is_empty())
}

/// An example call, with a placeholder for each required parameter.
fn example_call(entry: &Entry) -> String {
    let schema = &entry.spec.input_schema;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let props = schema.get("properties").and_then(Value::as_object);
    let args: Vec<String> = required
        .iter()
        .map(|name| {
            let prop = props.and_then(|p| p.get(*name)).unwrap_or(&Value::Null);
            format!("{}: {}", property_key(name), placeholder(prop))
        })
        .collect();
    let args = if args.is_empty() {
        "{}".to_string()
    } else {
        format!("{{ {} }}", args.join(", "))
    };
    format!("const result = await {}({args});", entry.js_qualified())
}

fn placeholder(schema: &Value) -> String {
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.to_string();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => "\"...\"".into(),
        Some("number") | Some("integer") => "0".into(),
        Some("boolean") => "false".into(),
        Some("array") => "[]".into(),
        Some("object") => "{}".into(),
        _ => "null".into(),
    }
}

struct Generator<'a> {
    root: &'a Value,
    prefix: &'a str,
    detail: Detail,
    /// `$ref` target → type name; rendered bodies once known.
    defs: BTreeMap<String, (String, Option<String>)>,
    /// Type names already given out in the namespace (named types take others).
    taken: BTreeSet<String>,
}

impl<'a> Generator<'a> {
    fn new(root: &'a Value, prefix: &'a str, detail: Detail) -> Self {
        Generator {
            root,
            prefix,
            detail,
            defs: BTreeMap::new(),
            taken: BTreeSet::new(),
        }
    }

    fn render(&mut self, schema: &Value, depth: usize) -> String {
        if depth > MAX_DEPTH {
            return "unknown".into();
        }
        let Some(obj) = schema.as_object() else {
            return "unknown".into();
        };
        let ty = self.render_object(obj, depth);
        if obj.get("nullable").and_then(Value::as_bool) == Some(true) && ty != "unknown" {
            format!("{} | null", wrap_union(&ty))
        } else {
            ty
        }
    }

    fn render_object(&mut self, obj: &Map<String, Value>, depth: usize) -> String {
        if let Some(reference) = obj.get("$ref").and_then(Value::as_str) {
            return self.reference(reference, depth);
        }
        if let Some(value) = obj.get("const") {
            return literal(value);
        }
        if let Some(values) = obj.get("enum").and_then(Value::as_array) {
            return if values.is_empty() {
                "never".into()
            } else {
                values.iter().map(literal).collect::<Vec<_>>().join(" | ")
            };
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(options) = obj.get(key).and_then(Value::as_array) {
                let mut parts: Vec<String> = Vec::new();
                for option in options {
                    let t = self.render(option, depth + 1);
                    if !parts.contains(&t) {
                        parts.push(t);
                    }
                }
                if parts.iter().any(|p| p == "unknown") {
                    return "unknown".into();
                }
                return combine(&parts, " | ");
            }
        }
        if let Some(all) = obj.get("allOf").and_then(Value::as_array) {
            let parts: Vec<String> = all
                .iter()
                .map(|s| self.render(s, depth + 1))
                .filter(|t| t != "unknown")
                .collect();
            return combine(&parts, " & ");
        }
        match obj.get("type") {
            Some(Value::String(t)) => self.render_type(t, obj, depth),
            Some(Value::Array(types)) => {
                let parts: Vec<String> = types
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|t| self.render_type(t, obj, depth))
                    .collect();
                combine(&parts, " | ")
            }
            _ if obj.contains_key("properties") => self.render_type("object", obj, depth),
            _ if obj.contains_key("items") => self.render_type("array", obj, depth),
            _ => "unknown".into(),
        }
    }

    fn render_type(&mut self, ty: &str, obj: &Map<String, Value>, depth: usize) -> String {
        match ty {
            "string" => "string".into(),
            "number" | "integer" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => match (
                obj.get("prefixItems").and_then(Value::as_array),
                obj.get("items"),
            ) {
                (Some(tuple), _) => {
                    let parts: Vec<String> =
                        tuple.iter().map(|s| self.render(s, depth + 1)).collect();
                    format!("[{}]", parts.join(", "))
                }
                (None, Some(items)) => {
                    let item = self.render(items, depth + 1);
                    if item.contains(' ') && !item.starts_with('{') {
                        format!("Array<{item}>")
                    } else {
                        format!("{item}[]")
                    }
                }
                (None, None) => "unknown[]".into(),
            },
            "object" => self.render_properties(obj, depth),
            _ => "unknown".into(),
        }
    }

    fn render_properties(&mut self, obj: &Map<String, Value>, depth: usize) -> String {
        let required: Vec<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let props = obj.get("properties").and_then(Value::as_object);
        let extra = match obj.get("additionalProperties") {
            Some(Value::Bool(false)) => None,
            Some(schema @ Value::Object(_)) => Some(self.render(schema, depth + 1)),
            _ if props.is_none_or(|p| p.is_empty()) => Some("unknown".to_string()),
            _ => None,
        };
        let Some(props) = props.filter(|p| !p.is_empty()) else {
            return match extra {
                Some(t) => format!("Record<string, {t}>"),
                None => "{}".into(),
            };
        };
        let mut fields = Vec::with_capacity(props.len());
        for (name, schema) in props {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            let ty = self.render(schema, depth + 1);
            let doc = match self.detail {
                Detail::Full => schema
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                Detail::Signature => None,
            };
            fields.push((doc, format!("{}{optional}: {ty};", property_key(name))));
        }
        if let Some(t) = extra.filter(|_| obj.contains_key("additionalProperties")) {
            fields.push((None, format!("[key: string]: {t};")));
        }
        match self.detail {
            Detail::Signature => {
                let inner: Vec<String> = fields.into_iter().map(|(_, f)| f).collect();
                format!("{{ {} }}", inner.join(" "))
            }
            Detail::Full => {
                let mut out = String::from("{\n");
                for (doc, field) in fields {
                    if let Some(doc) = doc {
                        write_jsdoc(&mut out, &doc, "  ");
                    }
                    // Nested multi-line types are indented relative to their field.
                    let _ = writeln!(out, "  {}", field.replace('\n', "\n  "));
                }
                out.push('}');
                out
            }
        }
    }

    /// Resolves a local `$ref`, registering a named type so recursion terminates.
    fn reference(&mut self, reference: &str, depth: usize) -> String {
        let Some(path) = reference.strip_prefix("#/") else {
            return "unknown".into();
        };
        if path.is_empty() {
            return self.named_def(reference, "Root", self.root, depth);
        }
        let target = path.split('/').try_fold(self.root, |node, part| {
            node.get(part.replace("~1", "/").replace("~0", "~"))
        });
        let Some(target) = target else {
            return "unknown".into();
        };
        let last = path.rsplit('/').next().unwrap_or("Def");
        self.named_def(reference, last, target, depth)
    }

    fn named_def(&mut self, reference: &str, last: &str, target: &Value, depth: usize) -> String {
        if let Some((name, _)) = self.defs.get(reference) {
            return name.clone();
        }
        let base = format!("{}{}", self.prefix, pascal_case(last));
        let mut name = base.clone();
        let mut n = 2;
        while self.taken.contains(&name) {
            name = format!("{base}{n}");
            n += 1;
        }
        self.taken.insert(name.clone());
        self.defs
            .insert(reference.to_string(), (name.clone(), None));
        let body = self.render(target, depth);
        if let Some(slot) = self.defs.get_mut(reference) {
            slot.1 = Some(body);
        }
        name
    }

    fn write_defs(&self, out: &mut String) {
        for (name, body) in self.defs.values() {
            if let Some(body) = body {
                write_type(out, name, body);
            }
        }
    }
}

/// Joins types with ` | ` or ` & `, parenthesizing members as needed; `unknown` when empty.
fn combine(parts: &[String], separator: &str) -> String {
    if parts.is_empty() {
        return "unknown".into();
    }
    parts
        .iter()
        .map(|p| wrap_union(p))
        .collect::<Vec<_>>()
        .join(separator)
}

/// Parenthesizes a type that has a top-level `|` or `&`, so it can be joined with others.
fn wrap_union(ty: &str) -> String {
    let mut nesting = 0i32;
    let bytes = ty.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'{' | b'(' | b'[' | b'<' => nesting += 1,
            b'}' | b')' | b']' | b'>' => nesting -= 1,
            b'|' | b'&' if nesting == 0 && i > 0 && bytes[i - 1] == b' ' => {
                return format!("({ty})");
            }
            _ => {}
        }
    }
    ty.to_string()
}

fn literal(value: &Value) -> String {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => value.to_string(),
        _ => "unknown".into(),
    }
}

/// A property name as a TypeScript key: bare when it is an identifier, quoted otherwise.
fn property_key(name: &str) -> String {
    let ident = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if ident {
        name.to_string()
    } else {
        Value::String(name.to_string()).to_string()
    }
}

fn escape_doc(text: &str) -> String {
    text.replace("*/", "*\\/")
}

fn write_jsdoc(out: &mut String, text: &str, indent: &str) {
    let text = escape_doc(text.trim());
    if text.is_empty() {
        return;
    }
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() == 1 {
        let _ = writeln!(out, "{indent}/** {} */", lines[0].trim());
        return;
    }
    let _ = writeln!(out, "{indent}/**");
    for line in lines {
        let _ = writeln!(out, "{indent} * {}", line.trim_end());
    }
    let _ = writeln!(out, "{indent} */");
}
