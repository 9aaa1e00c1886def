"""What a new user met in their first hour (issue 18, item 8), each fixed and held here: the
JSON call sent as an object, error messages that say their cause once and point at the right
command, and `sandgate run`'s call list saying why a call failed."""

from __future__ import annotations

import subprocess

import anyio

import pytest

from conftest import REPO, SANDGATE, connect, reference_servers, structured, write_config

pytestmark = pytest.mark.anyio


async def test_the_json_call_may_come_as_an_object(tmp_path):
    """The MCP Inspector CLI sends the documented JSON call as an object, not as text. `code` is
    declared with a single type (issue 47, item 3: single-type schema dialects, such as Gemini's
    function declarations, refuse a list of types), and an object is still taken."""
    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    async with connect("stdio", config) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["call_tool_chain"].input_schema["properties"]["code"]["type"] == "string"
        as_object = structured(await client.call_tool(
            "call_tool_chain", {"code": {"tool": "everything.echo", "arguments": {"message": "hi"}}}))
        as_text = structured(await client.call_tool(
            "call_tool_chain", {"code": '{"tool": "everything.echo", "arguments": {"message": "hi"}}'}))
        assert as_object["result"] == as_text["result"] == "Echo: hi", as_object
        assert as_object["tier"] == "json"
        wrong = await client.call_tool("call_tool_chain", {"code": 42})
        assert wrong.is_error and "TypeScript text or a JSON call object" in wrong.content[0].text


def test_a_missing_config_file_says_its_cause_once(tmp_path):
    done = subprocess.run([SANDGATE, "check", "--config", str(tmp_path / "nope.toml")], capture_output=True, text=True)
    assert done.returncode != 0
    assert done.stderr.count("No such file or directory") == 1, done.stderr


def test_tools_info_on_the_command_line_points_at_the_command_line(tmp_path):
    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    done = subprocess.run([SANDGATE, "tools", "info", "get_summ", "--config", str(config)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1
    assert "sandgate tools search" in done.stderr and "did you mean everything.get-sum" in done.stderr, done.stderr


def test_sandgate_run_says_why_a_call_failed():
    done = subprocess.run([SANDGATE, "run", "examples/files.ts", "--config", "examples/sandgate.toml"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    line = next(l for l in done.stdout.splitlines() if "read_text_file" in l and "failed" in l)
    assert "ENOENT" in line and "does-not-exist.ts" in line, line


def test_the_example_config_works_from_any_directory(tmp_path):
    for example in ["examples/sandgate.toml", "examples/mcp.json"]:
        done = subprocess.run([SANDGATE, "check", "--config", str(REPO / example)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, (example, done.stdout, done.stderr)
        assert done.stdout.count(" ready ") == 3, done.stdout


def test_serve_example_keeps_stdout_for_mcp(tmp_path):
    """npm's report and cargo's progress must not reach stdout, the MCP channel: a stand-in
    npm and cargo print to stdout, and only what `cargo run` runs may arrive there."""
    import os
    import shutil

    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "serve-example", tmp_path / "scripts" / "serve-example")
    (tmp_path / "tests" / "node").mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "npm").write_text("#!/bin/sh\necho 'added 146 packages in 3s'\n")
    (bin_dir / "cargo").write_text("#!/bin/sh\necho '   Compiling sandgate' >&2\necho '{\"jsonrpc\":\"2.0\"}'\n")
    for stub in ["npm", "cargo"]:
        (bin_dir / stub).chmod(0o755)
    done = subprocess.run([str(tmp_path / "scripts" / "serve-example")], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"jsonrpc":"2.0"}\n', done.stdout
    assert "added 146 packages" in done.stderr and "building sandgate" in done.stderr


async def test_the_first_list_and_resources_wait_for_a_cold_start(tmp_path):
    """No tool cache yet and a backend that takes 2 s to start: the overview and `types.d.ts`
    wait for it (item 7), instead of telling the model there are no backends. `tools/list`
    answers at once (a client waits on it when it connects: issue 26) unless `startup_wait`
    is written in the config, and then it waits too."""
    from conftest import FAKE_BACKEND
    import sys
    import time

    slow = {"command": "sh", "args": ["-c", f"sleep 2 && exec {sys.executable} {FAKE_BACKEND} ok"]}
    config = write_config(tmp_path, "toml", {"slowpoke": slow})
    (tmp_path / "waiting").mkdir()
    waiting = write_config(tmp_path / "waiting", "toml", {"slowpoke": slow})
    waiting.write_text(waiting.read_text().replace("[gateway]", '[gateway]\nstartup_wait = "10s"'))
    async with connect("stdio", waiting, settle=False) as client:
        listed = await client.list_tools()
        search = next(t.description for t in listed.tools if t.name == "search_tools")
        assert "slowpoke (" in search and "no backends are connected yet" not in search, search
    async with connect("stdio", config, settle=False) as client:
        started = time.monotonic()
        await client.list_tools()
        assert time.monotonic() - started < 1.5, "the first tools/list waited for a slow backend"
        overview = (await client.read_resource("sandgate://overview")).contents[0].text
        assert "| slowpoke | ready |" in overview, overview
        types = (await client.read_resource("sandgate://types.d.ts")).contents[0].text
        assert "slowpoke" in types


async def test_the_meta_tools_answer_at_once_naming_the_backends_still_starting(tmp_path):
    """A backend that takes 4 s to start, beside one that is ready: `search_tools`,
    `tool_info` and `list_tools_meta` answer at once with what is ready and name the one still
    starting, with when to ask again (item 13); once it is up, they find its tools. With
    `startup_wait` written in the config, they wait for it as before."""
    from conftest import FAKE_BACKEND, settled
    import sys
    import time

    quick = {"command": sys.executable, "args": [str(FAKE_BACKEND), "ok"]}
    slow = {"command": "sh", "args": ["-c", f"sleep 4 && exec {sys.executable} {FAKE_BACKEND} ok"]}
    config = write_config(tmp_path, "toml", {"quick": quick, "slowpoke": slow})
    async with connect("stdio", config, settle=False) as client:
        await client.list_tools()
        for _ in range(30):  # the quick one is up within a moment (its first listing is decided)
            found = (await client.call_tool("search_tools", {"query": "echo the text"})).structured_content
            if any(r["name"] == "quick.echo" for r in found["results"]):
                break
            await anyio.sleep(0.1)
        asked = [
            ("search_tools", {"query": "echo the text back"}),
            ("list_tools_meta", {}),
            ("tool_info", {"name": "slowpoke.echo"}),
        ]
        for name, args in asked:
            started = time.monotonic()
            result = await client.call_tool(name, args)
            took = time.monotonic() - started
            text = "\n".join(c.text for c in result.content)
            assert took < 1.5, f"{name} waited {took:.1f} s for a starting backend"
            assert "Still starting (first connection): `slowpoke`" in text and "Ask again in a few seconds" in text, (name, text)
            if name == "tool_info":
                assert result.is_error, text
            else:
                assert result.structured_content["starting"] == ["slowpoke"], result.structured_content
                assert "quick.echo" in text and "slowpoke." not in text.split("Still starting")[0], text
        await settled(client)
        search = await client.call_tool("search_tools", {"query": "echo the text back"})
        names = [r["name"] for r in search.structured_content["results"]]
        assert "slowpoke.echo" in names and "starting" not in search.structured_content, search.structured_content
        info = await client.call_tool("tool_info", {"name": "slowpoke.echo"})
        assert not info.is_error, info.content

    (tmp_path / "waiting").mkdir()
    waiting = write_config(tmp_path / "waiting", "toml", {"quick": quick, "slowpoke": slow})
    waiting.write_text(waiting.read_text().replace("[gateway]", '[gateway]\nstartup_wait = "10s"'))
    async with connect("stdio", waiting, settle=False) as client:
        started = time.monotonic()
        search = await client.call_tool("search_tools", {"query": "echo the text back"})
        assert time.monotonic() - started > 2, "with startup_wait written, the search waits"
        names = [r["name"] for r in search.structured_content["results"]]
        assert "slowpoke.echo" in names and "starting" not in search.structured_content, search.structured_content


async def test_the_wait_has_a_configurable_bound(tmp_path):
    """`[gateway] startup_wait` bounds that wait: a backend slower than it is not waited for."""
    from conftest import FAKE_BACKEND
    import sys
    import time

    slow = {"command": "sh", "args": ["-c", f"sleep 5 && exec {sys.executable} {FAKE_BACKEND} ok"]}
    config = write_config(tmp_path, "toml", {"slowpoke": slow})
    config.write_text(config.read_text().replace("[gateway]", '[gateway]\nstartup_wait = "1s"'))
    async with connect("stdio", config, settle=False) as client:
        started = time.monotonic()
        listed = await client.list_tools()
        assert time.monotonic() - started < 3
        search = next(t.description for t in listed.tools if t.name == "search_tools")
        assert "no backends are connected yet" in search, search


def test_delete_ends_a_session_with_204_and_an_unknown_one_is_404(tmp_path):
    import http.client
    import json
    import urllib.parse

    from conftest import HttpServer

    server = HttpServer(write_config(tmp_path, "toml", {}))
    try:
        url = urllib.parse.urlparse(server.url)

        def request(method, body=None, session=None):
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
            headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                       **server.headers, **({"Mcp-Session-Id": session} if session else {})}
            conn.request(method, url.path, body=json.dumps(body) if body else None, headers=headers)
            response = conn.getresponse()
            response.read()
            return response.status, response.getheader("mcp-session-id")

        status, session = request("POST", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        assert status == 200 and session
        assert request("DELETE", session=session)[0] == 204
        assert request("DELETE", session=session)[0] == 404, "a closed session is not found"
        assert request("DELETE", session="never-was")[0] == 404
    finally:
        server.close()


def test_sandgate_run_is_recorded_with_its_code_and_call_sizes(tmp_path):
    """Item 5: `sandgate run` executions are recorded too, and `executions show` prints the
    code and each call's argument and result sizes."""
    import json
    import os

    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = ["--config", "examples/sandgate.toml"]
    ran = subprocess.run([SANDGATE, "run", "examples/sum.ts", *config], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    listed = subprocess.run([SANDGATE, "executions", "list", "--json", *config], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=60)
    records = json.loads(listed.stdout)
    assert len(records) == 1 and records[0]["tier"] == "sandbox", records
    shown = subprocess.run([SANDGATE, "executions", "show", records[0]["id"], *config], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=60)
    code = (REPO / "examples" / "sum.ts").read_text()
    assert code.strip() in shown.stdout, shown.stdout
    assert " in, " in shown.stdout and " out " in shown.stdout, shown.stdout


def test_check_shows_why_a_backend_is_down_and_counts_only_reachable_tools(tmp_path):
    """`check` used to hide a failing backend's stderr and count its cached tools as
    reachable."""
    import os
    import sys

    from conftest import FAKE_BACKEND

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state")}
    config = tmp_path / "sandgate.toml"
    config.write_text(f'[servers.flaky]\ncommand = "{sys.executable}"\nargs = ["{FAKE_BACKEND}", "ok"]\n')
    first = subprocess.run([SANDGATE, "check", "--config", str(config)], env=env, capture_output=True, text=True,
                           timeout=60)
    assert first.returncode == 0 and "tools reachable." in first.stdout, first.stdout
    # Now the same backend fails at start, saying why on stderr; its tools are still cached.
    config.write_text('[servers.flaky]\ncommand = "sh"\nargs = ["-c", "echo the database is gone >&2; exit 3"]\n')
    second = subprocess.run([SANDGATE, "check", "--config", str(config)], env=env, capture_output=True, text=True,
                            timeout=60)
    assert second.returncode == 1, second.stdout
    assert "the database is gone" in second.stdout, second.stdout
    assert "0 tools reachable (" in second.stdout and "known from the tool cache" in second.stdout, second.stdout


def test_a_successful_check_logs_no_warning(tmp_path):
    """A newcomer's `check` of the example config ends with its table and nothing else: no WARN
    from the libraries underneath (rmcp's "Error sending response" when a backend answers a
    request whose caller has gone is dropped, see `setup::QuietDisconnects`)."""
    import os

    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for _ in range(3):
        checked = subprocess.run([SANDGATE, "check", "--config", "examples/sandgate.toml"], cwd=REPO, env=env,
                                 capture_output=True, text=True, timeout=120)
        assert checked.returncode == 0, checked.stderr
        assert "tools reachable" in checked.stdout, checked.stdout
        noisy = [line for line in checked.stderr.splitlines() if " WARN " in line or " ERROR " in line]
        assert not noisy, checked.stderr


def test_serve_on_a_terminal_says_what_it_waits_for(tmp_path):
    """Issue 34, item 7: `sandgate serve` started by hand on a terminal said nothing about
    waiting for an MCP client on stdin, nor about `--http` and `/ui`. A pipe (an MCP client)
    gets no such text."""
    import os
    import pty
    import subprocess
    import time

    config = write_config(tmp_path, "toml", {})
    main, secondary = pty.openpty()
    proc = subprocess.Popen([SANDGATE, "serve", "--config", str(config)], stdin=secondary,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2)
    finally:
        proc.terminate()
        said = proc.communicate(timeout=10)[1]
        os.close(main)
        os.close(secondary)
    assert "waits for an MCP client" in said and "--http" in said and "/ui" in said, said
    piped = subprocess.run([SANDGATE, "serve", "--config", str(config)], input="", capture_output=True, text=True, timeout=20)
    assert "waits for an MCP client" not in piped.stderr, piped.stderr


def test_a_command_piped_into_head_ends_quietly(tmp_path):
    """Issue 47, item 16: `sandgate check | head -1` closes the pipe after the first line, while
    sandgate still waits for its backends; it ends at its next line with status 0 and no panic
    (it exited 101 with "failed printing to stdout")."""
    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    done = subprocess.run(["bash", "-c", f'set -o pipefail; "{SANDGATE}" check --config "{config}" | head -1'],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert len(done.stdout.splitlines()) == 1, done.stdout
    assert "panicked" not in done.stderr, done.stderr[-2000:]


async def test_the_readme_counts_the_tools_a_client_lists(tmp_path):
    """Issue 47, item 18: the Quickstart says how many tools a client's list shows; it said five
    when there were six."""
    import re

    said = re.search(r"shows sandgate's (\w+) tools", (REPO / "README.md").read_text()).group(1)
    words = {"four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    async with connect("stdio", config) as client:
        listed = (await client.list_tools()).tools
    assert words[said] == len(listed), (said, [t.name for t in listed])


@pytest.mark.parametrize("fmt", ["toml", "json"])
async def test_import_fs_where_fs_is_a_backend_names_the_backend_and_no_path(tmp_path, fmt):
    """Issue 47, items 9 and 10: `import fs from "fs"` where `fs` is a backend is told to call the
    backend; the refusal names the config file but not where it lies (the model never learns
    the operator's paths), and speaks the config's own syntax (JSON advice for a JSON file)."""
    from conftest import NODE_MODULES

    server = {"command": "node", "args": [str(NODE_MODULES / "server-filesystem/dist/index.js"), str(tmp_path)]}
    config = write_config(tmp_path, fmt, {"fs": server})
    async with connect("stdio", config) as client:
        result = await client.call_tool("call_tool_chain", {
            "code": f'import fs from "fs";\nreturn await fs.list_directory({{ path: "{tmp_path}" }});'})
    text = result.content[0].text
    assert "`fs` here is a backend" in text and "without an import" in text, text
    assert str(config.parent) not in text, text
    assert config.name in text, text
    if fmt == "json":
        assert '"sandgate": {"profiles"' in text and "[profiles.default]" not in text, text
    else:
        assert "[profiles.default]" in text, text


async def test_a_callee_given_a_template_path_is_named_and_no_deprecated_tool_is_offered(tmp_path):
    """A public benchmark's replay (issue 47): ``fs.readFile(`${ROOT}/…`)`` where `fs` is a
    backend said "TypeError: ROOT is not a function" on QuickJS, and the hint offered the
    filesystem server's `read_file`, which says it is deprecated."""
    from conftest import NODE_MODULES

    server = {"command": "node", "args": [str(NODE_MODULES / "server-filesystem/dist/index.js"), str(tmp_path)]}
    config = write_config(tmp_path, "toml", {"fs": server})
    async with connect("stdio", config) as client:
        result = await client.call_tool("call_tool_chain", {
            "code": f'const ROOT = "{tmp_path}";\nconst text = await fs.readFile(`${{ROOT}}/hello.txt`);\nreturn text;'})
    error = (result.structured_content or {}).get("error") or {}
    assert "fs.readFile is not a function" in error.get("message", ""), error
    assert "fs.read_text_file" in error.get("hint", "") and "fs.read_file`" not in error.get("hint", ""), error


def test_tools_search_and_info_answer_from_the_tool_cache(tmp_path):
    """Issue 47, item 17: `tools search` and `tools info` started every backend (5 s each with
    `npx` servers) though the tool cache could answer. Now they answer from it when it knows
    every enabled backend; `--fresh` asks the backends."""
    import time

    servers = reference_servers(tmp_path)
    slow = servers["everything"]
    servers["everything"] = {"command": "sh", "args": ["-c", "sleep 3 && exec " + " ".join([slow["command"], *slow["args"]])]}
    config = write_config(tmp_path, "toml", servers)

    def timed(*args):
        started = time.monotonic()
        done = subprocess.run([SANDGATE, "tools", *args, "--config", str(config)], capture_output=True, text=True, timeout=60)
        return done, time.monotonic() - started

    first, took = timed("search", "add two numbers")
    assert first.returncode == 0 and "everything.get-sum" in first.stdout, first.stderr
    assert took > 3, f"the first search started the backends: {took:.1f}s"
    cached, took = timed("search", "add two numbers")
    assert cached.stdout == first.stdout, (cached.stdout, first.stdout)
    assert took < 2, f"answered from the cache in {took:.1f}s"
    info, took = timed("info", "get_sum")
    assert info.returncode == 0 and "everything.get-sum" in info.stdout and took < 2, (info.stderr, took)
    fresh, took = timed("search", "add two numbers", "--fresh")
    assert fresh.returncode == 0 and took > 3, took


def test_status_says_what_the_file_configures_for_http(tmp_path):
    """Issue 47, item 16: `status` said "http: off" while a `serve --http` of that very config
    was running. It says what the file configures."""
    config = write_config(tmp_path, "toml", {})
    done = subprocess.run([SANDGATE, "status", "--config", str(config)], capture_output=True, text=True, timeout=60)
    assert "http: not in this config (no [http] listen; `serve --http ADDR` serves HTTP anyway)" in done.stdout, done.stdout
    config.write_text(config.read_text() + '\n[http]\nlisten = "127.0.0.1:8931"\n')
    done = subprocess.run([SANDGATE, "status", "--config", str(config)], capture_output=True, text=True, timeout=60)
    assert "http: [http] listen = 127.0.0.1:8931" in done.stdout, done.stdout


def test_a_json_config_is_advised_in_json_and_its_misplaced_settings_are_named(tmp_path):
    """Issue 47, item 10: a top-level "profiles" in an mcpServers file was ignored without a word
    (it belongs under "sandgate"), and `"fs": ["/dir"]` failed without naming the object form."""
    import json

    misplaced = tmp_path / "misplaced.json"
    misplaced.write_text(json.dumps({"mcpServers": {}, "profiles": {"default": {"tools": ["*"]}}}))
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"mcpServers": {}, "sandgate": {"profiles": {"default": {"fs": [str(tmp_path)]}}}}))
    for path, words in [(misplaced, ['"sandgate": {"profiles": ...}']),
                        (bare, ["is a bare path", f'[{{"path": "{tmp_path}", "write": false}}]'])]:
        done = subprocess.run([SANDGATE, "check", "--config", str(path)], capture_output=True, text=True, timeout=60)
        assert done.returncode != 0, done.stdout
        for word in words:
            assert word in done.stderr, done.stderr
