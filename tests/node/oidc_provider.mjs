// A real OpenID provider for the identity tests: `oidc-provider` (OpenID Certified) on
// loopback, issuing JWT access tokens for the resources the test names (RFC 8707), by the
// client credentials grant and by token exchange (RFC 8693) where the test asks for it.
//
//   node oidc_provider.mjs SETTINGS.json
//
// SETTINGS: {"signing_key": <private JWK>, "resources": {"<url>": {"scope": "...", "format": "jwt" | "opaque"}},
//            "clients": [{"id", "secret", "claims": {...}}]}
// Prints one JSON line, {"issuer": "http://127.0.0.1:PORT"}, once it listens.

import { readFileSync } from "node:fs";
import http from "node:http";
import Provider, { errors } from "oidc-provider";

const settings = JSON.parse(readFileSync(process.argv[2], "utf8"));
const server = http.createServer();
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;
const claimsOf = Object.fromEntries(settings.clients.map((c) => [c.id, c.claims ?? {}]));

const provider = new Provider(issuer, {
  clients: settings.clients.map((c) => ({
    client_id: c.id,
    client_secret: c.secret,
    grant_types: ["client_credentials"],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: "client_secret_basic",
  })),
  jwks: { keys: [settings.signing_key] },
  scopes: ["openid", "sandgate"],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => Object.keys(settings.resources)[0],
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => {
        const known = settings.resources[resource];
        if (!known) throw new errors.InvalidTarget();
        const info = {
          scope: known.scope ?? "sandgate",
          audience: resource,
          accessTokenTTL: known.ttl ?? 300,
          accessTokenFormat: known.format ?? "jwt",
        };
        if (info.accessTokenFormat === "jwt") info.jwt = { sign: { alg: settings.signing_key.alg ?? "RS256" } };
        return info;
      },
    },
  },
  extraTokenClaims: (ctx, token) => claimsOf[token.clientId] ?? {},
});
provider.proxy = false;
server.on("request", provider.callback());
process.stdout.write(JSON.stringify({ issuer }) + "\n");
