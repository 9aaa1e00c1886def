"""The web console (issue 19) in a real headless Chromium (Debian's `chromium`, driven by
Playwright), against `sandgate serve --http` in front of the real npm servers.

- A token entered once logs in; the three backends show ready; a fan-out script run in the
  playground shows its result and a timeline whose bars overlap; the execution opens from the
  list and its shortened result's full output reads back whole.
- A second profile does not see the first profile's execution, in the list or by its id.
- A backend whose tool names, descriptions, results and stderr carry HTML and script: every
  page shows them as text, nothing runs, and the CSP header is there.

UPDATE_SCREENSHOTS=1 writes the screenshots in docs/ui/.
"""

from __future__ import annotations

import os
import re
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from conftest import FAKE_BACKEND, REPO, HttpServer, reference_servers, write_config

CHROMIUM = os.environ.get("SANDGATE_CHROMIUM", "/usr/lib/chromium/chromium")
SCREENSHOTS = REPO / "docs" / "ui"
ALPHA_TOKEN = "alpha-console-token-0000000001"
BETA_TOKEN = "beta-console-token-00000000002"

FAN_OUT = """const [echo, graph, files] = await Promise.all([
  everything.echo({ message: "fan-out" }),
  memory.read_graph({}),
  filesystem.list_directory({ path: ROOT }),
]);
return { echo, entities: graph.entities.length, files };"""

BIG = """const rows = [];
for (let i = 0; i < 3000; i++) rows.push({ i, word: "row-" + i, padding: "x".repeat(20) });
return rows;"""


def config_with_profiles(tmp_path: Path) -> Path:
    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    config.write_text(config.read_text() + """
[profiles.alpha]
tools = ["*"]

[profiles.beta]
tools = ["*"]

[[http.tokens]]
token = "${CONSOLE_ALPHA_TOKEN}"
profile = "alpha"
name = "alpha-user"

[[http.tokens]]
token = "${CONSOLE_BETA_TOKEN}"
profile = "beta"
name = "beta-user"
""")
    os.environ.update({"CONSOLE_ALPHA_TOKEN": ALPHA_TOKEN, "CONSOLE_BETA_TOKEN": BETA_TOKEN})
    return config


@contextmanager
def browser():
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


def console_url(server: HttpServer) -> str:
    return server.url.removesuffix("/mcp") + "/ui"


def open_page(chromium, server: HttpServer):
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    return page


def log_in(page, server: HttpServer, token: str):
    page.goto(console_url(server))
    page.fill("#token", token)
    page.click("#login-button")
    page.wait_for_selector("#profile")


def screenshot(page, name: str):
    if os.environ.get("UPDATE_SCREENSHOTS"):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def wait_until(check, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def run_in_playground(page, code: str) -> str:
    page.goto(page.url.split("#")[0] + "#/playground")
    page.fill("#playground-code", code)
    page.click("#run")
    page.wait_for_selector("#playground-execution", timeout=30_000)
    return page.inner_text("#playground-execution")


def bars(page) -> list[tuple[float, float]]:
    return [(float(b.get_attribute("data-start")), float(b.get_attribute("data-end")))
            for b in page.query_selector_all("#timeline .tl-bar")]


def test_log_in_see_backends_run_a_fan_out_and_read_a_full_output(tmp_path):
    config = config_with_profiles(tmp_path)
    root = tmp_path / "files"
    server = HttpServer(config, token=ALPHA_TOKEN)
    try:
        with browser() as chromium:
            page = open_page(chromium, server)
            # Not logged in: the login form, and the API refuses.
            page.goto(console_url(server))
            page.wait_for_selector("#login")
            # A wrong token says so, on the form that is on the page (it used to reset the
            # form, empty, with the message written into the one it replaced).
            page.fill("#token", "not-a-token-of-this-gateway")
            page.click("#login-button")
            wait_until(lambda: page.query_selector("#login-error") is not None and page.inner_text("#login-error") != "",
                       10, "the login error")
            assert "not one this gateway knows" in page.inner_text("#login-error"), page.inner_text("#login-error")
            assert page.query_selector("#profile") is None
            log_in(page, server, ALPHA_TOKEN)
            assert page.inner_text("#profile") == "alpha"
            cookie = next(c for c in page.context.cookies() if c["name"] == "sandgate_console")
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and ALPHA_TOKEN not in cookie["value"]

            page.goto(console_url(server) + "#/backends")
            wait_until(lambda: page.locator("#backends .badge.ready").count() == 3, 30, "three ready backends")
            names = sorted(page.locator("#backends td.name").all_inner_texts())
            assert names == ["everything", "filesystem", "memory"], names
            screenshot(page, "backends")

            execution = run_in_playground(page, FAN_OUT.replace("ROOT", repr(str(root))))
            text = page.inner_text("#playground-text")
            assert '"echo": "Echo: fan-out"' in text and "hello.txt" in text, text
            spans = bars(page)
            assert len(spans) == 3, spans
            overlapping = [(a, b) for i, a in enumerate(spans) for b in spans[i + 1:] if a[0] < b[1] and b[0] < a[1]]
            assert overlapping, f"the fan-out's calls ran at once, so their bars overlap: {spans}"
            screenshot(page, "playground")

            # The list follows new executions live, whoever runs them (here: another tab).
            page.goto(console_url(server) + "#/executions")
            page.wait_for_selector(f'#executions tr[data-execution="{execution}"]')
            assert page.evaluate("getComputedStyle(document.querySelector('#executions td.when')).whiteSpace") == "nowrap"
            other = page.context.new_page()
            other.goto(console_url(server))
            other.wait_for_selector("#profile")
            fresh = run_in_playground(other, 'return await everything.echo({ message: "live" });')
            page.wait_for_selector(f'#executions tr[data-execution="{fresh}"]', timeout=10_000)
            other.close()

            big = run_in_playground(page, BIG)
            assert "shortened" in page.inner_text("#playground-text") or "read_output" in page.inner_text("#playground-text")
            page.goto(console_url(server) + "#/executions")
            page.wait_for_selector(f'#executions tr[data-execution="{big}"]')
            assert page.locator(f'#executions tr[data-execution="{execution}"]').count() == 1
            screenshot(page, "executions")
            page.click(f'#executions tr[data-execution="{big}"]')
            page.wait_for_selector("#execution-id")
            assert page.inner_text("#execution-id") == big
            page.click('button[data-part="output"]')
            page.wait_for_selector("#full-output pre")
            full = page.inner_text("#full-output pre")
            assert full.count('"word": "row-') == 3000, len(full)
            download = page.get_attribute('a[data-download="output"]', "href")
            assert download.endswith("&download=1")
            screenshot(page, "execution-full-output")

            page.goto(console_url(server) + f"#/executions/{execution}")
            page.wait_for_selector("#timeline .tl-bar")
            assert len(bars(page)) == 3
            screenshot(page, "execution")

            page.goto(console_url(server) + "#/tools")
            page.fill("#tool-search", "read a file")
            page.wait_for_selector('#tool-list [data-tool="filesystem.read_text_file"]')
            page.click('#tool-list [data-tool="filesystem.read_text_file"]')
            page.wait_for_selector("#declaration")
            assert "read_text_file" in page.inner_text("#declaration")
            screenshot(page, "tools")

            page.goto(console_url(server) + "#/stats")
            page.wait_for_selector("#per-minute rect", state="attached")
            assert page.locator("#tiers text").count() > 0
            heights = [float(r.get_attribute("height")) for r in page.locator("#per-minute rect").all()]
            assert len(heights) == 60 and heights[-1] > 0, heights
            screenshot(page, "stats")

            # The download is an attachment that the browser may not sniff.
            request = urllib.request.Request(console_url(server) + f"/api/output?id={big}&part=output&download=1",
                                             headers={"Cookie": f"sandgate_console={cookie['value']}"})
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.headers["content-disposition"].startswith("attachment;")
                assert response.headers["x-content-type-options"] == "nosniff"
    finally:
        server.close()


def test_a_profile_does_not_see_another_profiles_executions(tmp_path):
    config = config_with_profiles(tmp_path)
    server = HttpServer(config, token=ALPHA_TOKEN)
    try:
        with browser() as chromium:
            alpha = open_page(chromium, server)
            log_in(alpha, server, ALPHA_TOKEN)
            execution = run_in_playground(alpha, 'return await everything.echo({ message: "alpha only" });')

            beta = open_page(chromium, server)
            log_in(beta, server, BETA_TOKEN)
            assert beta.inner_text("#profile") == "beta"
            mine = run_in_playground(beta, 'return await everything.echo({ message: "beta" });')
            beta.goto(console_url(server) + "#/executions")
            beta.wait_for_selector(f'#executions tr[data-execution="{mine}"]')
            assert beta.locator(f'#executions tr[data-execution="{execution}"]').count() == 0
            assert "alpha" not in beta.locator("#executions").inner_text()
            beta.goto(console_url(server) + f"#/executions/{execution}")
            beta.wait_for_selector(".error-text")
            assert "no such execution" in beta.inner_text(".error-text")
            # Asking the API for another profile's list gives its own.
            listed = beta.evaluate("async () => (await (await fetch('/ui/api/executions?profile=alpha')).json()).executions.map(x => x.profile)")
            assert set(listed) == {"beta"}, listed
    finally:
        server.close()


def test_markup_from_backends_is_shown_as_text_and_never_runs(tmp_path):
    servers = {"fake": {"command": sys.executable, "args": [str(FAKE_BACKEND), "xss"],
                        "env": {"CONSOLE_SECRET": "env-secret-value-1234"}}}
    config = write_config(tmp_path, "toml", servers)
    server = HttpServer(config)
    try:
        with urllib.request.urlopen(console_url(server), timeout=10) as response:
            csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp, csp
        with browser() as chromium:
            page = open_page(chromium, server)
            log_in(page, server, server.token)
            ran = lambda: page.evaluate("window.__xss") is not None or page.dialogs

            page.goto(console_url(server) + "#/backends")
            wait_until(lambda: page.locator("#backends .badge.ready").count() == 1, 20, "the fake backend")
            page.click("#backends summary")
            assert '<img src=x onerror="window.__xss=1">' in page.inner_text("#backends")
            assert page.inner_text("#backends summary") == "stderr (1 line)", page.inner_text("#backends summary")

            page.goto(console_url(server) + "#/tools")
            page.fill("#tool-search", "markup")
            page.wait_for_selector('#tool-list [data-tool="fake.markup"]')
            listed = page.inner_text("#tool-list")
            assert "<script>window.__xss=2</script>" in listed, listed
            html_tool = next(t for t in page.locator("#tool-list [data-tool]").all() if t.get_attribute("data-tool").startswith("fake.html"))
            name = html_tool.get_attribute("data-tool")
            assert "<svg onload" in name
            html_tool.click()
            page.wait_for_selector("#declaration")
            assert '<img src=x onerror="window.__xss=1">' in page.inner_text("#tool-detail")
            # Backticks in a description are code spans, made as elements; what is in them is
            # still text.
            page.fill("#tool-search", "code words")
            page.wait_for_selector('#tool-list [data-tool="fake.code_words"]')
            page.click('#tool-list [data-tool="fake.code_words"]')
            page.wait_for_selector("#tool-description code")
            spans = [c.inner_text() for c in page.locator("#tool-description code").all()]
            assert spans == ["fake.code_words({})", '<img src=x onerror="window.__xss=1">'], spans
            assert "`" not in page.inner_text("#tool-description")

            execution = run_in_playground(page, 'console.log("<b>bold?</b><img src=x onerror=window.__xss=4>");\n'
                                                'return (await fake.markup({})) + "<script>window.__xss=5</script>";')
            assert "<script>window.__xss=2</script>" in page.inner_text("#playground-text")
            assert "<img src=x onerror=window.__xss=4>" in page.inner_text("#playground-logs")
            run_in_playground(page, 'throw new Error("<img src=x onerror=window.__xss=6>");')
            assert "<img src=x onerror=window.__xss=6>" in page.inner_text("#playground-text")

            page.goto(console_url(server) + "#/executions")
            page.wait_for_selector(f'#executions tr[data-execution="{execution}"]')
            assert page.evaluate("getComputedStyle(document.querySelector('#executions td.when')).whiteSpace") == "nowrap"
            page.click(f'#executions tr[data-execution="{execution}"]')
            page.wait_for_selector("#shown")
            assert "<script>window.__xss=5</script>" in page.inner_text("#shown")
            assert "onerror=window.__xss=4" in page.inner_text("#code")
            page.goto(console_url(server) + "#/stats")
            page.wait_for_selector("#per-minute", state="attached")
            assert not ran(), (page.evaluate("window.__xss"), page.dialogs)
            # No token, and no backend `env` value, on any page or in any answer.
            for path in ["backends", "tools", "executions", "stats", "me"]:
                answer = page.evaluate(f"async () => await (await fetch('/ui/api/{path}')).text()")
                assert "env-secret-value-1234" not in answer and server.token not in answer, path
            assert "env-secret-value-1234" not in page.content() and server.token not in page.content()
            # Nothing the backend said became an element.
            for tag in ["img", "script:not([src])", "svg[onload]"]:
                assert page.locator(f"main {tag}").count() == 0, tag
    finally:
        server.close()


def test_the_console_is_small_and_needs_no_network():
    """Every asset is in the binary (no CDN: nothing but the console's own paths is loaded),
    and the page is light."""
    assets = REPO / "crates" / "gateway" / "src" / "console" / "assets"
    total = sum(f.stat().st_size for f in assets.iterdir())
    assert total < 300 * 1024, total
    html = (assets / "index.html").read_text()
    assert re.findall(r'(?:src|href)="([^"#]+)"', html) == ["/ui/app.css", "/ui/app.js"]
    assert "<script>" not in html and " style=" not in html
    modules = sorted(assets.glob("*.js"))
    assert len(modules) > 1, modules
    for module in modules:
        js = module.read_text()
        assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "eval(" not in js, module.name
        # A module imports only the console's own modules, each of which is in the directory.
        for spec in re.findall(r'^import .* from "([^"]+)";$', js, re.M):
            assert spec.startswith("./") and (assets / spec[2:]).is_file(), (module.name, spec)


def session_cookie(server: HttpServer, token: str) -> str:
    """Logs in as a page would (with the console's own Origin) and returns the session cookie."""
    import json

    request = urllib.request.Request(console_url(server) + "/login", data=json.dumps({"token": token}).encode(),
                                     headers={"Content-Type": "application/json", "Origin": console_url(server).removesuffix("/ui")})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers["set-cookie"].split(";")[0]


def test_writes_need_the_consoles_own_origin_and_events_stay_within_a_profile(tmp_path):
    """Every state-changing request needs the console's own Origin (another site's page, or a
    request with none, gets 403); a profile's live event stream carries no other profile's
    executions."""
    import json
    import threading
    import urllib.error

    config = config_with_profiles(tmp_path)
    server = HttpServer(config, token=ALPHA_TOKEN)
    try:
        base = console_url(server)
        for origin in ["http://evil.example", None, "null"]:
            headers = {"Content-Type": "application/json"} | ({"Origin": origin} if origin else {})
            for path, body in [("/login", {"token": ALPHA_TOKEN}), ("/api/run", {"code": "return 1"}), ("/logout", {})]:
                request = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers=headers)
                with pytest.raises(urllib.error.HTTPError) as refused:
                    urllib.request.urlopen(request, timeout=10)
                assert refused.value.code == 403, (origin, path)
        alpha, beta = session_cookie(server, ALPHA_TOKEN), session_cookie(server, BETA_TOKEN)

        heard: list[str] = []
        stream = urllib.request.urlopen(urllib.request.Request(base + "/api/events", headers={"Cookie": beta}), timeout=30)

        def listen():
            try:
                for line in stream:
                    heard.append(line.decode())
            except (OSError, ValueError, AttributeError):
                return  # the stream was closed at the end of the test

        threading.Thread(target=listen, daemon=True).start()
        own = console_url(server).removesuffix("/ui")

        def run(cookie: str, message: str) -> str:
            request = urllib.request.Request(base + "/api/run", data=json.dumps({"code": f'return await everything.echo({{message: "{message}"}});'}).encode(),
                                             headers={"Content-Type": "application/json", "Origin": own, "Cookie": cookie})
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read())["structured"]["execution_id"]

        time.sleep(0.5)
        theirs = run(alpha, "alpha")
        mine = run(beta, "beta")
        wait_until(lambda: any(mine in line for line in heard), 10, "beta's own execution on its stream")
        assert not any(theirs in line for line in heard), heard
        stream.close()
    finally:
        server.close()


def test_the_playground_runs_python_and_its_execution_opens_like_any_other(tmp_path):
    """Issue 50: the playground's language choice sends Python; the result, logs and the
    timeline of its fan-out show as TypeScript's do, and the execution keeps its code."""
    config = config_with_profiles(tmp_path)
    server = HttpServer(config, token=ALPHA_TOKEN)
    try:
        with browser() as chromium:
            page = open_page(chromium, server)
            log_in(page, server, ALPHA_TOKEN)
            page.goto(console_url(server) + "#/playground")
            page.select_option("#playground-language", "python")
            assert page.input_value("#playground-code").startswith("# Runs with your profile's tools"), "the Python example"
            page.fill("#playground-code", "import asyncio\nprint('fanning out')\nr = await asyncio.gather(everything.echo(message='a'), everything.echo(message='b'))\nr")
            page.click("#run")
            page.wait_for_selector("#playground-execution", timeout=30_000)
            execution = page.inner_text("#playground-execution")
            assert '"Echo: a"' in page.inner_text("#playground-text"), page.inner_text("#playground-text")
            assert "fanning out" in page.inner_text("#playground-logs")
            assert len(bars(page)) == 2
            page.goto(console_url(server) + "#/executions")
            page.click(f'#executions tr[data-execution="{execution}"]')
            page.wait_for_selector("#execution-id")
            assert "import asyncio" in page.content()
    finally:
        server.close()
