"""Real operations (issue 18, items 2-4): a backend that is slow to start still connects, the
config is reloaded while serving, and the HTTP listener answers health, readiness and metrics."""

from __future__ import annotations

import json
import time

import anyio
import pytest

from mcp import Client, StdioServerParameters

from conftest import NODE_MODULES, REPO, SANDGATE, connect, one_process_only, structured, text_of, write_config

pytestmark = pytest.mark.anyio

SLOW_START = REPO / "tests" / "fixtures" / "slow_start.sh"


async def test_a_server_that_takes_12_s_to_start_connects(tmp_path):
    """A 2025-11-25 server (the real npm memory server) that first answers 12 s after it was
    started, as `npx -y` on first run does. rmcp's own era probe gives up after 10 s, and the
    late answer used to fail the handshake; `handshake_timeout` now bounds it all."""
    memory = str(NODE_MODULES / "server-memory/dist/index.js")
    slow = {
        "command": str(SLOW_START),
        "args": ["12", "node", memory],
        "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
        "timeout": "40s",
    }
    config = write_config(tmp_path, "toml", {"slowmemory": slow})
    async with connect("stdio", config, settle=False) as client:
        started = time.monotonic()
        status = await settled_status(client, "slowmemory", 40)
        assert status["state"] == "ready", status
        assert time.monotonic() - started > 8, "the backend was meant to be slow"
        assert status["protocol_version"] == "2025-11-25", status
        assert status["restarts"] == 0 and status["last_error"] is None, status
        graph = structured(await client.call_tool(
            "call_tool_chain", {"code": {"tool": "slowmemory.read_graph", "arguments": {}}}))
        assert graph["result"] == {"entities": [], "relations": []}, graph


async def backend_status(client, name: str) -> dict:
    return json.loads((await client.read_resource(f"sandgate://backend/{name}")).contents[0].text)


async def settled_status(client, name: str, seconds: float) -> dict:
    """The backend's status once its first connection attempt is over (or `seconds` passed)."""
    deadline = time.monotonic() + seconds
    status = await backend_status(client, name)
    while status["state"] == "starting" and time.monotonic() < deadline:
        await anyio.sleep(0.2)
        status = await backend_status(client, name)
    return status


async def test_a_2026_stdio_backend_is_found_modern_by_the_probe(tmp_path):
    """The era probe's other answer: a stdio backend that speaks 2026-07-28 (the fake backend
    in its `modern` mode; sandgate itself is never started as a backend) is connected with
    `server/discover`, not `initialize`, and its tools are called."""
    import sys
    from conftest import FAKE_BACKEND

    config = write_config(tmp_path, "toml", {"inner": {"command": sys.executable, "args": [str(FAKE_BACKEND), "modern"]}})
    async with connect("stdio", config) as client:
        status = await settled_status(client, "inner", 20)
        assert status["state"] == "ready" and status["protocol_version"] == "2026-07-28", status
        result = await client.call_tool("call_tool_chain", {"code": 'return await inner.echo({text: "modern"})'})
        assert (result.structured_content or {}).get("result") == "modern", result.content


async def until(predicate, seconds: float, what: str):
    """Polls the async `predicate` until it is true, or fails naming `what`."""
    deadline = time.monotonic() + seconds
    while True:
        value = await predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await anyio.sleep(0.2)


async def tool_names(client) -> set[str]:
    found = structured(await client.call_tool("search_tools", {"query": "entities graph echo pid", "limit": 50}))
    return {r["name"] for r in found["results"]}


@one_process_only("it follows backend processes by pid, and each replica runs its own (a reload across replicas is tested by the token and profile reloads)")
async def test_a_served_config_is_reloaded_when_it_changes(tmp_path):
    """Item 3: editing the served file adds the new backend's tools (the real memory server),
    takes a removed backend's away, restarts only the entry that changed, and tells the client
    `tools/list_changed`. A file that then fails to load is reported and the running config
    kept; SIGHUP reloads too."""
    import signal
    import sys
    from conftest import FAKE_BACKEND, HttpServer, reference_servers

    fake = lambda: {"command": sys.executable, "args": [str(FAKE_BACKEND), "ok"]}
    memory = reference_servers(tmp_path)["memory"]
    config = write_config(tmp_path, "toml", {"keep": fake(), "edited": fake(), "gone": memory})
    notifications = []

    async def on_message(message):
        if type(message).__name__ == "ToolListChangedNotification":
            notifications.append(message)

    server = HttpServer(config)
    try:
        async with Client(server.target(), mode="legacy", message_handler=on_message) as client:
            pid = lambda backend: call_text(client, f"{backend}.pid")
            await until(lambda: has_tools(client, {"keep.pid", "edited.pid", "gone.read_graph"}), 20, "the first tools")
            keep_pid, edited_pid = await pid("keep"), await pid("edited")
            await anyio.sleep(1)
            seen = len(notifications)

            edited = fake() | {"env": {"EDITED": "yes"}}
            text = write_config(tmp_path, "toml", {"keep": fake(), "edited": edited, "fresh": memory}).read_text()
            config.write_text(text)
            await until(lambda: has_tools(client, {"fresh.read_graph", "fresh.create_entities"}), 20, "the added backend's tools")
            names = await tool_names(client)
            assert not any(n.startswith("gone.") for n in names), names
            assert await pid("keep") == keep_pid, "an unchanged backend keeps its process"
            assert await pid("edited") != edited_pid, "the changed entry was restarted"
            assert len(notifications) > seen, "the client heard tools/list_changed"
            assert any("removed: gone" in line and "added: fresh" in line and "restarted: edited" in line
                       for line in server.log), server.log

            config.write_text(text.replace("[servers.keep]", "[servers.keep\n"))
            await until(lambda: has_log(server, "did not load"), 10, "the load error in the log")
            assert await pid("keep") == keep_pid, "a config that does not load changes nothing"

            config.write_text(text)
            server.signal(signal.SIGHUP)
            await until(lambda: has_log(server, "SIGHUP: reloading"), 10, "the SIGHUP reload")
            assert server.running(), "SIGHUP does not stop sandgate"
            assert await pid("keep") == keep_pid
    finally:
        server.close()


async def test_reload_problems_are_told_where_the_user_looks(tmp_path):
    """Issue 34, item 5: an edit that does not load is said to connected clients (an MCP log
    message), in `sandgate://overview` and until a later edit loads; a call cut off because a
    reload removed its backend says so, not that the backend is being restarted."""
    import sys
    from conftest import FAKE_BACKEND

    fake = lambda: {"command": sys.executable, "args": [str(FAKE_BACKEND), "ok"]}
    config = write_config(tmp_path, "toml", {"keep": fake(), "gone": fake()})
    logged = []

    async def on_message(message):
        if type(message).__name__ == "LoggingMessageNotification":
            logged.append(str(message.params.data))

    params = StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(config)])
    async with Client(params, mode="legacy", read_timeout_seconds=60, message_handler=on_message) as client:
        await until(lambda: has_tools(client, {"keep.pid", "gone.pid"}), 20, "the first tools")
        good = config.read_text()
        # A call in flight on a backend the next edit removes.
        cut = {}

        async def slow_call():
            cut["result"] = await client.call_tool("call_tool_chain", {"code": 'return await gone.slow({ms: 8000})'})

        async with anyio.create_task_group() as group:
            group.start_soon(slow_call)
            await anyio.sleep(1)
            config.write_text(write_config(tmp_path, "toml", {"keep": fake()}).read_text())
        said = text_of(cut["result"])
        assert "a reload took it out of the config" in said and "restarting" not in said, said

        config.write_text(good.replace("[servers.keep]", "[servers.keep\n"))
        with anyio.fail_after(15):
            while not any("could not load the changed config" in line for line in logged):
                await anyio.sleep(0.1)
        overview = (await client.read_resource("sandgate://overview")).contents[0].text
        assert "## The config did not load" in overview and "servers.keep" in overview, overview

        config.write_text(good)
        await until(lambda: has_tools(client, {"gone.pid"}), 20, "the fixed config's tools")
        overview = (await client.read_resource("sandgate://overview")).contents[0].text
        assert "did not load" not in overview, overview


async def test_a_config_caught_while_it_is_written_is_not_loaded(tmp_path):
    """A file emptied, then written (as `>` in a shell or an editor that writes in place does),
    and seen while empty: the running config stays. It used to load the empty file as a
    config with no backends, and every tool went."""
    import sys
    from conftest import FAKE_BACKEND

    fake = {"command": sys.executable, "args": [str(FAKE_BACKEND), "ok"]}
    config = write_config(tmp_path, "toml", {"keep": fake})
    params = StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(config)])
    async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
        await until(lambda: has_tools(client, {"keep.pid"}), 20, "the first tools")
        good = config.read_text()
        config.write_text("")
        await anyio.sleep(2.5)  # more than two looks at the file
        assert await has_tools(client, {"keep.pid"}), "the tools went with the emptied file"
        config.write_text(good.replace("[servers.keep]", "[servers.kept]"))
        await until(lambda: has_tools(client, {"kept.pid"}), 20, "the written config's tools")


def test_the_console_shows_a_config_that_did_not_load(tmp_path):
    """Item 5, the console: `/ui/api/me` carries the reason for an admin (the page shows it as
    a banner), until a later edit loads."""
    import sys
    import urllib.request
    from conftest import FAKE_BACKEND, HttpServer

    config = write_config(tmp_path, "toml", {"keep": {"command": sys.executable, "args": [str(FAKE_BACKEND), "ok"]}})
    good = config.read_text()
    config.write_text(good + '\n[http]\nauth = "none"\n')
    good = config.read_text()
    server = HttpServer(config)
    try:
        me = lambda: json.loads(urllib.request.urlopen(server.url.removesuffix("/mcp") + "/ui/api/me", timeout=10).read())
        # Three reads in a row: through a balancer, one reaches each replica.
        everywhere = lambda has: all(has(me()["config_problem"]) for _ in range(3))
        assert me()["config_problem"] is None
        config.write_text(good.replace("[servers.keep]", "[servers.keep\n"))
        deadline = time.monotonic() + 15
        while not everywhere(lambda problem: problem is not None):
            assert time.monotonic() < deadline, "the console never heard"
            time.sleep(0.2)
        assert "could not load the changed config" in me()["config_problem"]["message"]
        config.write_text(good)
        deadline = time.monotonic() + 15
        while not everywhere(lambda problem: problem is None):
            assert time.monotonic() < deadline, "the problem outlived the fix"
            time.sleep(0.2)
    finally:
        server.close()


async def call_text(client, tool: str) -> str:
    result = structured(await client.call_tool("call_tool_chain", {"code": {"tool": tool, "arguments": {}}}))
    return result["result"]


async def has_tools(client, wanted: set[str]) -> bool:
    return wanted <= await tool_names(client)


async def has_log(server, text: str) -> bool:
    return server.logged(text)


@pytest.mark.parametrize("record_arguments", [False, True])
async def test_what_the_agent_did_is_on_record(tmp_path, record_arguments):
    """Item 5: an execution's record keeps its code and, per call, the tool, the start, the
    duration, the outcome, the sizes and why it failed; the arguments only with `[store]
    record_arguments = true`. `sandgate executions show` prints it in local time."""
    import os
    import re
    import subprocess
    from conftest import SANDGATE, reference_servers

    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    if record_arguments:
        config.write_text(config.read_text().replace("[store]", "[store]\nrecord_arguments = true"))
    code = (
        'const made = await memory.create_entities({entities: [{name: "Ada", entityType: "person", observations: ["sec" + "ret-" + (40 + 2)]}]});\n'
        'try { await filesystem.read_text_file({path: "/nowhere/at/all"}); } catch (e) {}\n'
        'return made;'
    )
    async with connect("stdio", config) as client:
        result = structured(await client.call_tool("call_tool_chain", {"code": code}))
    env = {**os.environ, "TZ": "Asia/Kolkata"}
    shown = subprocess.run([SANDGATE, "executions", "show", result["execution_id"], "--config", str(config)],
                           env=env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert re.search(r"^started    \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \+05:30$", text, re.M), text
    assert code in text, text
    assert re.search(r"\+\d+\.\d ms  memory\.create_entities  ok  \d+\.\d ms", text), text
    assert re.search(r"filesystem\.read_text_file  failed .*\n      error: .*(denied|not allowed|outside|ENOENT|Access)", text, re.I), text
    shown_json = subprocess.run([SANDGATE, "executions", "show", result["execution_id"], "--json", "--config", str(config)],
                                capture_output=True, text=True, timeout=60)
    calls = json.loads(shown_json.stdout)["execution"]["call_rows"]
    assert [c["tool"] for c in calls] == ["create_entities", "read_text_file"], calls
    assert all(c["started_ms"] is not None and c["args_bytes"] > 0 for c in calls), calls
    if record_arguments:
        assert json.loads(calls[0]["arguments"])["entities"][0]["observations"] == ["secret-42"], calls
        assert "arguments: {" in text, text
    else:
        assert all(c["arguments"] is None for c in calls), calls
        assert "secret-42" not in text and "arguments:" not in text, text


# --- Item 4: health, readiness, metrics, traces -------------------------------------------------

METRICS_SNAPSHOT = REPO / "tests" / "e2e" / "snapshots" / "metrics.txt"


def metrics_shape(text: str) -> str:
    """`/metrics` with the values filtered out: what the snapshot holds. Sample values,
    histogram bucket counts and the uptime change from run to run; the families, their help,
    their types and their label sets must not."""
    import re

    shaped = []
    for line in text.splitlines():
        if line.startswith("#"):
            shaped.append(line)
            continue
        series, _, _value = line.rpartition(" ")
        shaped.append(f"{series} <value>")
    return "\n".join(shaped) + "\n"


class Answer:
    def __init__(self, status_code: int, text: str, headers):
        self.status_code, self.text, self.headers = status_code, text, headers


def http_get(server, path: str, token: str | None = "server") -> Answer:
    """GET `path` on the server's listener, with its token, another `token`, or none."""
    import urllib.error
    import urllib.request

    headers = server.headers if token == "server" else ({"Authorization": f"Bearer {token}"} if token else {})
    request = urllib.request.Request(server.url.removesuffix("/mcp") + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return Answer(response.status, response.read().decode(), {k.lower(): v for k, v in response.headers.items()})
    except urllib.error.HTTPError as error:
        return Answer(error.code, error.read().decode(), {k.lower(): v for k, v in error.headers.items()})


@one_process_only("/readyz and /metrics describe the replica that answers, and HAProxy sends each request to another")
async def test_health_readiness_and_metrics(tmp_path):
    """`/healthz` answers at once and needs no token; `/readyz` says 503 while a backend is on
    its first connection attempt and 200 after; `/metrics` counts executions by tier and
    status, tool calls by backend, tool and outcome, with duration histograms, and shows the
    backends' states and the sandbox pool. Its shape is snapshot-tested with values filtered
    (UPDATE_SNAPSHOTS=1 rewrites the snapshot)."""
    import os
    import sys
    from conftest import FAKE_BACKEND, HttpServer, reference_servers

    servers = reference_servers(tmp_path)
    servers["slow"] = {"command": str(SLOW_START), "args": ["3", sys.executable, str(FAKE_BACKEND), "ok"]}
    config = write_config(tmp_path, "toml", servers)
    server = HttpServer(config)
    try:
        health = http_get(server, "/healthz", token=None)
        assert (health.status_code, health.text) == (200, "ok\n")
        early = http_get(server, "/readyz", token=None)
        assert early.status_code == 503 and "still on their first connection attempt" in early.text, early.text
        deadline = time.monotonic() + 20
        while http_get(server, "/readyz", token=None).status_code != 200:
            assert time.monotonic() < deadline, "never ready"
            await anyio.sleep(0.2)
        assert http_get(server, "/metrics", token=None).status_code == 401

        async with Client(server.target(), mode="legacy") as client:
            structured(await client.call_tool("call_tool_chain", {"code": {"tool": "everything.echo", "arguments": {"message": "hi"}}}))
            await client.call_tool("call_tool_chain", {"code": (
                'await memory.read_graph({});\n'
                'try { await filesystem.read_text_file({path: "/etc/passwd"}); } catch (e) {}\n'
                'throw new Error("on purpose");')})
        text = http_get(server, "/metrics").text
    finally:
        server.close()
    assert 'sandgate_executions_total{tier="json",status="ok"} 1' in text, text
    assert 'sandgate_executions_total{tier="sandbox",status="error"} 1' in text, text
    assert 'sandgate_tool_calls_total{backend="everything",tool="echo",outcome="ok"} 1' in text, text
    assert 'sandgate_tool_calls_total{backend="memory",tool="read_graph",outcome="ok"} 1' in text, text
    assert 'sandgate_tool_calls_total{backend="filesystem",tool="read_text_file",outcome="error_result"} 1' in text, text
    assert 'sandgate_backends{state="ready"} 4' in text, text
    assert 'sandgate_backend_up{backend="slow"} 1' in text, text
    assert 'sandgate_execution_duration_seconds_count{tier="sandbox"} 1' in text, text
    shape = metrics_shape(text)
    if os.environ.get("UPDATE_SNAPSHOTS"):
        METRICS_SNAPSHOT.parent.mkdir(exist_ok=True)
        METRICS_SNAPSHOT.write_text(shape)
    assert shape == METRICS_SNAPSHOT.read_text(), "the /metrics families changed; UPDATE_SNAPSHOTS=1 rewrites the snapshot"


async def test_metrics_need_an_admin_profile(tmp_path):
    """`/metrics` names every backend and tool, so a token of a profile that is not admin gets
    403 with what to change; an admin token gets the text."""
    import os
    from conftest import HttpServer, reference_servers

    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    config.write_text(config.read_text() + """
[profiles.reader]
tools = ["everything.echo"]

[profiles.ops]
tools = ["*"]
admin = true

[[http.tokens]]
token = "${OPS_READER_TOKEN}"
profile = "reader"
name = "reader"

[[http.tokens]]
token = "${OPS_ADMIN_TOKEN}"
profile = "ops"
name = "scraper"
""")
    os.environ.update({"OPS_READER_TOKEN": "reader-token-for-metrics-0001", "OPS_ADMIN_TOKEN": "admin-token-for-metrics-0001"})
    server = HttpServer(config, token="admin-token-for-metrics-0001")
    try:
        refused = http_get(server, "/metrics", token="reader-token-for-metrics-0001")
        assert refused.status_code == 403 and "admin" in refused.text, refused.text
        allowed = http_get(server, "/metrics", token="admin-token-for-metrics-0001")
        assert allowed.status_code == 200 and allowed.headers["content-type"].startswith("text/plain; version=0.0.4")
    finally:
        server.close()


class OtlpReceiver:
    """An OTLP/HTTP receiver run by the test: it keeps every span posted to /v1/traces."""

    def __init__(self):
        import http.server
        import threading

        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self.spans = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource_spans in request.resource_spans:
                    service = next((a.value.string_value for a in resource_spans.resource.attributes
                                    if a.key == "service.name"), None)
                    for scope_spans in resource_spans.scope_spans:
                        for span in scope_spans.spans:
                            receiver.spans.append((service, span))
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def named(self, name: str, service: str | None = None):
        return [span for svc, span in self.spans if span.name == name and (service is None or svc == service)]

    def close(self):
        self.server.shutdown()


def attributes(span) -> dict:
    return {a.key: a.value.string_value for a in span.attributes}


async def test_spans_are_exported_and_the_trace_reaches_the_backends(tmp_path):
    """Spans go to an OTLP receiver the test runs: one per execution, one per tool call, with
    the semantic-convention names. A W3C `traceparent` sent in `_meta` is the execution's
    parent, and each tool call's context reaches its backend: here the backend is another
    sandgate (a real MCP server that exports to the same receiver), served over HTTP by the
    test (a sandgate never starts sandgate as a backend), whose own execution span is the
    child of the outer tool call's span."""
    from conftest import FAKE_BACKEND, HttpServer
    import sys

    receiver = OtlpReceiver()
    inner_server = None
    try:
        inner_dir = tmp_path / "inner"
        inner_dir.mkdir()
        inner = write_config(inner_dir, "toml", {"fake": {"command": sys.executable, "args": [str(FAKE_BACKEND), "ok"]}})
        inner.write_text(inner.read_text() + f'\n[telemetry]\notlp_endpoint = "{receiver.url}"\nservice_name = "inner"\n')
        inner_server = HttpServer(inner)
        entry = {"url": inner_server.url, "headers": {"Authorization": f"Bearer {inner_server.token}"}}
        config = write_config(tmp_path, "toml", {"inner": entry})
        config.write_text(config.read_text() + f'\n[telemetry]\notlp_endpoint = "{receiver.url}"\n')
        trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
        async with connect("stdio", config) as client:
            await settled_status(client, "inner", 20)
            code = 'return await inner.call_tool_chain({code: \'return await fake.echo({text: "deep"})\'});'
            result = await client.call_tool("call_tool_chain", {"code": code},
                                            meta={"traceparent": f"00-{trace_id}-{parent_id}-01"})
            assert not result.is_error, result.content
            # Both gateways send their spans in batches; the inner one lives while this
            # session does.
            deadline = time.monotonic() + 15
            while len(receiver.named("tools/call call_tool_chain")) < 3 or not receiver.named("tools/call echo"):
                assert time.monotonic() < deadline, [(svc, s.name) for svc, s in receiver.spans]
                await anyio.sleep(0.2)
    finally:
        receiver.close()
        if inner_server:
            inner_server.close()
    # The outer gateway's execution, and its call to the inner one's `call_tool_chain` tool.
    outer_spans = receiver.named("tools/call call_tool_chain", "sandgate")
    [outer] = [s for s in outer_spans if s.parent_span_id.hex() == parent_id]
    assert outer.trace_id.hex() == trace_id, outer
    assert attributes(outer)["mcp.method.name"] == "tools/call"
    assert attributes(outer)["gen_ai.tool.name"] == "call_tool_chain"
    assert attributes(outer)["sandgate.tier"] == "single_call" and attributes(outer)["sandgate.status"] == "ok"
    [to_inner] = [s for s in outer_spans if s.parent_span_id == outer.span_id]
    assert to_inner.trace_id == outer.trace_id
    assert attributes(to_inner)["sandgate.backend"] == "inner"
    [inner_execution] = receiver.named("tools/call call_tool_chain", "inner")
    assert inner_execution.trace_id.hex() == trace_id, "the trace crossed into the backend"
    assert inner_execution.parent_span_id == to_inner.span_id, "under the outer tool call's span"
    [echo] = receiver.named("tools/call echo", "inner")
    assert echo.parent_span_id == inner_execution.span_id
    assert attributes(echo)["gen_ai.tool.name"] == "echo"


# --- Item 6: progress that shows life ----------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_backends_own_progress_reaches_the_client(tmp_path, transport):
    """The real everything server's long-running operation reports each of its steps. Called
    as a single call (tier 1), the client sees the backend's progress with its total; called
    from a script, it sees each step in the message, then the finished call, always growing."""
    from conftest import reference_servers

    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    single, script = [], []

    async def on_single(progress, total, message):
        single.append((progress, total, message))

    async def on_script(progress, total, message):
        script.append((progress, total, message))

    call = {"tool": "everything.trigger-long-running-operation", "arguments": {"duration": 1, "steps": 4}}
    async with connect(transport, config) as client:
        done = structured(await client.call_tool("call_tool_chain", {"code": call}, progress_callback=on_single))
        assert "Long running operation completed" in json.dumps(done["result"]), done
        code = ('const r = await everything["trigger-long-running-operation"]({duration: 1, steps: 4});\n'
                'await everything.echo({message: "and one more call, so this runs in the sandbox"});\n'
                'return r;')
        structured(await client.call_tool("call_tool_chain", {"code": code}, progress_callback=on_script))

    steps = [p for p in single if "trigger-long-running-operation: working" in (p[2] or "")]
    assert [(p, t) for p, t, _ in steps] == [(1, 4), (2, 4), (3, 4), (4, 4)], single
    assert single[-1][2].startswith("everything.trigger-long-running-operation finished"), single
    for notes in (single, script):
        values = [p for p, _, _ in notes]
        assert values == sorted(values) and len(set(values)) == len(values), notes
    said = [m for _, _, m in script]
    assert [m for m in said if "working (" in m] == [
        f"everything.trigger-long-running-operation: working ({i}/4)" for i in range(1, 5)], script
    assert all(t is None for _, t, _ in script), "a script's progress has no total: the code decides how many calls"


async def test_a_flood_of_backend_progress_is_thinned(tmp_path):
    """Hostile: a backend sends 50,000 progress notices for one call as fast as it can. The
    client hears at most one each 50 ms (and the last), the gateway's memory stays bounded,
    the call answers, and the gateway answers the next call."""
    import sys
    from conftest import FAKE_BACKEND, HttpServer

    config = write_config(tmp_path, "toml", {"fake": {"command": sys.executable, "args": [str(FAKE_BACKEND), "ok"]}})
    server = HttpServer(config)
    heard = []

    async def on_progress(progress, total, message):
        heard.append((progress, total, message))

    try:
        async with Client(server.target(), mode="legacy") as client:
            await until(lambda: has_fake(client), 20, "the fake backend")
            before = server.rss_kib()
            started = time.monotonic()
            done = structured(await client.call_tool(
                "call_tool_chain", {"code": {"tool": "fake.progress_flood", "arguments": {"n": 50_000}}},
                progress_callback=on_progress))
            took = time.monotonic() - started
            peak = server.rss_kib("VmHWM")
            assert done["result"] == "sent 50000", done
            assert took < 20, took
            assert len(heard) <= took / 0.05 + 5, (len(heard), took)
            assert any("(50000/50000)" in (m or "") for _, _, m in heard), heard[-3:]
            values = [p for p, _, _ in heard]
            assert values == sorted(values) and len(set(values)) == len(values)
            assert peak - before < 64 * 1024, f"the gateway grew {(peak - before) // 1024} MiB"

            echo = structured(await client.call_tool("call_tool_chain", {"code": {"tool": "fake.echo", "arguments": {"text": "still here"}}}))
            assert echo["result"] == "still here"
    finally:
        server.close()


async def has_fake(client) -> bool:
    found = structured(await client.call_tool("search_tools", {"query": "progress flood"}))
    return any(r["name"] == "fake.progress_flood" for r in found["results"])


async def test_a_reload_replaces_profiles_and_revokes_a_token(tmp_path):
    """Item 3, for the profiles and tokens: a token taken out of the served config is refused
    from the next request on (MCP and the console session it opened), and a narrowed profile
    sees and reaches only what it keeps, without a restart."""
    import os
    import urllib.error
    import urllib.request
    from conftest import HttpServer, reference_servers

    writer, reader = "writer-token-for-reload-00001", "reader-token-for-reload-00001"
    os.environ.update({"RELOAD_WRITER_TOKEN": writer, "RELOAD_READER_TOKEN": reader})
    base = write_config(tmp_path, "toml", reference_servers(tmp_path)).read_text()
    profiles = """
[profiles.writer]
tools = [{writer_tools}]

[profiles.reader]
tools = ["everything.*"]

[[http.tokens]]
token = "${{RELOAD_WRITER_TOKEN}}"
profile = "writer"
name = "writer"
"""
    reader_token = """
[[http.tokens]]
token = "${RELOAD_READER_TOKEN}"
profile = "reader"
name = "reader"
"""
    config = tmp_path / "sandgate.toml"
    config.write_text(base + profiles.format(writer_tools='"*"') + reader_token)
    server = HttpServer(config, token=writer)
    try:
        own = server.url.removesuffix("/mcp")
        login = urllib.request.Request(own + "/ui/login", data=json.dumps({"token": reader}).encode(),
                                       headers={"Content-Type": "application/json", "Origin": own})
        with urllib.request.urlopen(login, timeout=10) as response:
            cookie = response.headers["set-cookie"].split(";")[0]
        me = urllib.request.Request(own + "/ui/api/me", headers={"Cookie": cookie})
        with urllib.request.urlopen(me, timeout=10) as response:
            assert json.loads(response.read())["profile"] == "reader"
        async with Client(server.target(), mode="legacy") as client:
            await until(lambda: has_tools(client, {"memory.read_graph"}), 20, "the writer's memory tools")
        assert http_get(server, "/metrics", token=reader).status_code == 403, "the reader's token works before"

        config.write_text(base + profiles.format(writer_tools='"everything.*"'))
        await until(lambda: has_log(server, "HTTP tokens replaced"), 10, "the token reload")
        await until(lambda: has_log(server, "profiles replaced"), 10, "the profile reload")

        assert http_get(server, "/metrics", token=reader).status_code == 401, "a revoked token is refused"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(me, timeout=10)
        assert refused.value.code == 401, "the console session the revoked token opened ended"
        async with Client(server.target(), mode="legacy") as client:
            names = await tool_names(client)
            assert not any(n.startswith("memory.") for n in names), names
            denied = await client.call_tool("call_tool_chain", {"code": {"tool": "memory.read_graph", "arguments": {}}})
            assert denied.is_error, denied
    finally:
        server.close()
