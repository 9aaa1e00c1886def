"""A backend's own requests during a call from a script (issue 30): server-everything's
`trigger-elicitation-request` sends `elicitation/create`, and `trigger-sampling-request` sends
`sampling/createMessage`, in the middle of its tool call. sandgate passes each on to the person
behind the script's client (the real Python SDK client's callbacks), over a 2025-11-25 session
and a 2026-07-28 stateless connection, and the answer goes back to the backend, which returns
it in its result. A client without the capability gets a clear refusal; so does a request sent
while several calls are in flight on the backend (MCP does not say which call it belongs to,
and it must never reach the wrong client)."""

from __future__ import annotations

import json

import pytest

import mcp.types as types
from mcp import Client, StdioServerParameters

from conftest import NODE_MODULES, SANDGATE, HttpServer, one_process_only, structured, text_of

pytestmark = [pytest.mark.anyio, one_process_only("a parked script lives on the replica that runs it")]

ELICIT = """const r = await everything.trigger_elicitation_request({});
return r;"""
SAMPLE = """const r = await everything.trigger_sampling_request({ prompt: "what is six times seven?" });
return r;"""
TWO_AT_ONCE = """const rs = await Promise.allSettled([
  everything.trigger_elicitation_request({}), everything.trigger_elicitation_request({})]);
return rs.map((r) => r.status === "fulfilled" ? "ok" : r.reason.message);"""


def config(tmp_path):
    path = tmp_path / "sandgate.toml"
    path.write_text(
        f'[servers.everything]\ncommand = "node"\n'
        f'args = [{json.dumps(str(NODE_MODULES / "server-everything/dist/index.js"))}, "stdio"]\n'
        f'\n[store]\npath = {json.dumps(str(tmp_path / "store.db"))}\n')
    return path


class Person:
    def __init__(self):
        self.asked = []

    async def elicit(self, context, params):
        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})

    async def sample(self, context, params):
        self.asked.append(params.messages[0].content.text)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="forty-two"),
                                         model="test-model", stop_reason="endTurn")


def client(transport, mode, path, servers, **callbacks) -> Client:
    if transport == "stdio":
        return Client(StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(path)]),
                      mode=mode, read_timeout_seconds=60, **callbacks)
    servers.append(HttpServer(path))
    return Client(servers[-1].target(), mode=mode, read_timeout_seconds=60, **callbacks)


@pytest.mark.parametrize("transport,mode", [("stdio", "legacy"), ("http", "legacy"), ("http", "2026-07-28")])
async def test_a_backends_question_reaches_the_person_and_the_answer_goes_back(tmp_path, transport, mode):
    person, servers = Person(), []
    try:
        async with client(transport, mode, config(tmp_path), servers, elicitation_callback=person.elicit) as c:
            result = await c.call_tool("call_tool_chain", {"code": ELICIT})
    finally:
        for server in servers:
            server.close()
    shown = json.dumps(structured(result)["result"])
    assert "Ada Lovelace" in shown, shown
    assert len(person.asked) == 1 and person.asked[0].startswith("[backend everything asks]"), person.asked


async def test_sampling_goes_to_a_client_that_declares_it_and_is_refused_to_one_that_does_not(tmp_path):
    path = config(tmp_path)
    person = Person()
    params = StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(path)])
    async with Client(params, mode="legacy", read_timeout_seconds=60, sampling_callback=person.sample) as c:
        result = await c.call_tool("call_tool_chain", {"code": SAMPLE})
    assert "forty-two" in json.dumps(structured(result)["result"]), result
    assert person.asked and "six times seven" in person.asked[0], person.asked
    async with Client(params, mode="legacy", read_timeout_seconds=60, elicitation_callback=person.elicit) as c:
        refused = await c.call_tool("call_tool_chain", {"code": SAMPLE})
    assert refused.is_error and "declared no sampling capability" in text_of(refused), text_of(refused)


async def test_a_request_is_never_guessed_onto_one_of_several_calls(tmp_path):
    person = Person()
    params = StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(config(tmp_path))])
    async with Client(params, mode="legacy", read_timeout_seconds=60, elicitation_callback=person.elicit) as c:
        result = await c.call_tool("call_tool_chain", {"code": TWO_AT_ONCE})
    outcomes = structured(result)["result"]
    assert person.asked == [], "nobody was asked a question that may not be theirs"
    assert all("calls were in flight" in o for o in outcomes), outcomes
