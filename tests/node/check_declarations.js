// Parses and type-checks a generated types.d.ts with the real TypeScript compiler, and checks
// that it declares only: every top-level statement is an ambient declaration, and no function,
// method or accessor has a body, so nothing in it could run. Prints a JSON report; exits 1 when
// the file has any diagnostic or any statement that is not a declaration.
//
//   node tests/node/check_declarations.js path/to/types.d.ts
"use strict";
const path = require("path");
const ts = require("typescript");

const file = path.resolve(process.argv[2]);
const program = ts.createProgram([file], {
  noEmit: true,
  strict: true,
  target: ts.ScriptTarget.ES2022,
  lib: ["lib.es2022.d.ts"],
  types: [],
});
const source = program.getSourceFile(file);
const diagnostics = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]
  .map((d) => {
    const where = d.start === undefined ? "" : `${source.getLineAndCharacterOfPosition(d.start).line + 1}: `;
    return where + ts.flattenDiagnosticMessageText(d.messageText, "\n");
  });

const executable = [];
const isAmbient = (statement) =>
  ts.isInterfaceDeclaration(statement) ||
  ts.isTypeAliasDeclaration(statement) ||
  (ts.getCombinedModifierFlags(statement) & ts.ModifierFlags.Ambient) !== 0;
for (const statement of source.statements) {
  if (!isAmbient(statement)) executable.push(statement.getText(source).slice(0, 200));
}
const visit = (node) => {
  if ((ts.isFunctionLike(node) && node.body) || ts.isBlock(node) || ts.isExpressionStatement(node)) {
    executable.push(node.getText(source).slice(0, 200));
  }
  ts.forEachChild(node, visit);
};
visit(source);

const report = { file, statements: source.statements.length, diagnostics, executable };
console.log(JSON.stringify(report));
process.exit(diagnostics.length === 0 && executable.length === 0 ? 0 : 1);
