// A real OpenID provider for the identity tests: `oidc-provider` (OpenID Certified) on
// loopback, issuing JWT access tokens for the resources the test names (RFC 8707), by the
// client credentials grant and by token exchange (RFC 8693) where the test asks for it.
//
//   node oidc_provider.mjs SETTINGS.json
//
// SETTINGS: {"signing_key": <private JWK>, "resources": {"<url>": {"scope": "...", "format": "jwt" | "opaque"}},
//            "clients": [{"id", "secret", "claims": {...}}], "exchangers": ["<client id>", ...]}
// Prints one JSON line, {"issuer": "http://127.0.0.1:PORT"}, once it listens.
//
// A console: with "console_redirect" set, a public client "console" (authorization code with
// PKCE) may log users in at that redirect URI, through the provider's own development login
// and consent pages (any login name is a user; the user "alice" gets alice's claims).
//
// A backend's authorization server: with "upstream": true, clients may register themselves
// (RFC 7591), the authorization code flow runs through the same development login and consent
// pages, refresh tokens are issued to clients that may use them and rotated on each use, and
// "scopes" lists the scopes beyond "openid" and "sandgate" (a resource's "scope" says which it
// grants).
//
// Token exchange: a client named in "exchangers" may present another client's access token
// (a JWT this provider signed, for any of its resources) and get one for another resource,
// whose subject is the same client (with its claims). GET /test/exchanges says how many
// exchanges it has answered, so a test can see a gateway keep the tokens it got.

import { readFileSync } from "node:fs";
import http from "node:http";
import { importJWK, jwtVerify } from "jose";
import Provider, { errors } from "oidc-provider";

const EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token";

const settings = JSON.parse(readFileSync(process.argv[2], "utf8"));
const server = http.createServer();
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;
const claimsOf = Object.fromEntries(settings.clients.map((c) => [c.id, c.claims ?? {}]));
const exchangers = new Set(settings.exchangers ?? []);
let exchanges = 0;

function resourceInfo(resource) {
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
}

const consoleClient = settings.console_redirect ? [{
  client_id: "console",
  grant_types: ["authorization_code"],
  redirect_uris: [settings.console_redirect],
  response_types: ["code"],
  token_endpoint_auth_method: "none",
}] : [];

// A client a gateway is configured with at this server (not registered by it): public, the
// code flow and refresh, back to "upstream_client.redirect".
const upstreamClient = settings.upstream_client ? [{
  client_id: settings.upstream_client.id,
  grant_types: ["authorization_code", "refresh_token"],
  redirect_uris: [settings.upstream_client.redirect],
  response_types: ["code"],
  token_endpoint_auth_method: "none",
}] : [];

const provider = new Provider(issuer, {
  clients: settings.clients.map((c) => ({
    client_id: c.id,
    client_secret: c.secret,
    grant_types: exchangers.has(c.id) ? ["client_credentials", EXCHANGE] : ["client_credentials"],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: "client_secret_basic",
  })).concat(consoleClient, upstreamClient),
  findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id, ...(claimsOf[id] ?? {}) }) }),
  jwks: { keys: [settings.signing_key] },
  scopes: ["openid", "sandgate", ...(settings.scopes ?? [])],
  issueRefreshToken: (ctx, client) => Boolean(settings.upstream) && client.grantTypeAllowed("refresh_token"),
  // A test of a refused refresh gives refresh tokens a short life ("refresh_ttl", seconds).
  ...(settings.refresh_ttl ? { ttl: { RefreshToken: settings.refresh_ttl } } : {}),
  rotateRefreshToken: true,
  features: {
    devInteractions: { enabled: Boolean(settings.console_redirect || settings.upstream) },
    registration: { enabled: Boolean(settings.upstream) },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => Object.keys(settings.resources)[0],
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => resourceInfo(resource),
    },
  },
  extraTokenClaims: (ctx, token) => claimsOf[token.accountId ?? token.clientId] ?? {},
});
provider.proxy = false;

const { d, p, q, dp, dq, qi, ...publicJwk } = settings.signing_key;
const verifyKey = await importJWK(publicJwk, settings.signing_key.alg ?? "RS256");
provider.registerGrantType(EXCHANGE, async (ctx) => {
  const { subject_token, subject_token_type, audience, resource, scope } = ctx.oidc.params;
  if (subject_token_type !== ACCESS_TOKEN) throw new errors.InvalidRequest("subject_token_type must be an access token");
  let subject;
  try {
    ({ payload: subject } = await jwtVerify(subject_token, verifyKey, { issuer }));
  } catch (error) {
    throw new errors.InvalidGrant("subject_token is not a valid access token of this issuer");
  }
  const target = resource ?? audience;
  const info = resourceInfo(target);
  const client = await provider.Client.find(subject.client_id ?? subject.sub);
  if (!client) throw new errors.InvalidGrant("subject_token names no known client");
  const token = new provider.ClientCredentials({ client, scope: scope ?? info.scope });
  token.resourceServer = new provider.ResourceServer(target, info);
  const value = await token.save();
  exchanges += 1;
  ctx.body = {
    access_token: value,
    issued_token_type: ACCESS_TOKEN,
    token_type: "Bearer",
    expires_in: token.expiration,
    scope: token.scope,
  };
}, ["subject_token", "subject_token_type", "audience", "resource", "scope", "requested_token_type"]);

const callback = provider.callback();
server.on("request", (req, res) => {
  if (req.url === "/test/exchanges") {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ exchanges }));
    return;
  }
  callback(req, res);
});
process.stdout.write(JSON.stringify({ issuer }) + "\n");
