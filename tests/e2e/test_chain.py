"""call_tool_chain end to end: the Python MCP SDK client against `sandgate serve` in front of the
real npm servers. Every tier (and the path it took), the equivalence table, a 50 KB JSON result
shaped and read back whole, intent filtering, UTF-8 at every cut, a timeout with partial
results, progress notifications, and execution records."""

import json
import subprocess

import pytest

from conftest import SANDGATE, connect, on_v8, read_output_whole, reference_servers, shown_result, structured, text_of, write_config
from equivalence import rows

pytestmark = pytest.mark.anyio


def servers_with_files(tmp_path):
    servers = reference_servers(tmp_path)
    root = tmp_path / "files"
    (root / "data.json").write_text(json.dumps({"z": 1, "10": 2, "a": [1.5, 2.0, 1e21]}))
    return servers, root


async def chain(client, code, **extra):
    return await client.call_tool("call_tool_chain", {"code": code, **extra})


def essence(result):
    """What must match between tiers: the result and the error's kind and message."""
    data = result.structured_content
    error = data["error"]
    return (
        json.dumps(shown_result(result), ensure_ascii=False),
        data["shaped"],
        error and (error["kind"], error["message"], error["hint"]),
        [(c["tool"], c["ok"]) for c in data["calls"]],
    )


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_every_tier_shows_its_path(tmp_path, transport):
    servers, _ = servers_with_files(tmp_path)
    config = write_config(tmp_path, "toml", servers)
    async with connect(transport, config) as client:
        cases = [
            ('{"tool": "everything.echo", "arguments": {"message": "one"}}', "json", "Echo: one"),
            ("return await everything.echo({message: 'two'})", "single_call", "Echo: two"),
            ("__getToolInterface('everything.echo')", "introspection", None),
            ("const r = await Promise.all([1, 2].map(n => everything.echo({message: `m${n}`})));\nreturn r.join(',');", "sandbox", "Echo: m1,Echo: m2"),
        ]
        for code, tier, expected in cases:
            result = await chain(client, code)
            data = structured(result)
            assert data["tier"] == tier, data
            assert f"[{tier} · " in text_of(result)
            if expected is not None:
                assert data["result"] == expected, data
        assert "function echo(" in structured(await chain(client, "__getToolInterface('everything.echo')"))["result"]


@pytest.mark.parametrize("engine", ["quickjs", "v8"])
async def test_tiers_one_and_two_equal_the_sandbox(tmp_path, engine):
    servers, root = servers_with_files(tmp_path)
    config = write_config(tmp_path, "toml", servers)
    if engine == "v8":
        on_v8(config)
    table = rows(str(root))
    assert len(table) >= 200, len(table)
    async with connect("stdio", config) as client:
        for code, reference, tier in table:
            fast = await chain(client, code)
            slow = await chain(client, reference, force_sandbox=True)
            assert fast.structured_content["tier"] == tier, (code, fast.structured_content)
            assert slow.structured_content["tier"] == "sandbox"
            assert essence(fast) == essence(slow), (code, fast.structured_content, slow.structured_content)
            assert fast.is_error == slow.is_error, code


async def test_a_50kb_json_result_is_shaped_and_read_back_whole(tmp_path):
    servers, root = servers_with_files(tmp_path)
    items = [{"id": i, "name": f"item-{i}", "title": f"Title {i} ü", "tags": ["a", "b"], "size": i * 7} for i in range(520)]
    original = json.dumps(items, indent=2, ensure_ascii=False)
    assert len(original.encode()) > 50_000
    (root / "big.json").write_text(original)
    config = write_config(tmp_path, "json", servers)
    async with connect("stdio", config) as client:
        path = json.dumps(str(root / "big.json"))
        # read_text_file answers {content: "<text>"}; the code parses the text to get the array.
        result = await chain(client, f"const file = await filesystem.read_text_file({{path: {path}}});\nreturn JSON.parse(file.content);")
        data = structured(result)
        assert data["shaped"] and "json_summary" in data["output"]["stages"], data["output"]
        # The budget (20,000 characters) is filled with whole rows; the rest is named, bounded.
        assert 12_000 < data["output"]["returned_bytes"] and data["output"]["shown_chars"] <= 20_000 + 100, data["output"]
        text = text_of(result)
        assert '"count": 520' in text and '"rest_by_id"' in text, text[:2000]
        assert text.count('"title":') > 50, text[:2000]
        assert "[Output: " in text and "processed" in text
        uri = data["output"]["resource"]
        assert uri == f"sandgate://executions/{data['execution_id']}/output"

        whole = await client.read_resource(uri)
        assert whole.contents[0].text == original

        assert "".join(await read_output_whole(client, data["execution_id"], length=7001)) == original

        picked = structured(await client.call_tool("read_output", {"execution_id": data["execution_id"], "json_path": "$[517].title"}))
        assert picked["text"] == "Title 517 ü"
        bad = await client.call_tool("read_output", {"execution_id": data["execution_id"], "json_path": "$[9999]"})
        assert bad.is_error and "520 items" in text_of(bad)
        missing = await client.call_tool("read_output", {"execution_id": "ex-nope"})
        assert missing.is_error and "no stored output" in text_of(missing)


async def test_intent_keeps_the_paragraphs_about_it(tmp_path):
    servers, root = servers_with_files(tmp_path)
    filler = [f"Paragraph {i} is about gardening, tomatoes and the weather in spring." for i in range(80)]
    filler.insert(40, "The kubernetes deployment failed because the image pull secret expired.")
    (root / "notes.txt").write_text("\n\n".join(filler))
    config = write_config(tmp_path, "toml", servers)
    async with connect("stdio", config) as client:
        code = f"return (await filesystem.read_text_file({{path: {json.dumps(str(root / 'notes.txt'))}}})).content"
        focused = structured(await chain(client, code, intent="why did the kubernetes deployment fail"))
        assert "intent" in focused["output"]["stages"], focused["output"]
        shown = text_of(await chain(client, code, intent="why did the kubernetes deployment fail"))
        assert "image pull secret" in shown
        assert "tomatoes" not in shown.split("[Output")[0]
        unmatched = structured(await chain(client, code, intent="quantum chromodynamics"))
        assert "intent" not in unmatched["output"]["stages"]


async def test_utf8_survives_every_cut_point(tmp_path):
    servers, root = servers_with_files(tmp_path)
    line = "aé漢😀" * 200
    (root / "wide.txt").write_text(line + "\n" + "\n".join(f"{i}: ü😀" for i in range(200)))
    config = write_config(tmp_path, "toml", servers)
    async with connect("stdio", config) as client:
        code = f"return (await filesystem.read_text_file({{path: {json.dumps(str(root / 'wide.txt'))}}})).content"
        full = (root / "wide.txt").read_text()
        for size in range(200, 232):
            result = await chain(client, code, max_output_size=size)
            data = structured(result)
            shown = shown_result(result)
            assert "\ufffd" not in shown
            head, rest = shown.split("... [", 1)
            tail = rest.split("] ...", 1)[1].split("\n[Output:")[0]
            assert full.startswith(head), (size, head[-20:])
            assert full.endswith(tail.lstrip("\n")), (size, tail[:20])
            assert data["shaped"] and "truncate" in data["output"]["stages"]


async def test_a_timeout_reports_what_completed_and_what_changed_state(tmp_path):
    servers, _ = servers_with_files(tmp_path)
    config = write_config(tmp_path, "toml", servers)
    async with connect("stdio", config) as client:
        code = (
            "await memory.create_entities({entities: [{name: 'e2e-timeout', entityType: 'test', observations: []}]});\n"
            "await everything.echo({message: 'before'});\n"
            "console.log('about to spin');\n"
            "while (true) {}\n"
        )
        result = await chain(client, code, timeout_ms=1500)
        assert result.is_error
        data = result.structured_content
        assert data["error"]["kind"] == "timeout", data["error"]
        assert [c["tool"] for c in data["calls"]] == ["memory.create_entities", "everything.echo"]
        assert all(c["finished"] and c["ok"] for c in data["calls"])
        assert [c["changed_state"] for c in data["calls"]] == [True, False]
        assert data["logs"] == [{"level": "log", "message": "about to spin"}]
        text = text_of(result)
        assert "Stopped" in text and "after 2 completed call(s)" in text
        assert "may have changed state" in text and "memory.create_entities" in text.split("may have changed state")[1]
        # The loop's timeout names its limit, as other timeouts do (it read "timeout:
        # interrupted").
        assert "ran out of time (1500 ms)" in data["error"]["message"], data["error"]

        # A call that failed is not counted as completed.
        failed = await chain(client, "await everything.echo({message: 'a'});\nawait everything.get_sum({a: 'x'});\nreturn 1;")
        assert failed.is_error, text_of(failed)
        assert "after 1 completed call(s) and 1 failed call(s)" in text_of(failed), text_of(failed)

        slow = await chain(client, "await everything.echo({message: 'a'});\nreturn await everything.trigger_long_running_operation({duration: 10, steps: 2});", timeout_ms=1000)
        data = slow.structured_content
        assert data["error"]["kind"] == "timeout"
        assert [(c["tool"], c["finished"]) for c in data["calls"]] == [("everything.echo", True), ("everything.trigger-long-running-operation", False)]
        assert "still running and abandoned: everything.trigger-long-running-operation" in text_of(slow)

        fast_tier = await chain(client, '{"tool": "everything.trigger-long-running-operation", "arguments": {"duration": 10, "steps": 2}}', timeout_ms=800)
        assert fast_tier.structured_content["tier"] == "json"
        assert fast_tier.structured_content["error"]["kind"] == "timeout"


async def test_progress_notifications_arrive_as_calls_complete(tmp_path):
    servers, _ = servers_with_files(tmp_path)
    config = write_config(tmp_path, "toml", servers)
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, message))

    async with connect("stdio", config) as client:
        code = "for (const m of ['a', 'b', 'c']) await everything.echo({message: m});\nreturn 'done';"
        result = await client.call_tool("call_tool_chain", {"code": code}, progress_callback=on_progress)
        assert structured(result)["result"] == "done"
    assert [p for p, _ in seen] == [1, 2, 3], seen
    assert all("everything.echo finished" in m for _, m in seen), seen


async def test_executions_are_recorded_in_stats(tmp_path):
    servers, _ = servers_with_files(tmp_path)
    config = write_config(tmp_path, "toml", servers)
    async with connect("stdio", config) as client:
        await chain(client, '{"tool": "everything.echo", "arguments": {"message": "s"}}')
        await chain(client, "return await everything.echo({message: 's'})")
        await chain(client, "return [await everything.echo({message: 's'})]")
        await chain(client, "throw new Error('boom')")
        stats = json.loads((await client.read_resource("sandgate://stats")).contents[0].text)
        tiers = {t["tier"]: t for t in stats["executions"]["tiers"]}
        assert tiers["json"]["count"] == 1 and tiers["single_call"]["count"] == 1
        assert tiers["sandbox"]["count"] == 2 and tiers["sandbox"]["errors"] == 1
        assert tiers["sandbox"]["p95_ms"] >= tiers["sandbox"]["p50_ms"] > 0
        everything = next(b for b in stats["executions"]["backends"] if b["backend"] == "everything")
        assert everything["calls"] == 3
    # The CLI reads the same records from the store file, with the gateway gone.
    listed = json.loads(subprocess.run([SANDGATE, "executions", "list", "--json", "--config", str(config)], check=True, capture_output=True, text=True).stdout)
    assert [r["tier"] for r in listed] == ["sandbox", "sandbox", "single_call", "json"]
    assert listed[0]["error_kind"] == "runtime"
    shown = subprocess.run([SANDGATE, "executions", "show", listed[2]["id"], "--config", str(config)], check=True, capture_output=True, text=True).stdout
    assert "tier       single_call" in shown and "everything.echo  ok" in shown and "read-only" in shown, shown
    missing = subprocess.run([SANDGATE, "executions", "show", "ex-nope", "--config", str(config)], capture_output=True, text=True)
    assert missing.returncode != 0 and "no execution id starts with `ex-nope`" in missing.stderr, missing.stderr
