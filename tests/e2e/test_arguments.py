"""A call's arguments are checked against the tool's declared input before they are sent
(issue 47, item 8), the same way whatever language the server is written in.

mcp-server-time (Python, FastMCP) answered a misspelt key with an `isError` result holding
Pydantic's validation text, and the hint suggested try/catch; the npm servers answered with
JSON-RPC's "invalid params". Now the gateway names what is wrong (a missing required key, a
wrong type, a key the declaration does not have) and the hint quotes the declaration."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from conftest import connect, reference_servers, write_config

pytestmark = pytest.mark.anyio

TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")


def servers(tmp_path) -> dict:
    return {
        "everything": reference_servers(tmp_path)["everything"],
        "time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]},
    }


async def failure(client, code: str) -> dict:
    result = await client.call_tool("call_tool_chain", {"code": code})
    error = (result.structured_content or {}).get("error")
    assert error, result
    return error


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_wrong_arguments_are_named_with_the_declaration_for_any_server(tmp_path, transport):
    config = write_config(tmp_path, "toml", servers(tmp_path))
    async with connect(transport, config) as client:
        fine = await client.call_tool("call_tool_chain", {"code": "return await time.get_current_time({ timezone: 'UTC' });"})
        assert (fine.structured_content or {}).get("result", {}).get("timezone") == "UTC", fine

        error = await failure(client, "return await time.get_current_time({ timezon: 'Europe/Paris' });")
        assert "invalid arguments for time.get_current_time" in error["message"], error
        assert "missing required argument `timezone`" in error["message"], error
        assert "unknown argument `timezon` (did you mean `timezone`?)" in error["message"], error
        assert "validation error" not in error["message"], "the server was called"
        assert "declared as" in error["hint"] and "timezone: string" in error["hint"], error["hint"]

        error = await failure(client, "return await time.convert_time({ source_timezone: 'UTC', time: 1430, target_timezone: 'Asia/Tokyo' });")
        assert "`time` must be a string, not the number 1430" in error["message"], error

        # The npm server's own check answered first before, in its words; now the same words.
        error = await failure(client, "return await everything.get_sum({ a: 'x', b: 1 });")
        assert "`a` must be a number, not the string \"x\"" in error["message"], error
        assert "declared as" in error["hint"], error

        # A JSON call (the direct tier) is checked by the same door.
        direct = await client.call_tool("call_tool_chain", {"code": '{"tool": "time.get_current_time", "arguments": {}}'})
        assert "missing required argument `timezone`" in str(direct.content), direct


async def test_a_call_of_a_hundred_thousand_keys_is_judged_in_time(tmp_path):
    config = write_config(tmp_path, "toml", servers(tmp_path))
    many = "const a: any = {};\nfor (let i = 0; i < 100000; i++) a['timezone_' + i] = i;\n"
    async with connect("stdio", config) as client:
        # Without `timezone`: refused, with at most five problems named (each key reads like a
        # misspelling of `timezone`; only the first few are compared).
        started = time.monotonic()
        error = await failure(client, many + "return await time.get_current_time(a);")
        assert time.monotonic() - started < 10
        assert error["message"].count("did you mean `timezone`") == 4, error["message"]
        assert len(error["message"]) < 2_000, len(error["message"])
        # With it: the schema is open, so the extra keys go to the server, which ignores them.
        started = time.monotonic()
        fine = await client.call_tool("call_tool_chain", {"code": many + "a.timezone = 'UTC';\nreturn (await time.get_current_time(a)).timezone;"})
        assert time.monotonic() - started < 10
        assert (fine.structured_content or {}).get("result") == "UTC", fine
        still = await client.call_tool("call_tool_chain", {"code": "return 'still here'"})
        assert (still.structured_content or {}).get("result") == "still here"


async def test_an_argument_over_the_limit_names_the_limits_and_promises_no_output(tmp_path):
    """A public benchmark's replay (issue 47): a 20 MB argument was stopped before it was sent,
    but the message named no setting and the hint said "`e.content` has its output" though
    nothing was sent."""
    config = write_config(tmp_path, "toml", servers(tmp_path))
    async with connect("stdio", config) as client:
        error = await failure(client, "return await everything.echo({ message: 'x'.repeat(20 * 1024 * 1024) });")
        assert "so the call was not sent" in error["message"], error
        assert "max_call_args_bytes" in error["message"] and "max_argument_bytes" in error["message"], error
        assert "e.content" not in error["hint"] and "Nothing was sent" in error["hint"], error["hint"]
