"""Hostile inputs at the MCP level, against `sandgate serve` with the real npm servers: one table per
class of DESIGN.md section 10 (depth, size, count, time, channels between executions, ambient
references, encodings). Every case checks its error kind, time, response size and the peak RSS of
the gateway and its workers, then that the gateway still answers (see hostile.py)."""

import json

import pytest

from hostile import Case, run_table

pytestmark = pytest.mark.anyio

N = 5000  # deep enough to overflow any parser stack that is not sized for it


def contains(*needles):
    def check(data, text):
        missing = [n for n in needles if n not in text]
        return f"response lacks {missing}: {text[:300]}" if missing else None

    return check


def result_is(expected):
    def check(data, text):
        got = data.get("result")
        return None if got == expected else f"result {got!r}, expected {expected!r}"

    return check


DEPTH = [
    Case("brackets", f"return {'[' * N}{']' * N}", kind="syntax", check=contains("1000 levels")),
    Case("parens", f"return {'(' * N}1{')' * N}", kind="syntax"),
    Case("braces", f"{'{' * N}{'}' * N}", kind="syntax"),
    Case("arrows", f"return {'x=>' * 100_000}x", kind="syntax"),
    Case("arrows across lines", f"return {'x =>' + chr(10)}" * 20_000 + "x", kind="syntax"),
    Case("not", f"return {'!' * 100_000}x", kind="syntax"),
    Case("unary minus", f"return {'- ' * 50_000}1", kind="syntax"),
    Case("plus chain", f"return {'1+' * 100_000}1", kind="syntax"),
    Case("ternary", f"return {'a?b:' * 20_000}c", kind="syntax"),
    Case("assignments", f"let a; return {'a=' * 50_000}1", kind="syntax"),
    Case("template literals", f"return {'`${' * N}1{'}`' * N}", kind="syntax"),
    Case("async arrows", f"{'async()=>{' * N}{'}' * N}", kind="syntax"),
    Case("functions", f"{'function f(){' * N}{'}' * N}", kind="syntax"),
    Case("object literal", f"return {'{a:' * N}1{'}' * N}", kind="syntax"),
    Case("generic type", f"let x: {'A<' * N}number{'>' * N} = 1", kind="syntax"),
    Case("if chain", f"{'if(1)' * N};", kind="syntax"),
    Case("new chain", f"return {'new ' * 50_000}X", kind="syntax"),
    Case("member chain", f"return a{'.b' * 50_000}", kind="syntax"),
    Case("call chain", f"return f{'()' * N}", kind="syntax"),
    Case("tool call with deep literal arguments", f"return await everything.echo({{message: {'[' * N}1{']' * N}}})", kind="syntax"),
    Case("else-if chain", "if (1) {}" + " else if (0) {}" * 15_000, kind="syntax"),
    # A chain the lexical check does not count (each `;` ends a chain): the host still parses it
    # on a stack sized for it, and QuickJS refuses it with its own stack limit.
    Case("else-if chain of statements", "if (0) ;" + " else if (0) ;" * 15_000 + "\nreturn 'parsed'", kind="stack"),
    Case("deep JSON call", json.dumps({"tool": "everything.echo", "arguments": {"message": "x"}})[:-2] + ', "deep": ' + "[" * N + "]" * N + "}}", kind="any"),
    Case("deep value built at runtime, returned", "let a = []; for (let i = 0; i < 100000; i++) a = [a]; return a", kind="any"),
    Case("deep value built at runtime, sent to a tool", "let a = []; for (let i = 0; i < 100000; i++) a = [a]; return await everything.echo({message: a})", kind="any"),
    Case("deep recursion", "function f(n) { return f(n + 1) + 1 } return f(0)", kind="stack"),
    Case("code over the size limit", "return 1;" + " " * 300_000, kind="syntax", check=contains("max_code_bytes")),
]



def logs_readable(data, text):
    if not data.get("logs_truncated"):
        return "logs were not marked truncated"
    if "part\": \"logs\"" not in text:
        return "the text does not say how to read the whole logs"
    return None


def shaped_with_handle(data, text):
    if not data.get("shaped") or not (data.get("output") or {}).get("resource"):
        return f"not shaped with a handle: {json.dumps(data.get('output'))}"
    return None


def error_cut(data, text):
    message = (data.get("error") or {}).get("message", "")
    if len(message) > 2000:
        return f"error message of {len(message)} chars shown"
    return None if "part\": \"error\"" in text else "no handle to the whole error"


BIG_ITEMS = "Array.from({length: 5000}, (_, i) => ({id: i, name: 'item ' + i, tags: ['a', 'b'], size: i * 7}))"

SIZE = [
    Case("empty log lines for 2 s", "const end = Date.now() + 2000; while (Date.now() < end) console.log('')", kind=None, seconds=2.5, check=logs_readable),
    Case("200,000 short log lines", "for (let i = 0; i < 200000; i++) console.log(i)", kind=None, seconds=3, check=logs_readable),
    Case("one 2 MB log line", "console.log('x'.repeat(2e6)); return 1", kind=None, check=logs_readable),
    Case("logged objects of 500 KB", "const o = {s: 'y'.repeat(5e5)}; for (let i = 0; i < 20; i++) console.log(o); return 1", kind=None, check=logs_readable),
    Case("3 MB error message", "throw new Error('x'.repeat(3e6))", kind="runtime", check=error_cut),
    Case("3 MB thrown string", "throw 'x'.repeat(3e6)", kind="runtime", check=error_cut),
    Case("a 5,000-item array (212 KB) is shaped, not refused", f"return {BIG_ITEMS}", kind=None, check=shaped_with_handle),
    Case("a 4 MB string result is shaped", "return 'ab'.repeat(2e6)", kind=None, check=shaped_with_handle, gateway_mib=96),
    Case("a 20 MB result passes the raw limit", "return 'x'.repeat(20e6)", kind="output_limit", check=contains("max_result_bytes"), gateway_mib=96, worker_mib=160),
    Case("a small max_output_size holds", f"return {BIG_ITEMS}", extra={"max_output_size": 300}, kind=None, check=shaped_with_handle),
    Case("logs and an error with a small max_output_size", "for (let i = 0; i < 1000; i++) console.log('line', i); throw new Error('e'.repeat(50000))", extra={"max_output_size": 100}, kind="runtime"),
    Case("1,000 calls listed", "for (let i = 0; i < 1000; i++) await everything.echo({message: 'm' + i}); throw new Error('after')", kind="runtime", seconds=20, check=contains("1000 completed call")),
    Case("an 11 MiB argument is refused before the backend", "return await everything.echo({message: 'x'.repeat(11 * 1024 * 1024)})", kind="any", check=contains("4 MiB"), gateway_mib=96, worker_mib=160),
    Case("48 calls of 6 MiB arguments", "return (await Promise.all(Array.from({length: 48}, () => everything.echo({message: 'x'.repeat(6 * 1024 * 1024)})))).length", kind="any", seconds=10, gateway_mib=128, worker_mib=160),
    Case("ArrayBuffer churn stays under the heap limit", "for (let n = 1; n < 64; n++) { try { new ArrayBuffer(n * 1024 * 1024) } catch (e) {} } return 1", kind=None, worker_mib=160),
    # V8 makes the repeated string a rope of a few nodes, so it needs no 100 MB and answers.
    Case("a 100 MB allocation", "return 'x'.repeat(100e6).length", kind="memory", worker_mib=160,
         on_v8={"kind": None, "check": result_is(100_000_000)}),
    # V8 grants one allocation past an isolate's heap limit before it stops the isolate (Deno
    # raises the limit so that it can stop it): the worker holds that array, briefly (SECURITY.md).
    # Stopping it takes V8 1.0-1.3 s alone (`sandgate run`, with `6f249c4` as now), and up to
    # 2.8 s in this suite, where the worker also starts a fresh isolate for the next case.
    Case("a 100 MB string made flat", "const s = 'x'.repeat(100e6); return s.split('').length", kind="memory", worker_mib=160,
         on_v8={"worker_mib": 1024, "seconds": 4}),
    Case("a read_output json_path on a huge selection", None, tool="read_output", arguments={"execution_id": "ex-none", "json_path": "$" + "[0]" * 10000}, kind="any"),
    Case("search_tools with a 1 MB query", None, tool="search_tools", arguments={"query": "echo " * 200_000}, kind="any", seconds=3),
]



COUNT = [
    Case("100,000 tool calls stop at the call limit", "for (let i = 0; i < 100000; i++) await everything.echo({message: 'x'})", kind="runtime", seconds=25, check=contains("at most 1000 calls")),
    Case("5,000 calls at once stop at the call limit", "await Promise.all(Array.from({length: 5000}, () => everything.echo({message: 'x'})))", kind="runtime", seconds=10),
    Case("20,000 timers stop at the timer limit", "for (let i = 0; i < 20000; i++) setTimeout(() => {}, 100000)", kind="runtime", check=contains("too many pending timers")),
    Case("10,000 chained promises", "let p = Promise.resolve(0); for (let i = 0; i < 1e4; i++) p = p.then(x => x + 1); return await p", kind=None, seconds=5, check=result_is(10000)),
    Case("a million chained promises run out of memory", "let p = Promise.resolve(0); for (let i = 0; i < 1e6; i++) p = p.then(x => x + 1); return await p", kind="memory", seconds=5),
    Case("a million array items", "return new Array(1e6).fill(7).length", kind=None, check=result_is(1000000)),
    Case("10,000 object keys in the result", "const o = {}; for (let i = 0; i < 10000; i++) o['k' + i] = i; return o", kind=None),
    Case("1,000 distinct log levels and lines", "for (let i = 0; i < 1000; i++) console[['log', 'info', 'warn', 'error', 'debug'][i % 5]]('line ' + i); return 1", kind=None),
]

def stopped_in_a_second(name, code):
    """Code that never ends by itself, given a 1 s limit: it must end in `timeout` by then."""
    return Case(name, code, extra={"timeout_ms": 1000}, kind="timeout", seconds=1.5)


TIME = [
    stopped_in_a_second("an endless loop", "while (true) {}"),
    stopped_in_a_second("an endless loop inside try/catch", "for (;;) { try { while (true) {} } catch (e) {} }"),
    stopped_in_a_second("an endless loop after an await", "await everything.echo({message: 'x'}); while (true) {}"),
    stopped_in_a_second("an endless loop in a timer callback", "setTimeout(() => { while (true) {} }, 0); await new Promise(() => {})"),
    stopped_in_a_second("an endless microtask loop", "(async () => { for (;;) await null })(); await new Promise(() => {})"),
    Case("an endless, growing promise chain", "const f = () => Promise.resolve().then(f); f(); await new Promise(() => {})", extra={"timeout_ms": 1000}, kind="any", seconds=1.5),
    stopped_in_a_second("a sort comparator that never ends", "[3, 2, 1].sort(() => { while (true) {} })"),
    stopped_in_a_second("toJSON of the result loops", "return {toJSON() { while (true) {} }}"),
    stopped_in_a_second("a getter on the result loops", "return {get x() { while (true) {} }}"),
    stopped_in_a_second("toJSON of a call's arguments loops", "return await everything.echo({message: {toJSON() { while (true) {} }}})"),
    stopped_in_a_second("a logged object's getter loops", "console.log({get x() { while (true) {} }})"),
    stopped_in_a_second("a Proxy in the result loops", "return new Proxy({}, {ownKeys() { while (true) {} }})"),
    stopped_in_a_second("catastrophic regular expression", "return /(a+)+$/.test('a'.repeat(40) + 'b')"),
    Case("a promise that never settles", "await new Promise(() => {})", kind="runtime", check=contains("can never happen")),
    stopped_in_a_second("a timer far in the future", "await new Promise(r => setTimeout(r, 1e9))"),
    stopped_in_a_second("a slow tool past the timeout", "return await everything['trigger-long-running-operation']({duration: 5, steps: 1})"),
    Case("a huge timeout_ms is capped", "return 1", extra={"timeout_ms": 10**15}, kind=None),
]


def fresh_counters(data, text):
    r = data.get("result") or {}
    return None if r.get("timer") == 1 and r.get("polluted") == "undefined" else f"state leaked between runs: {r}"


CHANNELS = [
    # Run twice: the second run must see nothing of the first.
    Case("globals and prototypes do not persist", "globalThis.leak = 1; Object.prototype.polluted = 'yes'; return 1", kind=None),
    Case("a fresh run sees no earlier state", "return {timer: setTimeout(() => {}, 0), polluted: typeof ({}).polluted, leak: typeof leak}", kind=None, check=fresh_counters),
    Case("execution ids carry 128 random bits", "return 1", kind=None, check=lambda d, t: None if len(d["execution_id"].rsplit("-", 1)[1]) == 32 else f"id {d['execution_id']}"),
    Case("an unknown execution id is not found", None, tool="read_output", arguments={"execution_id": "ex-0-" + "0" * 32}, kind="any", check=contains("no stored output")),
    Case("a guessed id in another owner's form is not found", None, tool="read_output", arguments={"execution_id": "ex-0@abc"}, kind="any"),
    Case("Math.random differs between runs", "return Math.random()", kind=None),
]

AMBIENT = [
    Case("import() of the preamble", "return Object.keys(await import('sandgate:preamble'))", kind="runtime", check=contains("import() is not available")),
    Case("import() of the web module", "return await import('sandgate:web')", kind="runtime", check=contains("import() is not available")),
    Case("import() through eval", "return await eval(\"import('sandgate:preamble')\")", kind="runtime", check=contains("import() is not available")),
    # On V8, Deno would load these (a node: built-in, a data: module) had the code not been checked.
    Case("import() of a node built-in", "return Object.keys(await import('node:os'))", kind="runtime", check=contains("import() is not available")),
    Case("import() of a data: module", "return (await import('data:text/javascript,export default 42')).default", kind="runtime", check=contains("import() is not available")),
    # The text below is built at run time (`I` is `import`), so V8's check of the code itself
    # does not see it: what eval and the constructors are given is checked too.
    Case("import() through eval, built at run time", "const I = 'imp' + 'ort'; return await eval(I + \"('node:fs')\")", kind="runtime", check=contains("import() is not available")),
    Case("import() through the Function constructor", "const I = 'imp' + 'ort'; return await new Function(`return ${I}('node:fs')`)()", kind="runtime", check=contains("import() is not available")),
    Case("import() through an async function's constructor", "const I = 'imp' + 'ort'; return await (async function () {}).constructor(`return ${I} /* c */ ('node:process')`)()", kind="runtime", check=contains("import() is not available")),
    # Spellings of a dynamic import that a check of the text could miss: after a spread, and
    # with Annex B's HTML-like comments before its parenthesis.
    Case("import() after a spread", "const got = []; try { got.push(...import('data:text/javascript,globalThis.leaked = 1')) } catch (e) {} await new Promise((r) => setTimeout(r, 50)); return typeof leaked",
         kind=None, check=result_is("undefined"), on_v8={"kind": "runtime", "check": contains("import() is not available")}),
    Case("import() with an HTML-like comment", "return Object.keys(await new Function(\"return import<!-- a comment\\n('node:os')\")())", kind="any",
         on_v8={"kind": "runtime", "check": contains("import() is not available")}),
    Case("import() with an HTML-like closing comment", "return Object.keys(await new Function(\"return import\\n--> a comment\\n('node:os')\")())", kind="any",
         on_v8={"kind": "runtime", "check": contains("import() is not available")}),
    Case("import() in a Function body given as an object", "const I = 'imp' + 'ort'; const body = { toString() { return `return ${I}('node:os')` } }; return Object.keys(await new Function(body)())", kind="runtime",
         check=contains("import() is not available")),
    # Its text is read once: a check that read it again would compile another text than it saw.
    Case("a Function body whose text changes when read again", "const I = 'imp' + 'ort'; let n = 0; const body = { toString() { n += 1; return n === 1 ? 'return 1' : `return ${I}('node:os')` } }; return Object.keys(await new Function(body)())", kind=None,
         check=result_is([])),
    Case("a static import", "import cp from 'child_process'; return 1", kind="syntax"),
    # An `fs` import gives the granted `fs`, and this profile grants none: refused, naming it.
    Case("a static fs import", "import { readFile } from 'fs/promises'; return await readFile('/etc/passwd', 'utf8')", kind="any", check=contains("grants no files")),
    Case("CallSite getFunction yields nothing", "const got = []; Error.prepareStackTrace = (e, s) => { for (const c of s) { const f = c.getFunction(); if (f) got.push(String(f).slice(0, 20)) } return '' }; try { await everything.echo(5) } catch (e) {} try { await everything.echo({message: {toJSON() { new Error().stack; return 'm' }}}) } catch (e) {} new Error().stack; return got", kind=None, check=result_is([])),
    Case("CallSite getFunction cannot be put back", "const s = []; Error.prepareStackTrace = (e, x) => { s.push(x[0]); return '' }; new Error().stack; const p = Object.getPrototypeOf(s[0]); try { Object.defineProperty(p, 'getFunction', {value: 1}) } catch (e) { return 'locked' } return 'open'", kind=None, check=result_is("locked")),
    Case("Function.prototype.caller", "return typeof everything.echo.caller", kind="runtime"),
    Case("arguments.callee", "return (function () { return typeof arguments.callee })()", kind="runtime"),
    Case("no natives on the global object", "return Object.getOwnPropertyNames(globalThis).filter(k => /^(natives|call|callHost|log|setTimer|toolsOf|require|process|Deno|fetch|std|os)$/.test(k))", kind=None, check=result_is([])),
    Case("replaced builtins receive no closure of ours", "const got = []; const m = Array.prototype.map; Array.prototype.map = function (f) { got.push(String(f).slice(0, 20)); return m.call(this, f) }; const j = JSON.stringify; JSON.stringify = function (v, r) { if (r) got.push('replacer'); return j(v, r) }; console.log({a: 1}, [2]); try { await everything.echo(5) } catch (e) {} new URLSearchParams('a=1').getAll('a'); return got", kind=None, check=result_is([])),
    Case("the Function constructor stays inside", "return new Function('return typeof process + typeof require')()", kind=None, check=result_is("undefinedundefined")),
    Case("no Atomics.waitAsync (its timeout would run code after the execution)", "return typeof Atomics.waitAsync", kind=None, check=result_is("undefined")),
    Case("an error at the stack's edge inside a native is the guest's own",
         "let caught = null; const deep = () => { try { console.log('x'); deep(); } catch (e) { if (caught === null) caught = e; } }; deep();"
         " const F = caught.constructor.constructor; return [caught instanceof RangeError, F === Function, F('return globalThis')() === globalThis]",
         kind=None, check=result_is([True, True, True])),
    Case("every global is of the guest's own realm",
         "const foreign = []; for (const k of Object.getOwnPropertyNames(globalThis)) { const v = globalThis[k];"
         " if (v === null || (typeof v !== 'object' && typeof v !== 'function') || Object.getPrototypeOf(v) === null) continue;"
         " let p = v, mine = false; for (let i = 0; i < 64 && p !== null; i++) { if (p === Object.prototype) { mine = true; break; } p = Object.getPrototypeOf(p); }"
         " if (!mine) foreign.push(k); } return foreign",
         kind=None, check=result_is([])),
    Case("the bootstrap's names are gone", "return Object.getOwnPropertyNames(globalThis).filter(k => /^(host|__SG_GUEST|__SG_PREAMBLE|__SG_WEB|module|exports|__dirname|__filename)$/.test(k))", kind=None, check=result_is([])),
]

ENCODINGS = [
    Case("a lone surrogate in a log line", "console.log('a\\ud800b'); return 1", kind=None, check=contains("a\ufffdb")),
    Case("a lone surrogate in the result", "return {s: 'x\\udc00y'}", kind=None, check=result_is({"s": "x\ufffdy"})),
    Case("a lone surrogate in an error", "throw new Error('bad \\ud800')", kind="runtime", check=contains("bad \ufffd")),
    Case("a lone surrogate in a call's arguments", "return await everything.echo({message: 'x\\ud800'})", kind=None, check=result_is("Echo: x\ufffd")),
    Case("a lone surrogate in a single call (tier 2)", "everything.echo({message: 'y\\udbff'})", kind=None, check=result_is("Echo: y\ufffd")),
    Case("NUL bytes survive", "return 'a\\u0000b'", kind=None, check=result_is("a\u0000b")),
    Case("U+2028 and U+2029 in code and result", "const s = 'a\u2028b\u2029c'; return s", kind=None, check=result_is("a\u2028b\u2029c")),
    Case("a right-to-left override in a result", "return 'abc\\u202edef'", kind=None, check=result_is("abc\u202edef")),
    Case("invalid UTF-16 pairs reversed", "return '\\udc00\\ud800'", kind=None, check=result_is("\ufffd\ufffd")),
]







TABLES = {"depth": DEPTH, "size": SIZE, "count": COUNT, "time": TIME, "channels": CHANNELS, "ambient": AMBIENT, "encodings": ENCODINGS}


CLASSES = [pytest.param(name, engine, id=f"{name}-{engine}") for engine in ["quickjs", "v8"] for name in TABLES]


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("name", "engine"), CLASSES)
async def test_hostile_class(tmp_path, name, engine):
    """One gateway per class and engine; every case of the class through it."""
    await run_table(tmp_path, TABLES[name], engine)


def test_the_suite_is_large_enough():
    assert sum(len(t) for t in TABLES.values()) >= 80
