//! TypeScript to JavaScript, with positions that point back at the user's own code.
//!
//! The model writes TypeScript; QuickJS runs JavaScript. oxc parses the code (allowing
//! top-level `await` and `return`), strips the types (enums become objects), and prints
//! JavaScript with a source map. The map is kept as a compact table so that runtime errors
//! from QuickJS, which count lines in the generated wrapper, can be reported at the user's line
//! and column. The three accepted code shapes are recognised here: a top-level script,
//! `export default async function main`, and `export async function main`. `import` is
//! refused with the alternative.

use std::path::Path;

use oxc::allocator::{Allocator, TakeIn};
use oxc::ast::ast::{Declaration, ExportDefaultDeclarationKind, Statement};
use oxc::ast::builder::AstBuilder;
use oxc::codegen::{Codegen, CodegenOptions};
use oxc::parser::{ParseOptions, Parser};
use oxc::semantic::SemanticBuilder;
use oxc::span::SourceType;
use oxc::transformer::{TransformOptions, Transformer};

use crate::host::nesting;

/// Lines the wrapper adds before the user's code in the script QuickJS runs.
pub const WRAPPER_PREFIX_LINES: u32 = 1;
/// The fix for exports other than `main`.
const ONLY_MAIN: &str = "write `export async function main() { ... }` or `export default async function main() { ... }`, or plain statements with a top-level `return`";

/// Name under which an anonymous `export default` function is bound.
const DEFAULT_MAIN: &str = "__sgmain";

/// Which of the accepted code shapes a script has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeShape {
    /// Statements with top-level `await` and `return`.
    Script,
    /// `export default async function main() {}` (the name is optional).
    DefaultMain,
    /// `export async function main() {}`.
    NamedMain,
    /// A stored tool's module (see [`crate::host::tool_file`]): its default export is called
    /// with `context.input` and the capability object `__ctx`.
    Tool,
}

/// A problem in the source found before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceProblem {
    /// What is wrong.
    pub message: String,
    /// 1-based line in the user's code.
    pub line: u32,
    /// 1-based column in the user's code.
    pub column: u32,
    /// How to fix it, when we know.
    pub hint: Option<String>,
}

/// JavaScript ready to run, and how to map its positions back.
#[derive(Debug, Clone)]
pub struct Transpiled {
    /// The wrapped script: an async IIFE whose promise is the execution's result.
    pub js: String,
    /// The shape that was recognised.
    pub shape: CodeShape,
    /// Generated position → source position.
    pub positions: PositionMap,
}

/// Maps positions in the generated script back to the user's source.
#[derive(Debug, Clone, Default)]
pub struct PositionMap {
    /// (generated line, generated column, source line, source column), all 0-based, sorted.
    tokens: Vec<(u32, u32, u32, u32)>,
    /// Lines of what the model sent before its code (a markdown fence and prose before it).
    line_offset: u32,
}

impl PositionMap {
    /// The user's 1-based (line, column) for a 1-based position in the wrapped script.
    pub fn to_source(&self, line: u32, column: u32) -> Option<(u32, u32)> {
        let line = line.checked_sub(1 + WRAPPER_PREFIX_LINES)?;
        let column = column.saturating_sub(1);
        let idx = self
            .tokens
            .partition_point(|t| (t.0, t.1) <= (line, column));
        let token = if idx > 0 {
            self.tokens[idx - 1]
        } else {
            *self.tokens.first()?
        };
        let offset = self.line_offset;
        // A position past the last token of its line still belongs to that line's code.
        if token.0 != line {
            let first_on_line = self.tokens.iter().find(|t| t.0 == line)?;
            return Some((first_on_line.2 + 1 + offset, first_on_line.3 + 1));
        }
        Some((token.2 + 1 + offset, token.3 + column - token.1 + 1))
    }
}

/// Turns the user's TypeScript into a runnable wrapped script. Code that nests too deep is
/// refused before it is parsed, and the parse runs on a stack sized for the code's length
/// (see [`crate::host::nesting`]), so no input can overflow the caller's stack.
///
/// `sent` is read as the model meant it (see [`crate::host::normalize`]): a markdown fence and
/// the prose around it are dropped, and every position reported still points into `sent`.
pub fn transpile(sent: &str) -> Result<Transpiled, SourceProblem> {
    let model = crate::host::normalize::model_code(sent);
    let (source, offset) = (&*model.code, model.line_offset);
    let shifted = |mut problem: SourceProblem| {
        problem.line += offset;
        problem
    };
    if let Err(deep) = nesting::check(source) {
        return Err(shifted(too_deep(source, deep)));
    }
    nesting::on_sized_stack(source.len(), || transpile_on_this_stack(source))
        .map(|mut transpiled| {
            transpiled.positions.line_offset = offset;
            transpiled
        })
        .map_err(shifted)
}

/// The `syntax` problem for code that nests past [`nesting::MAX_NESTING`].
pub fn too_deep(source: &str, deep: nesting::TooDeep) -> SourceProblem {
    let (line, column) = line_column(source, u32::try_from(deep.offset).unwrap_or(u32::MAX));
    SourceProblem {
        message: format!(
            "the code nests more than {} levels deep here (brackets, or operators and arrow functions chained without a `;` or `,`); deeper code is refused so that reading it cannot exhaust the gateway",
            nesting::MAX_NESTING
        ),
        line,
        column,
        hint: Some("Flatten it: build deep data in a loop instead of writing it as one literal, and split long chains into separate statements.".into()),
    }
}

/// The `syntax` error for code over `Limits::max_code_bytes`.
pub fn code_too_large(bytes: usize, limit: usize) -> crate::host::result::ExecError {
    crate::host::result::ExecError {
        kind: crate::wire::protocol::ErrorKind::Syntax,
        message: format!(
            "the code is {bytes} bytes; an execution's code may be at most {limit} bytes (limits.max_code_bytes)"
        ),
        line: None,
        column: None,
        hint: Some("Keep data out of the code: read it with a tool inside the script, or split the work into several executions.".into()),
        fault: None,
    }
}

/// [`transpile`] without the nesting check or the sized stack: for measuring how much stack a
/// parse needs (`examples/stack_probe.rs`). Untrusted code must go through [`transpile`].
#[doc(hidden)]
pub fn transpile_on_this_stack(source: &str) -> Result<Transpiled, SourceProblem> {
    let allocator = Allocator::default();
    let program = parse(&allocator, source, source)?;
    if let Some(at) = first_decorator(&program) {
        let (line, column) = line_column(source, at);
        return Err(SourceProblem {
            message: "decorators (`@name` before a class or member) are not supported in the sandbox".into(),
            line,
            column,
            hint: Some("Remove the decorator and call the function it would have applied directly, e.g. `const logged = log(fn)`.".into()),
        });
    }
    let (edited, shape) = recognise_shape(source, &program)?;
    match edited {
        // Most scripts have no exports to rewrite: one parse is enough.
        None => finish(source, &allocator, program, shape),
        Some(text) => {
            let allocator = Allocator::default();
            let program = parse(&allocator, &text, source)?;
            finish(source, &allocator, program, shape)
        }
    }
}

/// Parses TypeScript with top-level `await` and `return` allowed; errors point into `original`.
pub(crate) fn parse<'a>(
    allocator: &'a Allocator,
    text: &'a str,
    original: &str,
) -> Result<oxc::ast::ast::Program<'a>, SourceProblem> {
    let options = ParseOptions {
        allow_return_outside_function: true,
        ..ParseOptions::default()
    };
    let parsed = Parser::new(allocator, text, SourceType::ts().with_module(true))
        .with_options(options)
        .parse();
    match first_error(original, parsed.diagnostics.errors()) {
        Some(problem) => Err(problem),
        None => Ok(parsed.program),
    }
}

/// Strips types, prints JavaScript with a source map, and wraps it.
pub(crate) fn finish<'a>(
    source: &str,
    allocator: &'a Allocator,
    mut program: oxc::ast::ast::Program<'a>,
    shape: CodeShape,
) -> Result<Transpiled, SourceProblem> {
    if shape == CodeShape::Script {
        return_last_expression(allocator, &mut program);
    }
    let semantic = SemanticBuilder::new().with_enum_eval(true).build(&program);
    let scoping = semantic.semantic.into_scoping();
    let transformed = Transformer::new(
        allocator,
        Path::new("code.ts"),
        &TransformOptions::default(),
    )
    .build_with_scoping(scoping, &mut program);
    if let Some(problem) = first_error(source, transformed.diagnostics.errors()) {
        return Err(problem);
    }
    let codegen_options = CodegenOptions {
        source_map_path: Some("code.ts".into()),
        ..CodegenOptions::default()
    };
    let generated = Codegen::new().with_options(codegen_options).build(&program);
    let mut tokens: Vec<(u32, u32, u32, u32)> = generated
        .map
        .as_ref()
        .map(|map| {
            map.get_tokens()
                .map(|t| {
                    (
                        t.get_dst_line(),
                        t.get_dst_col(),
                        t.get_src_line(),
                        t.get_src_col(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    tokens.sort_unstable();
    let call_main = match shape {
        CodeShape::Script => "",
        CodeShape::DefaultMain => "\nreturn await __sgmain();",
        CodeShape::NamedMain => "\nreturn await main();",
        CodeShape::Tool => {
            "\nconst __sgrun = typeof __sgtool === \"function\" ? __sgtool : __sgtool.execute;\nreturn await __sgrun.call(__sgtool, context.input, __ctx);"
        }
    };
    let js = format!("(async () => {{\n{}{call_main}\n}})()", generated.code);
    Ok(Transpiled {
        js,
        shape,
        positions: PositionMap {
            tokens,
            line_offset: 0,
        },
    })
}

/// Finds `import`s and the `main` shapes with a first parse, and rewrites the `export`
/// keywords in place with text of the same length, so every position stays where it was.
/// A script's value is its last expression statement when it ends in one, as in a REPL:
/// `everything.echo({ message: "hi" })` alone returns the echo instead of `null`. Models
/// write that often, and it lets a single bare call mean the same in every tier.
fn return_last_expression<'a>(allocator: &'a Allocator, program: &mut oxc::ast::ast::Program<'a>) {
    let Some(last) = program.body.last_mut() else {
        return;
    };
    let Statement::ExpressionStatement(statement) = last else {
        return;
    };
    let span = statement.span;
    let expression = statement.expression.take_in(&allocator);
    *last = Statement::new_return_statement(span, Some(expression), &AstBuilder::new(allocator));
}

fn recognise_shape(
    source: &str,
    program: &oxc::ast::ast::Program,
) -> Result<(Option<String>, CodeShape), SourceProblem> {
    let mut edited = source.to_string();
    let mut shape = CodeShape::Script;
    for statement in &program.body {
        let at = |offset: u32, message: String, hint: &str| {
            let (line, column) = line_column(source, offset);
            SourceProblem {
                message,
                line,
                column,
                hint: Some(hint.to_string()),
            }
        };
        match statement {
            // Types only: erased, as TypeScript erases them.
            Statement::ImportDeclaration(import) if imports_only_types(import) => {
                blank(&mut edited, source, import.span.start, import.span.end);
            }
            Statement::ExportNamedDeclaration(export) if export.export_kind.is_type() => {
                blank(&mut edited, source, export.span.start, export.span.end);
            }
            Statement::ImportDeclaration(import)
                if rewrite_fs_import(&mut edited, source, import) => {}
            Statement::ImportDeclaration(import) => {
                return Err(at(
                    import.span.start,
                    format!(
                        "`import` is not available in the sandbox (importing {:?})",
                        import.source.value.as_str()
                    ),
                    "Backends are already globals: call them directly, e.g. `await github.create_issue({...})`. There are no modules to import; use search_tools to find tools.",
                ));
            }
            Statement::ExportDefaultDeclaration(export) => {
                let ExportDefaultDeclarationKind::FunctionDeclaration(function) =
                    &export.declaration
                else {
                    return Err(at(
                        export.span.start,
                        "only a function can be the default export".into(),
                        "write `export default async function main() { ... }`, or plain statements with a top-level `return`",
                    ));
                };
                // `export default ` → `var __sgmain = ` (same length), making it an expression.
                let keyword_end = function.span.start as usize;
                let replacement = format!("var {DEFAULT_MAIN} =");
                let region = export.span.start as usize..keyword_end;
                let width = region.len();
                if width < replacement.len() {
                    return Err(at(
                        export.span.start,
                        "could not read this `export default`".into(),
                        "write `export default async function main() { ... }`",
                    ));
                }
                edited.replace_range(region, &format!("{replacement:<width$}"));
                shape = CodeShape::DefaultMain;
            }
            Statement::ExportDeclaration(export) => {
                let keep = match &export.declaration {
                    Declaration::FunctionDeclaration(function)
                        if function.id.as_ref().is_some_and(|id| id.name == "main") =>
                    {
                        shape = CodeShape::NamedMain;
                        true
                    }
                    // Exported types are harmless: drop the keyword, keep the type.
                    Declaration::TSInterfaceDeclaration(_)
                    | Declaration::TSTypeAliasDeclaration(_) => true,
                    _ => false,
                };
                if !keep {
                    return Err(at(
                        export.span.start,
                        "only `main` can be exported".into(),
                        ONLY_MAIN,
                    ));
                }
                let region =
                    export.span.start as usize..declaration_start(&export.declaration) as usize;
                let width = region.len();
                edited.replace_range(region, &" ".repeat(width));
            }
            Statement::ExportNamedDeclaration(export) => {
                return Err(at(
                    export.span.start,
                    "`export { ... }` lists are not available in the sandbox".into(),
                    ONLY_MAIN,
                ));
            }
            Statement::ExportFromDeclaration(export) => {
                return Err(at(
                    export.span.start,
                    "re-exports are not available in the sandbox".into(),
                    "remove the export; return the value you want instead",
                ));
            }
            _ => {}
        }
    }
    // `async function main() { ... }` defined and never called, with nothing else at the top
    // level: the model meant it to run.
    if shape == CodeShape::Script && defines_main_and_does_nothing_else(program) {
        shape = CodeShape::NamedMain;
    }
    Ok(((edited != source).then_some(edited), shape))
}

/// The modules whose import gives the granted `fs` (Node's, with and without `node:`).
const FS_MODULES: [&str; 4] = ["fs", "node:fs", "fs/promises", "node:fs/promises"];

/// Rewrites `import fs from "node:fs/promises"` (a default, a namespace, or named imports, from
/// one of [`FS_MODULES`]) into `const fs=__m("node:fs/promises");` in place, padded so every
/// position after it stays where it was; `false` (nothing changed) for any other import, or
/// one whose rewrite would not fit.
fn rewrite_fs_import(
    edited: &mut String,
    source: &str,
    import: &oxc::ast::ast::ImportDeclaration,
) -> bool {
    use oxc::ast::ast::{ImportDeclarationSpecifier, ModuleExportName};
    let module = import.source.value.as_str();
    if !FS_MODULES.contains(&module) {
        return false;
    }
    let Some(specifiers) = import.specifiers.as_ref().filter(|s| !s.is_empty()) else {
        return false;
    };
    let pattern = match specifiers.as_slice() {
        [ImportDeclarationSpecifier::ImportDefaultSpecifier(one)] => one.local.name.to_string(),
        [ImportDeclarationSpecifier::ImportNamespaceSpecifier(one)] => one.local.name.to_string(),
        named => {
            let mut parts = Vec::with_capacity(named.len());
            for specifier in named {
                let ImportDeclarationSpecifier::ImportSpecifier(one) = specifier else {
                    return false;
                };
                let ModuleExportName::IdentifierName(imported) = &one.imported else {
                    return false;
                };
                let local = one.local.name.as_str();
                parts.push(if imported.name == local {
                    local.to_string()
                } else {
                    format!("{}:{local}", imported.name)
                });
            }
            format!("{{{}}}", parts.join(","))
        }
    };
    let replacement = format!("const {pattern}=__m({module:?});");
    let (start, end) = (import.span.start as usize, import.span.end as usize);
    let Some(region) = source.get(start..end) else {
        return false;
    };
    // Only on the import's first line, so no line break moves.
    let first_line = region.find(['\n', '\r']).unwrap_or(region.len());
    if replacement.len() > first_line {
        return false;
    }
    blank(edited, source, import.span.start, import.span.end);
    edited.replace_range(start..start + replacement.len(), &replacement);
    true
}

/// Whether an `import` brings in types only (`import type { A } from "x"`, or
/// `import { type A, type B } from "x"`).
fn imports_only_types(import: &oxc::ast::ast::ImportDeclaration) -> bool {
    use oxc::ast::ast::ImportDeclarationSpecifier;
    import.import_kind.is_type()
        || import.specifiers.as_ref().is_some_and(|specifiers| {
            !specifiers.is_empty()
                && specifiers.iter().all(|specifier| {
                    matches!(specifier, ImportDeclarationSpecifier::ImportSpecifier(s) if s.import_kind.is_type())
                })
        })
}

/// Replaces `source[start..end]` in `edited` with spaces, keeping line breaks, so every
/// position after it stays where it was.
pub(crate) fn blank(edited: &mut String, source: &str, start: u32, end: u32) {
    let (start, end) = (start as usize, end as usize);
    let Some(region) = source.get(start..end) else {
        return;
    };
    let spaces: String = region
        .bytes()
        .map(|b| {
            if b == b'\n' || b == b'\r' {
                b as char
            } else {
                ' '
            }
        })
        .collect();
    edited.replace_range(start..end, &spaces);
}

/// Whether the top level defines a function `main` and otherwise only declares things (other
/// functions, classes, types, constants with plain values): nothing would run without a call.
fn defines_main_and_does_nothing_else(program: &oxc::ast::ast::Program) -> bool {
    use oxc::ast::ast::Expression;
    let mut main = false;
    for statement in &program.body {
        match statement {
            Statement::FunctionDeclaration(function) => {
                main |= function.id.as_ref().is_some_and(|id| id.name == "main");
            }
            Statement::ClassDeclaration(_)
            | Statement::EmptyStatement(_)
            | Statement::TSTypeAliasDeclaration(_)
            | Statement::TSInterfaceDeclaration(_)
            | Statement::TSEnumDeclaration(_)
            | Statement::ImportDeclaration(_)
            | Statement::ExportNamedDeclaration(_) => {}
            Statement::VariableDeclaration(declaration) => {
                let plain = declaration.declarations.iter().all(|declarator| {
                    declarator.init.as_ref().is_none_or(|init| {
                        matches!(
                            init.get_inner_expression(),
                            Expression::StringLiteral(_)
                                | Expression::NumericLiteral(_)
                                | Expression::BooleanLiteral(_)
                                | Expression::NullLiteral(_)
                                | Expression::TemplateLiteral(_)
                                | Expression::ArrowFunctionExpression(_)
                                | Expression::FunctionExpression(_)
                                | Expression::ObjectExpression(_)
                                | Expression::ArrayExpression(_)
                        )
                    })
                });
                if !plain {
                    return false;
                }
            }
            _ => return false,
        }
    }
    main
}

/// The first decorator in the code, if any: QuickJS has no decorators, and the transformer
/// would need helpers the sandbox does not have.
fn first_decorator(program: &oxc::ast::ast::Program) -> Option<u32> {
    use oxc::ast_visit::Visit;
    struct Find(Option<u32>);
    impl<'a> Visit<'a> for Find {
        fn visit_decorator(&mut self, it: &oxc::ast::ast::Decorator<'a>) {
            if self.0.is_none() {
                self.0 = Some(it.span.start);
            }
        }
    }
    let mut find = Find(None);
    find.visit_program(program);
    find.0
}

pub(crate) fn declaration_start(declaration: &Declaration) -> u32 {
    use oxc::span::GetSpan;
    declaration.span().start
}

fn first_error<'a>(
    source: &str,
    mut errors: impl Iterator<Item = &'a oxc::diagnostics::OxcDiagnostic>,
) -> Option<SourceProblem> {
    let error = errors.next()?;
    let offset = error.labels.first().map(|l| l.offset()).unwrap_or(0);
    let (line, column) = line_column(source, offset);
    Some(SourceProblem {
        message: error.message.to_string(),
        line,
        column,
        hint: error.help.as_ref().map(|h| h.to_string()),
    })
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_column(source: &str, offset: u32) -> (u32, u32) {
    let before = &source[..crate::wire::encoding::floor_boundary(source, offset as usize)];
    let line = before.matches('\n').count() as u32 + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0) as u32
        + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_types_and_wraps_a_script() {
        let t = transpile("interface P { a: number }\nconst p: P = { a: 1 } as P;\nreturn p.a;")
            .expect("valid");
        assert_eq!(t.shape, CodeShape::Script);
        assert!(
            !t.js.contains("interface") && !t.js.contains(" as P"),
            "{}",
            t.js
        );
        assert!(t.js.starts_with("(async () => {\n"), "{}", t.js);
    }

    #[test]
    fn recognises_main_shapes() {
        let named = transpile("export async function main() { return 1 }").expect("valid");
        assert_eq!(named.shape, CodeShape::NamedMain);
        assert!(named.js.contains("return await main();"));
        let default = transpile("export default async function () { return 2 }").expect("valid");
        assert_eq!(default.shape, CodeShape::DefaultMain);
        assert!(default.js.contains("__sgmain"), "{}", default.js);
        let default_named =
            transpile("export default async function main() { return 3 }").expect("valid");
        assert_eq!(default_named.shape, CodeShape::DefaultMain);
    }

    #[test]
    fn import_is_refused_with_the_alternative() {
        let err = transpile("const x = 1;\nimport _ from 'lodash';").expect_err("import");
        assert_eq!((err.line, err.column), (2, 1));
        assert!(
            err.message.contains("\"lodash\"")
                && err.hint.as_deref().is_some_and(|h| h.contains("globals")),
            "{err:?}"
        );
    }

    #[test]
    fn an_fs_import_becomes_the_granted_fs_in_place() {
        let code = "const x = 1;\nimport { readFile as rf } from \"node:fs/promises\"; return rf;";
        let js = transpile(code).expect("transpiles").js;
        assert!(
            js.contains("const { readFile: rf } = __m(\"node:fs/promises\");"),
            "{js}"
        );
        // Too long to rewrite on its first line: refused as before.
        let err = transpile("import {\n readFile,\n writeFile,\n} from \"fs\";").expect_err("import");
        assert_eq!(err.line, 1, "{err:?}");
    }

    #[test]
    fn syntax_errors_point_at_the_users_line() {
        let err = transpile("const a = 1;\nconst b = ;\n").expect_err("syntax");
        assert_eq!(err.line, 2, "{err:?}");
    }

    #[test]
    fn runtime_positions_map_back() {
        let source =
            "type T = { x: number };\nconst a: T = { x: 1 };\n\n    throw new Error('boom');";
        let t = transpile(source).expect("valid");
        let generated_line =
            t.js.lines()
                .position(|l| l.contains("throw"))
                .expect("throw line") as u32
                + 1;
        let generated_col =
            t.js.lines()
                .nth(generated_line as usize - 1)
                .and_then(|l| l.find("throw"))
                .expect("col") as u32
                + 1;
        assert_eq!(
            t.positions.to_source(generated_line, generated_col),
            Some((4, 5))
        );
    }
}
