// List a directory and handle a tool error in code instead of failing the run.
// Run: sandgate run examples/files.ts --config examples/sandgate.toml
// The declared result type is { content: string } (see `sandgate tools info filesystem.list_directory`).
const listing = await filesystem.list_directory({ path: "examples" });
const scripts = listing.content
  .split("\n")
  .filter((line) => line.endsWith(".ts"))
  .map((line) => line.replace("[FILE] ", ""));
let missing: string;
try {
  await filesystem.read_text_file({ path: "examples/does-not-exist.ts" });
  missing = "unexpectedly found";
} catch (e) {
  missing = e instanceof ToolError ? `ToolError from ${e.tool}` : String(e);
}
return { scripts, missing };
