"""The agent-fit corpus: scripts as Claude-, GPT- and Gemini-style models write them, against
`sandgate serve` and the real npm servers (issue 15).

Four kinds of case:
- fit: the script gives the right result (the habit works);
- shown: the response's text, as the model reads it, holds these words (large results);
- hint: the script fails, and the error (message, hint) or a note names the fix in words a
  model can act on in one retry;
- guard: the script is contained (its error kind), and the gateway answers afterwards.

Add a row whenever a new habit is found."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
from conftest import connect, reference_servers, write_config

pytestmark = pytest.mark.anyio


@dataclass
class Case:
    label: str
    kind: str  # "fit" | "shown" | "hint" | "guard"
    code: str
    expect: Any = None  # fit: the value, or a predicate on it; hint: words; guard: error kind
    timeout_ms: int | None = None
    extra: dict = field(default_factory=dict)


def contains(*words: str) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, str) and all(w in value for w in words)


ECHO = "await everything.echo({ message: 'hi' })"

CASES = [
    # ---- how models wrap and shape code ------------------------------------------------------
    Case("fence ts", "fit", f"```ts\nreturn {ECHO};\n```", "Echo: hi"),
    Case("fence typescript with prose", "fit", f"Here is the script:\n\n```typescript\nconst r = {ECHO};\nreturn r;\n```\nThis returns the echo.", "Echo: hi"),
    Case("bare fence", "fit", f"```\nreturn {ECHO};\n```", "Echo: hi"),
    Case("fence around a single call", "fit", "```js\neverything.echo({ message: 'one' })\n```", "Echo: one"),
    Case("fenced JSON call", "fit", '```json\n{"tool": "everything.echo", "arguments": {"message": "json"}}\n```', "Echo: json"),
    Case("main defined, never called", "fit", "async function main() {\n  const r = await everything.get_sum({ a: 2, b: 3 });\n  return r;\n}", contains("5")),
    Case("main with helpers and constants", "fit", "const WHO = 'model';\nasync function greet(name: string) { return await everything.echo({ message: `hi ${name}` }); }\nasync function main() { return greet(WHO); }", "Echo: hi model"),
    Case("export default main", "fit", f"export default async function main() {{ return {ECHO}; }}", "Echo: hi"),
    Case("export async main", "fit", f"export async function main() {{ return {ECHO}; }}", "Echo: hi"),
    Case("self-invoked async arrow", "fit", f"return (async () => {{ return {ECHO}; }})();", "Echo: hi"),
    Case("REPL-style last expression", "fit", "everything.echo({ message: 'last' })", "Echo: last"),
    Case("import type erased", "fit", "import type { Entity } from './types';\ntype Row = { n: number };\nconst r: Row = { n: 4 };\nreturn r.n;", 4),
    Case("export type erased", "fit", "type Out = { ok: boolean };\nexport type { Out };\nconst o: Out = { ok: true };\nreturn o;", {"ok": True}),
    Case("interfaces and enums", "fit", "enum Color { Red = 'red' }\ninterface P { c: Color }\nconst p: P = { c: Color.Red };\nreturn p.c;", "red"),
    Case("class with methods", "fit", "class Counter { n = 0; inc() { this.n++; return this; } }\nreturn new Counter().inc().inc().n;", 2),
    # ---- keeping values between executions (issue 47, item 6) --------------------------------
    Case("localStorage for a cache", "hint", "const cached = localStorage.getItem('issues');\nif (cached) return JSON.parse(cached);\nconst fresh = await everything.echo({ message: 'x' });\nlocalStorage.setItem('issues', JSON.stringify(fresh));\nreturn fresh;", ["state.set", "state.get"]),
    Case("state with the Web Storage names", "hint", "await state.setItem('last_run', new Date().toISOString());\nreturn 'saved';", ["state.set", "no `setItem`"]),
    Case("sessionStorage read back", "hint", "return sessionStorage.getItem('cursor') ?? 'start';", ["state.get"]),
    Case("globalThis cache from an earlier run", "hint", "const cached = globalThis.__issueCache.items;\nreturn cached.length;", ["fresh globals", "state.set"]),
    Case("module-level cache expected to persist", "hint", "let cache;\nif (cache.issues) return cache.issues;\ncache = { issues: await everything.echo({ message: 'x' }) };\nreturn cache.issues;", ["module-level variable", "state.set"]),
    Case("a Date read back from state", "hint", "await state.set('last_run', new Date());\nconst last = await state.get('last_run');\nreturn Date.now() - last.getTime();", ["ISO text", "new Date(last).getTime()"]),
    # ---- fan-out, loops and results ----------------------------------------------------------
    Case("Promise.all fan-out", "fit", "const words = ['a', 'b', 'c'];\nconst out = await Promise.all(words.map((w) => everything.echo({ message: w })));\nreturn out;", ["Echo: a", "Echo: b", "Echo: c"]),
    Case("destructured Promise.all", "fit", "const [x, y] = await Promise.all([everything.get_sum({ a: 1, b: 1 }), everything.echo({ message: 'y' })]);\nreturn [typeof x, y];", ["string", "Echo: y"]),
    Case("sequential for-of", "fit", "const out: string[] = [];\nfor (const m of ['1', '2']) out.push(await everything.echo({ message: m }));\nreturn out.join(',');", "Echo: 1,Echo: 2"),
    Case("allSettled", "fit", "const r = await Promise.allSettled([everything.echo({ message: 'ok' }), everything.get_sum({ a: 'x', b: 1 })]);\nreturn r.map((x) => x.status);", ["fulfilled", "rejected"]),
    Case("structured content", "fit", "const w = await everything.get_structured_content({ location: 'Chicago' });\nreturn typeof w.temperature;", "number"),
    Case("regex on a text result", "fit", "const s = await everything.get_sum({ a: 20, b: 22 });\nreturn Number(String(s).match(/(-?\\d+(\\.\\d+)?)\\.?$/)![1]);", 42),
    Case("try/catch around a failing call", "fit", "try { await everything.get_sum({ a: 'x', b: 1 }); return 'no error'; } catch (e: any) { return e.name; }", contains("Error")),
    Case("optional chaining and nullish", "fit", "const r: any = await everything.get_structured_content({ location: 'Chicago' });\nreturn r?.missing?.deep ?? 'fallback';", "fallback"),
    Case("reduce and entries", "fit", "const o = { a: 1, b: 2, c: 3 };\nreturn Object.entries(o).reduce((s, [, v]) => s + v, 0);", 6),
    Case("sleep helper", "fit", "const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));\nawait sleep(20);\nreturn 'slept';", "slept"),
    Case("memory round trip", "fit", "await memory.create_entities({ entities: [{ name: 'Ada', entityType: 'person', observations: ['wrote notes'] }] });\nconst g = await memory.read_graph({});\nreturn g.entities.some((e: any) => e.name === 'Ada');", True),
    Case("memory search", "fit", "await memory.create_entities({ entities: [{ name: 'Grace', entityType: 'person', observations: ['compilers'] }] });\nconst r = await memory.search_nodes({ query: 'compilers' });\nreturn r.entities.map((e: any) => e.name);", ["Grace"]),
    Case("filesystem read", "fit", "const roots: any = await filesystem.list_allowed_directories({});\nconst listing = typeof roots === 'string' ? roots : roots.content;\nconst root = String(listing).split('\\n').pop()!.trim();\nconst file: any = await filesystem.read_text_file({ path: `${root}/hello.txt` });\nreturn String(typeof file === 'string' ? file : file.content).trim();", "hello from the filesystem backend"),
    # ---- large results, as the model reads them (issue 47, items 4 and 5) -----------------------
    Case("read a whole file and return it", "shown", "const roots: any = await filesystem.list_allowed_directories({});\nconst root = String(roots.content ?? roots).split('\\n').pop()!.trim();\nconst file = await filesystem.read_text_file({ path: `${root}/notes.md` });\nreturn file;", ["Note 0: ", "Note 499: ", "characters left out: read_output with json_path"]),
    Case("return every ticket under a small budget", "shown", "const tickets = Array.from({ length: 167 }, (_, i) => ({ id: `T-${i}`, subject: `Printer ${i} jams`, status: 'open', priority: i % 3, assignee: 'sam' }));\nreturn tickets;", ['"count": 167', '"keys": ["id", "subject", "status", "priority", "assignee"]'], extra={"max_output_size": 400}),
    # ---- the runtime agent code expects -----------------------------------------------------
    Case("console.table", "fit", "console.table([{ name: 'a', n: 1 }, { name: 'b', n: 2 }]);\nreturn 'tabled';", "tabled"),
    Case("console group count time assert", "fit", "console.group('g'); console.count(); console.groupEnd(); console.time('t'); console.timeEnd('t'); console.assert(true); return 'logged';", "logged"),
    Case("setInterval polling", "fit", "let polls = 0;\nawait new Promise<void>((done) => { const id = setInterval(() => { polls++; if (polls === 3) { clearInterval(id); done(); } }, 5); });\nreturn polls;", 3),
    Case("localeCompare sort", "fit", "return ['banana', 'Apple', 'cherry', 'apple'].sort((a, b) => a.localeCompare(b));", ["apple", "Apple", "banana", "cherry"]),
    Case("numeric collator", "fit", "return ['file10', 'file2', 'file1'].sort(new Intl.Collator(undefined, { numeric: true }).compare);", ["file1", "file2", "file10"]),
    Case("toLocaleString grouping", "fit", "return (1234567.5).toLocaleString('en-US');", "1,234,567.5"),
    Case("currency", "fit", "return new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD' }).format(1234.5);", "$1,234.50"),
    # ---- locale formats as a UK user's report or a dashboard wants them (issue 47, item 11) -----
    Case("UK date", "fit", "const due = new Date(Date.UTC(2024, 3, 2));\nreturn `Due: ${due.toLocaleDateString('en-GB')}`;", "Due: 02/04/2024"),
    Case("list of names", "fit", "const names = ['Ana', 'Ben', 'Cy'];\nreturn `Assigned to ${new Intl.ListFormat('en', { style: 'long', type: 'conjunction' }).format(names)}`;", "Assigned to Ana, Ben, and Cy"),
    Case("compact follower counts", "fit", "const fmt = new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 1 });\nreturn [1234, 56789, 1250000].map((n) => fmt.format(n));", ["1.2K", "56.8K", "1.3M"]),
    Case("file sizes with units", "fit", "const mb = 1536 / 1024;\nreturn new Intl.NumberFormat('en-US', { style: 'unit', unit: 'megabyte', maximumFractionDigits: 1 }).format(mb);", "1.5 MB"),
    Case("timing a loop with performance.now", "fit", "const t0 = performance.now();\nlet s = 0; for (let i = 0; i < 1e5; i++) s += i;\nconst ms = performance.now() - t0;\nreturn typeof ms === 'number' && ms >= 0 && s > 0;", True),
    Case("dates", "fit", "const d = new Date(Date.UTC(2026, 0, 5));\nreturn d.toLocaleDateString('en-US', { year: 'numeric', month: 'long', day: 'numeric' });", "January 5, 2026"),
    Case("AbortSignal.timeout on a fast call", "fit", "const r = await everything.echo({ message: 'fast' }, { signal: AbortSignal.timeout(5000) });\nreturn r;", "Echo: fast"),
    Case("AbortController on a slow call", "fit", "const c = new AbortController();\nsetTimeout(() => c.abort(), 50);\ntry { await everything.trigger_long_running_operation({ duration: 5, steps: 5 }, { signal: c.signal }); return 'done'; } catch (e: any) { return e.name; }", "AbortError"),
    Case("URL and search params", "fit", "const u = new URL('https://example.com/a?b=1&c=2');\nreturn [u.hostname, u.searchParams.get('c')];", ["example.com", "2"]),
    Case("randomUUID", "fit", "return crypto.randomUUID().length;", 36),
    Case("TextEncoder", "fit", "return new TextEncoder().encode('héllo').length;", 6),
    Case("structuredClone", "fit", "const a = { x: [1, 2] };\nconst b = structuredClone(a);\nb.x.push(3);\nreturn a.x.length;", 2),
    Case("Map and Set results", "fit", "return { m: new Map([['k', 1]]), s: new Set([1, 2]) };", {"m": {"k": 1}, "s": [1, 2]}),
    # ---- what fails, and says how to fix it -------------------------------------------------
    Case("positional argument", "hint", "return await everything.echo('hi');", ["everything.echo({ message: … })"]),
    Case("content[0].text on a mapped result", "hint", "const r = await everything.echo({ message: 'a' });\nreturn r.content[0].text;", ["already mapped", ".raw("]),
    Case("doubled prefix", "hint", "return await everything.everything_echo({ message: 'a' });", ["Did you mean `everything.echo`"]),
    Case("wrong case", "hint", "return await everything.Echo({ message: 'a' });", ["Did you mean `everything.echo`"]),
    Case("missing await", "hint", "const r = everything.echo({ message: 'a' });\nreturn r.toUpperCase();", ["without `await`"]),
    Case("array of unawaited calls", "hint", "return [everything.echo({ message: 'a' }), everything.echo({ message: 'b' })];", ["holds a Promise", "Promise.all"]),
    Case("forgot return", "hint", "const a = await everything.echo({ message: 'a' });\nconst b = await everything.echo({ message: 'b' });\nconsole.log(a, b);", ["returned nothing after 2 call(s)", "add `return"]),
    Case("backend typo", "hint", "return await everythin.echo({ message: 'a' });", ["Did you mean `everything`"]),
    Case("tool used as a global", "hint", "return await echo({ message: 'a' });", ["is a tool, not a global", "everything.echo"]),
    Case("value import", "hint", "import _ from 'lodash';\nreturn 1;", ["Backends are already globals"]),
    Case("fs import without an fs grant", "hint", "import fs from 'node:fs/promises';\nreturn await fs.readFile('/etc/hostname', 'utf8');", ["grants no files"]),
    Case("decorators", "hint", "function log(t: any) { return t; }\nclass A { @log m() { return 1; } }\nreturn new A().m();", ["decorators", "directly"]),
    Case("fetch", "hint", "const r = await fetch('https://example.com');\nreturn r.status;", ["no network access"]),
    Case("require", "hint", "const fs = require('fs');\nreturn 1;", ["no modules"]),
    Case("process.env", "hint", "return process.env.HOME;", ["no process"]),
    Case("JSON.parse of a parsed result", "hint", "const r = await everything.echo({ message: 'a' });\nreturn JSON.parse(r);", ["already parsed"]),
    Case("meta-tool from code", "hint", "return await search_tools({ query: 'echo' });", ["meta-tools"]),
    # The sandbox's copy of the names lacked read_output; the gateway now hands over its own.
    Case("read_output from code", "hint", "return await read_output({ execution_id: 'x' });", ["meta-tools"]),
    Case("unsupported locale", "hint", "return (5).toLocaleString('ja-JP');", ["not supported in the sandbox", "en-US, en-GB, de-DE and fr-FR", "V8 engine"]),
    # ---- a key the result's type lacks (issue 47, item 7) ----------------------------------------
    Case("returns a key the result lacks", "hint", "const weather = await everything.get_structured_content({ location: 'Chicago' });\nreturn weather.temp;", ["`weather.temp` is undefined", "`temperature`", "declared output type"]),
    Case("reads the text of a file as .text", "hint", "const roots: any = await filesystem.list_allowed_directories({});\nconst root = String(roots.content ?? roots).split('\\n').pop()!.trim();\nconst file = await filesystem.read_text_file({ path: `${root}/hello.txt` });\nreturn file.text;", ["`file.text` is undefined", "`content`"]),
    # ---- arguments the declaration refuses, checked before the call goes out (issue 47, item 8) --
    Case("misspelt argument key", "hint", "const r = await everything.echo({ mesage: 'hello' });\nreturn r;", ["missing required argument `message`", "did you mean `message`", "declared as"]),
    Case("numbers passed as strings", "hint", "const total = await everything.get_sum({ a: '2', b: '3' });\nreturn total;", ["`a` must be a number", "`b` must be a number", "declared as"]),
    Case("unknown tool", "hint", "return await everything.echoo({ message: 'a' });", ["Did you mean `everything.echo`"]),
    # ---- contained -----------------------------------------------------------------------------
    Case("endless loop", "guard", "while (true) {}", "timeout", timeout_ms=500),
    Case("interval that never ends the script", "guard", "setInterval(() => {}, 0);\nawait new Promise(() => {});", "timeout", timeout_ms=500),
    Case("unbounded recursion", "guard", "function f(n: number): number { return f(n + 1) + 1; }\nreturn f(0);", "stack"),
    Case("memory bomb", "guard", "const keep: number[][] = [];\nwhile (true) keep.push(new Array(100000).fill(1));", "memory"),
    Case("a huge console.table", "guard", "const rows = Array.from({ length: 20000 }, (_, i) => ({ i, s: 'x'.repeat(50) }));\nconsole.table(rows);\nreturn rows.length;", None),
]


def words_of(result) -> str:
    data = result.structured_content or {}
    error = data.get("error") or {}
    parts = [error.get("message") or "", error.get("hint") or "", *(data.get("notes") or [])]
    text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    return "\n".join(parts) + "\n" + text


async def test_the_agent_fit_corpus(tmp_path):
    assert len(CASES) >= 60, len(CASES)
    servers = reference_servers(tmp_path)
    (tmp_path / "files" / "notes.md").write_text("".join(f"Note {i}: call the vendor about the printer on floor {i % 9}.\n" for i in range(500)))
    config = write_config(tmp_path, "toml", servers)
    problems: list[str] = []
    async with connect("stdio", config) as client:
        for case in CASES:
            args = {"code": case.code, **case.extra}
            if case.timeout_ms:
                args["timeout_ms"] = case.timeout_ms
            result = await client.call_tool("call_tool_chain", args)
            data = result.structured_content or {}
            error = data.get("error")
            if case.kind == "fit":
                value = data.get("result")
                ok = case.expect(value) if callable(case.expect) else value == case.expect
                if error or not ok:
                    problems.append(f"fit {case.label!r}: got {value!r}, error {error!r}")
            elif case.kind == "shown":
                words = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
                missing = [w for w in case.expect if w not in words]
                if error or missing:
                    problems.append(f"shown {case.label!r}: missing {missing} in {words[:300]!r}…, error {error!r}")
            elif case.kind == "hint":
                words = words_of(result)
                missing = [w for w in case.expect if w not in words]
                if missing:
                    problems.append(f"hint {case.label!r}: missing {missing} in {re.sub(chr(10), ' | ', words)[:600]}")
            else:
                kind = (error or {}).get("kind")
                if case.expect is not None and kind != case.expect:
                    problems.append(f"guard {case.label!r}: ended {kind!r}, expected {case.expect!r}")
                still = await client.call_tool("call_tool_chain", {"code": "return 'still here'"})
                if (still.structured_content or {}).get("result") != "still here":
                    problems.append(f"guard {case.label!r}: the gateway did not answer afterwards")
    assert not problems, f"{len(problems)} of {len(CASES)} cases failed:\n" + "\n".join(problems)
