"""The equivalence table: snippets that call_tool_chain may answer without the sandbox (tiers 1
and 2, introspection), each paired with the code that forces the same thing through the sandbox.
The test runs both against the real npm servers and requires the same result, byte for byte,
and the same error kind and message.

Each row is (code for the shortcut, code for the sandbox, expected tier). An expected tier of
"sandbox" marks code the shortcuts must *not* take (non-literal arguments, aliases, shadowing):
it still has to give the same result, from the sandbox."""

import json

# (backend, tool, arguments): tools whose answers do not depend on when they are called.
CALLS = [
    ("everything", "echo", {"message": "hi"}),
    ("everything", "echo", {"message": ""}),
    ("everything", "echo", {"message": "quotes ' \" and \\ backslash"}),
    ("everything", "echo", {"message": "line\nbreak\ttab"}),
    ("everything", "echo", {"message": "é 😀 漢字 \u2028"}),
    ("everything", "echo", {"message": "{\"looks\": \"like json\"}"}),
    ("everything", "echo", {"message": "x" * 3000}),
    ("everything", "get-sum", {"a": 1, "b": 2}),
    ("everything", "get-sum", {"a": -5, "b": 2.5}),
    ("everything", "get-sum", {"a": 0.1, "b": 0.2}),
    ("everything", "get-sum", {"a": 1e15, "b": 1}),
    ("everything", "get-sum", {"a": 1}),
    ("everything", "get-sum", {"a": "one", "b": 2}),
    ("everything", "get-structured-content", {"location": "Chicago"}),
    ("everything", "get-structured-content", {"location": "New York"}),
    ("everything", "get-structured-content", {"location": "Atlantis"}),
    ("everything", "get-annotated-message", {"messageType": "error"}),
    ("everything", "get-annotated-message", {"messageType": "success", "includeImage": True}),
    ("everything", "get-tiny-image", {}),
    ("everything", "get-resource-links", {"count": 2}),
    ("memory", "read_graph", {}),
    ("memory", "search_nodes", {"query": "nothing-matches-this"}),
    ("memory", "open_nodes", {"names": ["nobody"]}),
    ("filesystem", "list_allowed_directories", {}),
    ("filesystem", "read_text_file", {"path": "{root}/hello.txt"}),
    ("filesystem", "read_text_file", {"path": "{root}/data.json"}),
    ("filesystem", "read_text_file", {"path": "{root}/missing.txt"}),
    ("filesystem", "read_text_file", {"path": "/etc/passwd"}),
    ("filesystem", "list_directory", {"path": "{root}"}),
    ("filesystem", "directory_tree", {"path": "{root}"}),
    ("filesystem", "search_files", {"path": "{root}", "pattern": "*.txt"}),
]


def ident(name: str) -> str:
    return name.replace("-", "_")


def js_object(args: dict, style: int) -> str:
    """Arguments as a JS object literal, in one of several styles a model writes."""
    if style == 0:
        return json.dumps(args, ensure_ascii=False)
    parts = []
    for key, value in args.items():
        k = key if key.isidentifier() else json.dumps(key)
        if style == 2 and isinstance(value, str):
            v = "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\t", "\\t").replace("\u2028", "\\u2028") + "'"
        else:
            v = json.dumps(value, ensure_ascii=False)
        parts.append(f"{k}: {v}")
    trailing = "," if style == 2 and parts else ""
    return "{ " + ", ".join(parts) + trailing + " }"


def rows(root: str):
    out = []
    for backend, tool, raw_args in CALLS:
        args = json.loads(json.dumps(raw_args).replace("{root}", root))
        b, t = ident(backend), ident(tool)
        obj = js_object(args, 0)
        reference = f"return await {b}.{t}({obj});"
        forms = [
            (f"{b}.{t}({js_object(args, 1)})", "single_call"),
            (f"await {b}.{t}({js_object(args, 2)});", "single_call"),
            (f"return await {b}.{t}({obj})", "single_call"),
            (f"return {b}.{t}({js_object(args, 1)});", "single_call"),
            (f"const result = await {b}.{t}({js_object(args, 2)});\nreturn result;", "single_call"),
            (f"return await globalThis[{json.dumps(backend)}][{json.dumps(tool)}]({obj})", "single_call"),
            (f"return await {b}[{json.dumps(tool)}]({js_object(args, 1)})", "single_call"),
        ]
        for code, tier in forms:
            out.append((code, reference, tier))
        out.append((json.dumps({"tool": f"{backend}.{tool}", "arguments": args}, ensure_ascii=False), reference, "json"))
        out.append((f"return await {b}.{t}.raw({obj})", f"const r = await {b}.{t}.raw({obj}); return r;", "single_call"))
        # As models send code: in a markdown fence, with prose around it; and a `main` that is
        # defined and never called. Every tier reads them alike.
        out.append((f"```ts\n{b}.{t}({js_object(args, 1)})\n```", reference, "single_call"))
        out.append((f"Here is the call:\n\n```typescript\nreturn await {b}.{t}({obj});\n```\nIt returns the result.", reference, "single_call"))
        json_call = json.dumps({"tool": f"{backend}.{tool}", "arguments": args}, ensure_ascii=False)
        out.append((f"```json\n{json_call}\n```", reference, "json"))
        out.append((f"async function main() {{\n  return await {b}.{t}({obj});\n}}", reference, "sandbox"))
        # Not literal, an alias, a shadowing name: these must fall through to the sandbox.
        out.append((f"const a = {obj};\nreturn await {b}.{t}(a);", reference, "sandbox"))
        out.append((f"return await mcp.{b}.{t}({obj})", reference, "sandbox"))
    out.append(("__getToolInterface('everything.echo')", "return __getToolInterface('everything.echo');", "introspection"))
    out.append(("__getToolInterface('get-sum')", "const d = __getToolInterface('get-sum'); return d;", "introspection"))
    out.append(("return __interfaces.memory.read_graph", "const i = __interfaces; return i.memory.read_graph;", "introspection"))
    out.append(("__interfaces.everything['get-sum']", "return __interfaces.everything.get_sum;", "introspection"))
    out.append(("__getToolInterface('nope.nothing')", "return __getToolInterface('nope.nothing');", "sandbox"))
    out.append(('{"tool": "get-sum", "arguments": {"a": 2, "b": 3}}', "return await everything.get_sum({a: 2, b: 3})", "json"))
    out.append(('{"tool": "everything.get_sum", "arguments": {"a": 2, "b": 3}}', "return await everything.get_sum({a: 2, b: 3})", "json"))
    out.append(("const everything = await everything.echo({message: 'x'}); return everything;", "const everything = await everything.echo({message: 'x'}); return everything;", "sandbox"))
    return out
