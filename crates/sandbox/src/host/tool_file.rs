//! A stored tool's file: one TypeScript module with a `meta` and a default export.
//!
//! ```ts
//! export const meta = { description: "...", input: {...}, output: {...}, capabilities: {...} };
//! export default async function (input, ctx) { ... }      // or: export default { async execute(input, ctx) { ... } }
//! ```
//!
//! The file is read without running it: `meta` must be a literal (the same literals a
//! single call's arguments may be), so what a tool declares is known before any of its code
//! runs, and the default export must be a function or an object with `execute`. To run it,
//! the exports are rewritten in place (positions stay where they were) and the module ends by
//! calling the tool with the execution's input and its capability object, `ctx`, which the
//! preamble builds in tool mode from exactly what the execution was given.

use oxc::allocator::Allocator;
use oxc::ast::ast::{
    Declaration, ExportDefaultDeclarationKind, Expression, ObjectPropertyKind, PropertyKey,
    Statement,
};
use serde_json::Value;

use crate::host::nesting;
use crate::host::transpile::{
    CodeShape, SourceProblem, Transpiled, blank, finish, line_column, parse, too_deep,
};

/// Name the default export is bound to.
pub(crate) const TOOL_EXPORT: &str = "__sgtool";

/// What a tool file declares.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFile {
    /// `meta`, as JSON.
    pub meta: Value,
    /// 1-based line of `meta` (for messages about it).
    pub meta_line: u32,
}

/// Reads `meta` and checks the default export, without running anything.
pub fn read(source: &str) -> Result<ToolFile, SourceProblem> {
    if let Err(deep) = nesting::check(source) {
        return Err(too_deep(source, deep));
    }
    nesting::on_sized_stack(source.len(), || {
        let allocator = Allocator::default();
        let program = parse(&allocator, source, source)?;
        inspect(source, &program).map(|(file, _)| file)
    })
}

/// The tool as a runnable script: its module, then a call of its default export with
/// `context.input` and `__ctx`.
pub fn transpile(source: &str) -> Result<Transpiled, SourceProblem> {
    if let Err(deep) = nesting::check(source) {
        return Err(too_deep(source, deep));
    }
    nesting::on_sized_stack(source.len(), || {
        let allocator = Allocator::default();
        let program = parse(&allocator, source, source)?;
        let (_, edited) = inspect(source, &program)?;
        let allocator = Allocator::default();
        let program = parse(&allocator, &edited, source)?;
        finish(source, &allocator, program, CodeShape::Tool)
    })
}

/// Finds `meta` and the default export, and the source with both exports rewritten.
fn inspect(
    source: &str,
    program: &oxc::ast::ast::Program,
) -> Result<(ToolFile, String), SourceProblem> {
    let at = |offset: u32, message: &str, hint: &str| {
        let (line, column) = line_column(source, offset);
        SourceProblem {
            message: message.to_string(),
            line,
            column,
            hint: Some(hint.to_string()),
        }
    };
    let mut edited = source.to_string();
    let mut meta = None;
    let mut default = false;
    for statement in &program.body {
        match statement {
            Statement::ImportDeclaration(import) if import.import_kind.is_type() => {
                blank(&mut edited, source, import.span.start, import.span.end);
            }
            Statement::ImportDeclaration(import) => {
                return Err(at(
                    import.span.start,
                    "a stored tool cannot import modules",
                    "reach other tools through ctx.tools.<backend>.<tool> (declare them in meta.capabilities.tools)",
                ));
            }
            Statement::ExportNamedDeclaration(export) if export.export_kind.is_type() => {
                blank(&mut edited, source, export.span.start, export.span.end);
            }
            Statement::ExportDeclaration(export) => {
                match &export.declaration {
                    Declaration::VariableDeclaration(declaration)
                        if declaration.declarations.len() == 1
                            && declaration.declarations[0]
                                .id
                                .get_identifier_name()
                                .is_some_and(|n| n == "meta") =>
                    {
                        let declarator = &declaration.declarations[0];
                        let Some(init) = &declarator.init else {
                            return Err(at(
                                declarator.span.start,
                                "`meta` has no value",
                                META_SHAPE,
                            ));
                        };
                        let Some(value) = crate::host::single_call::literal(init) else {
                            return Err(at(
                                init.span().start,
                                "`meta` must be a literal object: no variables, calls or spreads",
                                META_SHAPE,
                            ));
                        };
                        let (line, _) = line_column(source, init.span().start);
                        meta = Some((value, line));
                    }
                    Declaration::TSInterfaceDeclaration(_)
                    | Declaration::TSTypeAliasDeclaration(_) => {}
                    _ => {
                        return Err(at(
                            export.span.start,
                            "a stored tool exports only `meta` and its default",
                            CONTRACT,
                        ));
                    }
                }
                let region = export.span.start as usize
                    ..crate::host::transpile::declaration_start(&export.declaration) as usize;
                let width = region.len();
                edited.replace_range(region, &" ".repeat(width));
            }
            Statement::ExportDefaultDeclaration(export) => {
                let start = match &export.declaration {
                    ExportDefaultDeclarationKind::FunctionDeclaration(f) => f.span.start,
                    ExportDefaultDeclarationKind::ArrowFunctionExpression(f) => f.span.start,
                    ExportDefaultDeclarationKind::FunctionExpression(f) => f.span.start,
                    ExportDefaultDeclarationKind::ObjectExpression(object)
                        if object.properties.iter().any(|p| match p {
                            ObjectPropertyKind::ObjectProperty(p) => {
                                matches!(&p.key, PropertyKey::StaticIdentifier(id) if id.name == "execute")
                            }
                            ObjectPropertyKind::SpreadProperty(_) => false,
                        }) =>
                    {
                        object.span.start
                    }
                    _ => {
                        return Err(at(
                            export.span.start,
                            "the default export must be the tool's function, or an object with `execute`",
                            CONTRACT,
                        ));
                    }
                };
                // `export default ` → `var __sgtool =` (no longer than it), positions kept.
                let replacement = format!("var {TOOL_EXPORT} =");
                let region = export.span.start as usize..start as usize;
                let width = region.len();
                if width < replacement.len() {
                    return Err(at(
                        export.span.start,
                        "could not read this `export default`",
                        CONTRACT,
                    ));
                }
                edited.replace_range(region, &format!("{replacement:<width$}"));
                default = true;
            }
            Statement::ExportNamedDeclaration(export) => {
                return Err(at(
                    export.span.start,
                    "a stored tool exports only `meta` and its default",
                    CONTRACT,
                ));
            }
            Statement::ExportFromDeclaration(export) => {
                return Err(at(
                    export.span.start,
                    "a stored tool cannot re-export",
                    CONTRACT,
                ));
            }
            _ => {}
        }
    }
    let Some((meta, meta_line)) = meta else {
        return Err(SourceProblem {
            message: "the file exports no `meta`".into(),
            line: 1,
            column: 1,
            hint: Some(CONTRACT.into()),
        });
    };
    if !default {
        return Err(SourceProblem {
            message: "the file has no default export (the tool itself)".into(),
            line: 1,
            column: 1,
            hint: Some(CONTRACT.into()),
        });
    }
    Ok((ToolFile { meta, meta_line }, edited))
}

/// What a tool file looks like.
const CONTRACT: &str = "a stored tool is `export const meta = { description, input, output?, capabilities };` and `export default async function (input, ctx) { ... }` (or `export default { async execute(input, ctx) { ... } }`)";
const META_SHAPE: &str = "write meta as a literal: export const meta = { description: \"...\", input: { type: \"object\", ... }, capabilities: { tools: [\"backend.tool\"] } }";

/// The span of an expression (oxc's `GetSpan`, without importing the trait everywhere).
trait StartOf {
    fn span(&self) -> oxc::span::Span;
}

impl StartOf for Expression<'_> {
    fn span(&self) -> oxc::span::Span {
        oxc::span::GetSpan::span(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_of_the_contract_are_read() {
        let function = "export const meta = { description: 'sum', input: { type: 'object' }, capabilities: { tools: ['everything.get_sum'] } };\nexport default async function (input: { xs: number[] }, ctx) { return { total: 1 }; }";
        let file = read(function).expect("reads");
        assert_eq!(file.meta["description"], "sum");
        assert_eq!(file.meta_line, 1);
        let object = "export const meta = { description: 'x', input: {} } as const;\nexport default { async execute(input, ctx) { return 1; } };";
        assert!(read(object).is_ok());
        let js = transpile(function).expect("transpiles").js;
        assert!(js.contains("__sgtool"), "{js}");
    }

    #[test]
    fn what_breaks_the_contract_is_named_with_its_line() {
        for (code, expect, line) in [
            ("export default async function () {}", "no `meta`", 1),
            (
                "export const meta = { description: 'x' };",
                "no default export",
                1,
            ),
            (
                "const d = 'x';\nexport const meta = { description: d };\nexport default () => 1;",
                "must be a literal",
                2,
            ),
            (
                "export const meta = {};\nexport default 42;",
                "default export must be",
                2,
            ),
            (
                "export const meta = {};\nexport const other = 1;\nexport default () => 1;",
                "only `meta`",
                2,
            ),
            (
                "import x from 'y';\nexport const meta = {};\nexport default () => 1;",
                "cannot import",
                1,
            ),
            ("export const meta = {;", "", 1),
        ] {
            let problem = read(code).expect_err(code);
            assert!(problem.message.contains(expect), "{code}: {problem:?}");
            assert_eq!(problem.line, line, "{code}: {problem:?}");
        }
    }
}
