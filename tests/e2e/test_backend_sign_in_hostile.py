"""Hostile cases against signing in to a backend (issue 51), at the level an attacker reaches:
HTTP against `sandgate serve`, with a real browser for the parts a person does. A callback
replayed after it signed someone in; another user's code and state brought to this browser
(login CSRF); a flood of callbacks with made-up cookies. Each case checks the answer, its time
and size, that nobody's tokens changed, and that the gateway still answers."""

from __future__ import annotations

import base64
import time

import anyio
import httpx2 as httpx

from conftest import one_process_only, structured, text_of
from test_backend_sign_in import ALICE, BOB, call, sign_in_through_the_console, world  # noqa: F401 - a fixture
from test_console import browser, console_url, log_in, open_page

pytestmark = one_process_only("the sign-in's callback comes back to the console of one gateway here")


def start_and_catch_the_callback(chromium, server, issuer, token: str, user: str):
    """Logs in with `token`, presses Connect, signs in at the server as `user`, and catches the
    redirect back before it reaches the gateway: the callback's URL and the browser's
    `sandgate_connect` cookie."""
    page = open_page(chromium, server)
    log_in(page, server, token)
    caught = []

    # The consent's POST, sent by hand, and its redirects followed by hand up to the one that
    # would bring the browser back (Playwright routes no redirected request).
    def on_confirm(route):
        from urllib.parse import urljoin
        if route.request.method != "POST" or "prompt=consent" not in (route.request.post_data or ""):
            route.continue_()
            return
        location = route.fetch(max_redirects=0).headers.get("location")
        while location and "/ui/connect/callback" not in location:
            location = page.context.request.get(urljoin(issuer.url, location), max_redirects=0).headers.get("location")
        caught.append(location)
        route.fulfill(status=200, body="caught")

    page.route("**/interaction/*", on_confirm)
    page.goto(console_url(server) + "/connect/start?backend=notes")
    page.wait_for_selector("input[name=login]")
    page.fill("input[name=login]", user)
    page.fill("input[name=password]", "anything")
    page.click("button[type=submit]")
    page.wait_for_selector("button[type=submit]:has-text('Continue')")
    page.click("button[type=submit]:has-text('Continue')")
    deadline = time.monotonic() + 15
    while not caught and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    cookies = page.context.cookies()
    assert caught, (page.url, page.content()[:500])
    cookie = next((c["value"] for c in cookies if c["name"] == "sandgate_connect"), None)
    assert cookie, [c["name"] for c in cookies]
    page.context.close()
    return caught[0], cookie


def callback(url: str, cookie: str):
    started = time.monotonic()
    answer = httpx.get(url, headers={"cookie": f"sandgate_connect={cookie}"}, timeout=30)
    return answer, time.monotonic() - started


def test_another_users_code_and_state_sign_nobody_in_and_a_replayed_callback_changes_nothing(world):
    server, issuer, notes, _ = world
    rss_before = server.rss_kib() / 1024
    with browser() as chromium:
        # Bob's sign-in, caught before it came back; Alice's, started but not finished.
        bobs_callback, bobs_cookie = start_and_catch_the_callback(chromium, server, issuer, BOB, "bob")
        _, alices_cookie = start_and_catch_the_callback(chromium, server, issuer, ALICE, "alice")
    # Bob's code and state brought to Alice's browser (a login CSRF): refused, and Alice has no
    # tokens of Bob's.
    answer, took = callback(bobs_callback, alices_cookie)
    assert answer.status_code == 400 and "state does not match" in answer.text, answer.text
    assert took < 5 and len(answer.content) < 4096
    alices = anyio.run(call, server, ALICE, "return await notes.whoami({})")
    assert alices.is_error and "sign_in_required" in text_of(alices), text_of(alices)
    # A cookie altered to name Alice as the owner of Bob's sign-in opens for nobody.
    _, sealed = bobs_cookie.split(".", 1)
    alice_owner = base64.urlsafe_b64encode(b"token:alice").rstrip(b"=").decode()
    answer, _ = callback(bobs_callback, f"{alice_owner}.{sealed}")
    assert answer.status_code == 400 and "started no sign-in" in answer.text, answer.text
    # Bob's own callback, with his own cookie, signs him in once; replayed, it changes nothing
    # (the code was used: the server refuses it).
    answer, _ = callback(bobs_callback, bobs_cookie)
    assert answer.status_code == 302, answer.text
    bobs = anyio.run(call, server, BOB, "return await notes.whoami({})")
    assert not bobs.is_error, text_of(bobs)
    tokens_before = notes.seen()["tokens"]
    answer, took = callback(bobs_callback, bobs_cookie)
    assert answer.status_code == 502 and "did not succeed" in answer.text, answer.text
    assert "eyJ" not in answer.text and took < 10, answer.text
    bobs = anyio.run(call, server, BOB, "return await notes.whoami({})")
    assert not bobs.is_error and notes.seen()["tokens"] == tokens_before, "bob's tokens are the same ones"
    # A flood of made-up callbacks: each refused at once, small, and the gateway still answers.
    started = time.monotonic()
    for i in range(300):
        answer, _ = callback(console_url(server) + f"/connect/callback?code=c{i}&state=s{i}",
                             f"x{i}." + "A" * (i * 10))
        assert answer.status_code == 400 and len(answer.content) < 4096, answer.text
    assert time.monotonic() - started < 30
    assert server.rss_kib() / 1024 - rss_before < 64
    still = anyio.run(call, server, BOB, "return await notes.whoami({})")
    assert not still.is_error and structured(still)["result"], text_of(still)
