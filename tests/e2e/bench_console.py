"""How fast the web console paints, in headless Chromium on loopback (issue 19: first paint
under 200 ms). Not a test: run it and read the figures.

    .venv/bin/python tests/e2e/bench_console.py            # uses target/debug/sandgate
    SANDGATE_BIN=target/release/sandgate .venv/bin/python tests/e2e/bench_console.py

Each of 30 loads opens /ui in a fresh page of a logged-in browser context and reads the
browser's own first-contentful-paint entry, and the time until the backends table is filled
(the page fetched /ui/api/me and /ui/api/backends and drew them).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from playwright.sync_api import sync_playwright  # noqa: E402

from conftest import HttpServer, reference_servers, write_config  # noqa: E402
from test_console import CHROMIUM, console_url  # noqa: E402

LOADS = 30


def main():
    tmp = Path(tempfile.mkdtemp())
    server = HttpServer(write_config(tmp, "toml", reference_servers(tmp)))
    paints, filled = [], []
    try:
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            context = chromium.new_context()
            page = context.new_page()
            page.goto(console_url(server))
            page.fill("#token", server.token)
            page.click("#login-button")
            page.wait_for_selector("#backends .badge.ready")
            page.close()
            for _ in range(LOADS):
                page = context.new_page()
                page.goto(console_url(server) + "#/backends")
                page.wait_for_selector("#backends tr")
                timing = page.evaluate("""() => ({
                    paint: performance.getEntriesByName('first-contentful-paint')[0]?.startTime,
                    filled: performance.now(),
                })""")
                paints.append(timing["paint"])
                filled.append(timing["filled"])
                page.close()
            chromium.close()
    finally:
        server.close()
    assets = Path(__file__).parents[2] / "crates" / "gateway" / "src" / "console" / "assets"
    size = sum(f.stat().st_size for f in assets.iterdir())
    print(f"assets: {size / 1024:.1f} KiB in {len(list(assets.iterdir()))} files")
    for name, values in (("first contentful paint", paints), ("backends table filled", filled)):
        values = sorted(values)
        print(f"{name}: median {statistics.median(values):.1f} ms, p95 {values[int(len(values) * 0.95) - 1]:.1f} ms, "
              f"max {values[-1]:.1f} ms over {len(values)} loads")


if __name__ == "__main__":
    main()
