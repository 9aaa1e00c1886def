"""A real OpenID provider for the identity tests and benchmarks: `oidc-provider` (npm) on
loopback, started by `tests/node/oidc_provider.mjs` with a signing key made here, which the
tests hold too (to make tokens the issuer's key signs but the issuer would never issue). Also a
loopback key server for what must never be fetched (an attacker's keys) and for faulty key
endpoints (fault injection)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import json
import secrets
import subprocess
import threading
import time
from pathlib import Path

import httpx2 as httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import NODE_MODULES

PROVIDER = NODE_MODULES.parent.parent / "oidc_provider.mjs"
USERS = {
    "alice": {"secret": "alice-" + secrets.token_hex(8), "claims": {"groups": ["eng"]}},
    "bob": {"secret": "bob-" + secrets.token_hex(8), "claims": {"groups": ["eng"]}},
    "mallory": {"secret": "mallory-" + secrets.token_hex(8), "claims": {"groups": ["sales"]}},
    # In the group, with no credentials of her own (the per-user backend tests).
    "carol": {"secret": "carol-" + secrets.token_hex(8), "claims": {"groups": ["eng"]}},
    # The gateway itself, when it asks the issuer about opaque tokens.
    "gateway": {"secret": "gateway-" + secrets.token_hex(8), "claims": {}},
}


def b64(n: int) -> str:
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class Issuer:
    """oidc-provider on loopback, with a signing key this test holds too (to make tokens the
    issuer's key signs but the issuer would never issue: expired, for another audience...)."""

    def __init__(self, tmp: Path, resources: list[str], opaque: tuple[str, ...] = (),
                 exchangers: tuple[str, ...] = (), console_redirect: str | None = None,
                 upstream: dict | None = None):
        """`upstream`: {"resource": a backend's MCP URL, "scope": the scopes it grants, "ttl": seconds,
        "refresh_ttl": seconds, "client": {"id", "redirect"}: a client configured, not registered}
        makes this also that backend's authorization server (registration, the code flow,
        rotating refresh tokens)."""
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "k-" + secrets.token_hex(4)
        numbers = self.key.private_numbers()
        public = numbers.public_numbers
        jwk = {"kty": "RSA", "kid": self.kid, "alg": "RS256", "use": "sig", "n": b64(public.n), "e": b64(public.e),
               "d": b64(numbers.d), "p": b64(numbers.p), "q": b64(numbers.q), "dp": b64(numbers.dmp1),
               "dq": b64(numbers.dmq1), "qi": b64(numbers.iqmp)}
        settings = tmp / "provider.json"
        resource_settings = {r: {"scope": "sandgate", "format": "opaque" if r in opaque else "jwt"} for r in resources}
        if upstream:
            resource_settings[upstream["resource"]] = {"scope": upstream["scope"], "format": "jwt",
                                                       "ttl": upstream.get("ttl", 300)}
        settings.write_text(json.dumps({
            "signing_key": jwk,
            "resources": resource_settings,
            "upstream": bool(upstream),
            "refresh_ttl": (upstream or {}).get("refresh_ttl"),
            "upstream_client": (upstream or {}).get("client"),
            "scopes": upstream["scope"].split() if upstream else [],
            "clients": [{"id": name, "secret": u["secret"], "claims": u["claims"]} for name, u in USERS.items()],
            "exchangers": list(exchangers),
            "console_redirect": console_redirect,
        }))
        self.proc = subprocess.Popen(["node", str(PROVIDER), str(settings)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("oidc-provider did not start: " + self.proc.stderr.read()[-3000:])
        self.url = json.loads(line)["issuer"]
        self.pem = self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption())
        self.public_pem = self.key.public_key().public_bytes(serialization.Encoding.PEM,
                                                             serialization.PublicFormat.SubjectPublicKeyInfo)

    def sign(self, claims: dict, headers: dict | None = None) -> str:
        return jwt.encode(claims, self.pem, algorithm="RS256", headers={"kid": self.kid, **(headers or {})})

    def sign_raw(self, payload: bytes) -> str:
        """A token whose claims are `payload` as it is (JSON Python could not write, say)."""
        return jwt.api_jws.PyJWS().encode(payload, self.pem, algorithm="RS256", headers={"kid": self.kid})

    def revoke(self, token: str, user: str):
        """Revokes `token`, as the client `user` it was issued to."""
        answer = httpx.post(f"{self.url}/token/revocation", data={"token": token},
                            auth=(user, USERS[user]["secret"]), timeout=10)
        assert answer.status_code == 200, answer.text

    def client_token(self, user: str, resource: str) -> str:
        answer = httpx.post(f"{self.url}/token", data={"grant_type": "client_credentials", "resource": resource,
                                                       "scope": "sandgate"},
                            auth=(user, USERS[user]["secret"]), timeout=10)
        assert answer.status_code == 200, answer.text
        return answer.json()["access_token"]

    def exchanges(self) -> int:
        """How many token exchanges the issuer has answered."""
        return httpx.get(f"{self.url}/test/exchanges", timeout=10).json()["exchanges"]

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)


def hs256(claims: dict, secret: bytes, headers: dict) -> str:
    """A token signed with HMAC-SHA256 under `secret`: PyJWT will not use a public key as an HMAC
    secret, so the algorithm-confusion token is made by hand."""

    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    signing_input = part({"alg": "HS256", "typ": "JWT", **headers}) + "." + part(claims)
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + base64.urlsafe_b64encode(signature).rstrip(b"=").decode()


class KeyServer(http.server.ThreadingHTTPServer):
    """A loopback server that counts the requests it gets and answers what the test says: an
    attacker's key set (nobody may fetch it), or a faulty JWKS endpoint (fault injection)."""

    def __init__(self, answer):
        self.hits = 0
        self.answer = answer
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.hits += 1
                status, body, delay = server.answer(self.path)
                time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def do_POST(self):
                # An introspection endpoint: the form is read, then answered as the test says.
                self.rfile.read(int(self.headers.get("content-length", "0")))
                self.do_GET()

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.daemon_threads = True
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Memory:
    """Token storage for the SDK's OAuth client."""

    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, info):
        self.client = info


def oauth_toml(port: int, issuer_url: str, profile: str = "builder") -> str:
    """`[auth.oauth]` for a gateway on `port` that accepts `issuer_url`'s tokens and gives the
    users of group `eng` (alice, bob, carol) `profile`."""
    return f"""
[auth.oauth]
resource = "http://127.0.0.1:{port}/mcp"

[[auth.oauth.issuers]]
issuer = "{issuer_url}"

[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "{profile}"
"""


def as_user(server, issuer: Issuer, user: str):
    provider = ClientCredentialsOAuthProvider(server_url=server.url, storage=Memory(), client_id=user,
                                              client_secret=USERS[user]["secret"], scope="sandgate", issuer=issuer.url)
    return streamable_http_client(server.url, http_client=create_mcp_http_client(auth=provider))


@pytest.fixture
def issuers():
    """Starts issuers for a test, and stops every one after it, whatever happened."""
    made: list[Issuer] = []

    def start(tmp: Path, resources: list[str], **options) -> Issuer:
        made.append(Issuer(tmp, resources, **options))
        return made[-1]

    yield start
    for issuer in made:
        issuer.close()
