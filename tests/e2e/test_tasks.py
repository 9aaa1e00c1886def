"""MCP tasks for `call_tool_chain` (issue 30): the `io.modelcontextprotocol/tasks` extension
(SEP-2663), driven by the real Python SDK client (2026-07-28) with a tasks extension of its
own: a result claim for `resultType: "task"`, and `tasks/get`, `tasks/update` and
`tasks/cancel` sent through the SDK's session (which adds the `Mcp-Name` header and `_meta`).

A script that does not finish at once becomes a task: the client polls it, sees its progress
(how many calls finished, its last console line), and gets its result. It runs on with no
client attached; `tasks/cancel` stops it and no call starts after. A call that needs a
person's approval puts the task in `input_required`, and `tasks/update` answers it. Another
caller's task id names nothing. The long version (a 3-minute script) runs with
`SANDGATE_LONG=1`; the suite runs the same test with a script of a few seconds."""

from __future__ import annotations

import json
import os
import time
from typing import Any, Literal

import anyio
import pytest
from pydantic import ConfigDict

import mcp.types as types
from mcp import Client
from mcp.client.extension import ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp_types import Request, RequestParams, Result

from conftest import NODE_MODULES, HttpServer, execution_records, fake_backend_toml, one_process_only, structured

pytestmark = [pytest.mark.anyio, one_process_only(
    "a task lives on the replica that runs it (docs/call_tool_chain.md, Long runs)")]

TASKS = "io.modelcontextprotocol/tasks"
LONG = os.environ.get("SANDGATE_LONG") == "1"


class CreatedTask(Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]
    task_id: str
    status: str


class TaskIdParams(RequestParams):
    task_id: str


class TaskUpdateParams(RequestParams):
    task_id: str
    input_responses: dict[str, Any]


class GetTask(Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class CancelTask(Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


class UpdateTask(Request[TaskUpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class Detailed(Result):
    model_config = ConfigDict(extra="allow")


async def poll_until_done(task: CreatedTask, ctx) -> types.CallToolResult:
    while True:
        got = await ctx.session.send_request(GetTask(params=TaskIdParams(task_id=task.task_id)), Detailed)
        extra = got.model_extra
        if extra["status"] == "completed":
            return types.CallToolResult.model_validate(extra["result"])
        if extra["status"] in ("failed", "cancelled"):
            raise RuntimeError(f"task {extra['status']}")
        await anyio.sleep(0.2)


class Tasks(ClientExtension):
    identifier = TASKS

    def claims(self):
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=poll_until_done)]


def tasks_client(server: HttpServer, **options) -> Client:
    return Client(server.target(), mode="2026-07-28", read_timeout_seconds=60, extensions=[Tasks()], **options)


async def get(client: Client, task_id: str) -> dict:
    got = await client.session.send_request(GetTask(params=TaskIdParams(task_id=task_id)), Detailed)
    return got.model_extra


async def start_task(client: Client, code: str) -> CreatedTask:
    created = await client.session.call_tool("call_tool_chain", {"code": code}, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    return created


def config(tmp_path, extra=""):
    path = tmp_path / "sandgate.toml"
    path.write_text(fake_backend_toml() + f'\n[store]\npath = "{tmp_path / "store.db"}"\n' + extra)
    return path


def steps_script(steps: int, ms: int) -> str:
    return f"""console.log("started");
for (let i = 0; i < {steps}; i++) {{
  await fake.slow({{ ms: {ms} }});
  console.log("step " + i);
}}
return {{ done: true, steps: {steps} }};"""


FOREVER = "while (true) { await fake.slow({ ms: 100 }); }"


async def test_a_long_script_runs_as_a_task_the_client_polls_and_sees_progress(tmp_path):
    steps, ms = (180, 1000) if LONG else (8, 500)
    # An execution may run 30 s unless the operator allows longer.
    path = config(tmp_path, '\n[sandbox]\ntimeout = "10m"\n' if LONG else "")
    server = HttpServer(path)
    try:
        async with tasks_client(server) as client:
            started = time.monotonic()
            created = await start_task(client, steps_script(steps, ms))
            assert time.monotonic() - started < 2, "the task is answered at once"
            assert created.status == "working" and created.model_extra["ttlMs"] > 0, created
            # Durable at once: the id resolves on the next request.
            first = await get(client, created.task_id)
            assert first["status"] == "working", first
            seen = []
            while True:
                state = await get(client, created.task_id)
                if state["status"] != "working":
                    break
                seen.append(state.get("statusMessage", ""))
                await anyio.sleep(1.0 if LONG else 0.3)
            assert state["status"] == "completed", state
            result = types.CallToolResult.model_validate(state["result"])
            assert structured(result)["result"] == {"done": True, "steps": steps}
            assert any("last log: step" in message for message in seen), seen
            calls = [int(m.split(" call")[0].rsplit(" ", 1)[1]) for m in seen if " call" in m]
            assert calls == sorted(calls) and calls[-1] > calls[0], f"progress grows: {seen}"
            assert time.monotonic() - started >= steps * ms / 1000
        record = {r["id"]: r for r in execution_records(path)}[created.task_id]
        assert (record["status"], record["calls"]) == ("ok", steps), record
    finally:
        server.close()


async def test_the_sdk_claim_resolves_a_task_into_the_result_and_fast_scripts_need_none(tmp_path):
    path = config(tmp_path)
    server = HttpServer(path)
    try:
        async with tasks_client(server) as client:
            result = await client.call_tool("call_tool_chain", {"code": steps_script(3, 300)})
            assert structured(result)["result"] == {"done": True, "steps": 3}
            fast = await client.session.call_tool("call_tool_chain", {"code": "return 1 + 1"}, allow_claimed=True)
            assert isinstance(fast, types.CallToolResult) and structured(fast)["result"] == 2
        # A client without the extension never gets a task.
        async with Client(server.target(), mode="2026-07-28", read_timeout_seconds=60) as plain:
            result = await plain.call_tool("call_tool_chain", {"code": steps_script(2, 400)})
            assert structured(result)["result"] == {"done": True, "steps": 2}
    finally:
        server.close()


async def test_a_task_runs_on_without_its_client_and_cancel_stops_it_for_good(tmp_path):
    path = config(tmp_path)
    server = HttpServer(path)
    try:
        async with tasks_client(server) as client:
            finite = await start_task(client, steps_script(6, 300))
            forever = await start_task(client, FOREVER)
        # The client is gone; the scripts run on. Another connection with the same token
        # (the same caller) finds them.
        await anyio.sleep(2.5)
        async with tasks_client(server) as again:
            done = await get(again, finite.task_id)
            assert done["status"] == "completed", done
            assert (await get(again, forever.task_id))["status"] == "working"
            ack = await again.session.send_request(CancelTask(params=TaskIdParams(task_id=forever.task_id)), Detailed)
            assert ack.model_extra.get("resultType", "complete") == "complete" and "status" not in ack.model_extra
            deadline = time.monotonic() + 10
            while (state := await get(again, forever.task_id))["status"] == "working" and time.monotonic() < deadline:
                await anyio.sleep(0.2)
            assert state["status"] == "cancelled", state
            # Cancelling again is the same empty answer.
            await again.session.send_request(CancelTask(params=TaskIdParams(task_id=forever.task_id)), Detailed)
        time.sleep(1)
        record = {r["id"]: r for r in execution_records(path)}[forever.task_id]
        assert record["status"] == "cancelled", record
        calls_then = record["calls"]
        time.sleep(1.5)
        assert {r["id"]: r for r in execution_records(path)}[forever.task_id]["calls"] == calls_then, "no call after the cancel"
    finally:
        server.close()


async def test_another_caller_finds_no_task(tmp_path):
    other_token = "other-token-" + "x" * 20
    path = config(tmp_path, f'\n[[http.tokens]]\ntoken = "owner-token-{"y" * 20}"\nprofile = "default"\nname = "owner"\n'
                            f'\n[[http.tokens]]\ntoken = "{other_token}"\nprofile = "default"\nname = "other"\n')
    server = HttpServer(path, token=f"owner-token-{'y' * 20}")
    try:
        async with tasks_client(server) as owner:
            task = await start_task(owner, FOREVER)
            other = Client(server.target(headers={"Authorization": f"Bearer {other_token}"}), mode="2026-07-28",
                           read_timeout_seconds=30, extensions=[Tasks()])
            async with other:
                for request in (GetTask(params=TaskIdParams(task_id=task.task_id)),
                                CancelTask(params=TaskIdParams(task_id=task.task_id)),
                                UpdateTask(params=TaskUpdateParams(task_id=task.task_id, input_responses={"ap-x": {"action": "accept"}}))):
                    with pytest.raises(MCPError) as refused:
                        await other.session.send_request(request, Detailed)
                    assert refused.value.code == -32602 and "no task" in str(refused.value), refused.value
            assert (await get(owner, task.task_id))["status"] == "working", "the other caller stopped nothing"
            await owner.session.send_request(CancelTask(params=TaskIdParams(task_id=task.task_id)), Detailed)
    finally:
        server.close()


# A call's approval, and a whole script's before it runs (issue 51), wait in the same status.
@pytest.mark.parametrize("rule", ['approve = ["create_*"]\n', '\n[approvals]\nscripts = "writes"\n'], ids=["call", "script"])
async def test_a_task_that_needs_approval_waits_in_input_required_and_update_answers_it(tmp_path, rule):
    path = tmp_path / "sandgate.toml"
    memory = json.dumps(str(NODE_MODULES / "server-memory/dist/index.js"))
    server_rule, approvals = (rule, "") if rule.startswith("approve") else ("", rule)
    path.write_text(f'[servers.memory]\ncommand = "node"\nargs = [{memory}]\n{server_rule}'
                    f'env = {{ MEMORY_FILE_PATH = {json.dumps(str(tmp_path / "memory.jsonl"))} }}\n'
                    f'{approvals}\n[store]\npath = "{tmp_path / "store.db"}"\n')
    code = """await memory.create_entities({ entities: [{ name: "release", entityType: "event", observations: [] }] });
return (await memory.read_graph({})).entities.length;"""

    async def never_called(context, params):
        raise AssertionError("a task's questions come through tasks/get, not elicitation/create")

    server = HttpServer(path)
    try:
        async with tasks_client(server, elicitation_callback=never_called) as client:
            task = await start_task(client, code)
            deadline = time.monotonic() + 10
            while (state := await get(client, task.task_id))["status"] == "working" and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            assert state["status"] == "input_required", state
            (key, asked), = state["inputRequests"].items()
            assert asked["method"] == "elicitation/create" and "memory.create_entities" in asked["params"]["message"]
            assert ("Approve this script" in asked["params"]["message"]) == (approvals != ""), asked
            with pytest.raises(MCPError) as never:
                await client.session.send_request(UpdateTask(params=TaskUpdateParams(
                    task_id=task.task_id, input_responses={"ap-never-asked": {"action": "accept"}})), Detailed)
            assert never.value.code == -32602, never.value
            await client.session.send_request(UpdateTask(params=TaskUpdateParams(
                task_id=task.task_id, input_responses={key: {"action": "accept"}})), Detailed)
            while (state := await get(client, task.task_id))["status"] in ("working", "input_required"):
                await anyio.sleep(0.1)
            assert state["status"] == "completed" and structured(types.CallToolResult.model_validate(state["result"]))["result"] == 1, state
    finally:
        server.close()


def test_a_2025_session_that_declares_the_extension_gets_tasks_with_that_revisions_result_and_list(tmp_path):
    """Raw HTTP: the Python SDK advertises claim-bearing extensions only on 2026-07-28."""
    import re

    from rawhttp import PROTOCOL, Conn

    server = HttpServer(config(tmp_path))
    try:
        conn = Conn(int(re.search(r":(\d+)/mcp", server.url).group(1)))
        auth = [("Authorization", f"Bearer {server.token}")]
        reply = conn.request({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {"extensions": {TASKS: {}}},
            "clientInfo": {"name": "raw", "version": "1"}}}, headers=auth)
        assert TASKS in reply.message()["result"]["capabilities"]["extensions"]
        session = reply.headers["mcp-session-id"]
        conn.request({"jsonrpc": "2.0", "method": "notifications/initialized"}, session, headers=auth)

        def send(request_id, method, params):
            return conn.request({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
                                session, headers=auth).message()

        created = send(1, "tools/call", {"name": "call_tool_chain", "arguments": {"code": steps_script(3, 400)}})["result"]
        assert created["resultType"] == "task" and created["status"] == "working", created
        task_id = created["taskId"]
        listed = send(2, "tasks/list", {})["result"]["tasks"]
        assert [t["taskId"] for t in listed] == [task_id], listed
        started = time.monotonic()
        result = send(3, "tasks/result", {"taskId": task_id})["result"]
        assert time.monotonic() - started > 0.5, "tasks/result waited for the end"
        assert result["structuredContent"]["result"] == {"done": True, "steps": 3}, result
        assert result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == task_id
        assert send(4, "tasks/get", {"taskId": task_id})["result"]["status"] == "completed"
        # The 2026-07-28 revision removed both.
        gone = conn.request({"jsonrpc": "2.0", "id": 5, "method": "tasks/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}}},
            headers=auth + [("Mcp-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tasks/list")]).message()
        assert gone["error"]["code"] == -32601, gone
    finally:
        server.close()
