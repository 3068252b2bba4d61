"""The scripted fake LLM the real-agent tests run against (127.0.0.1 only)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.realagents import fake_llm
from tests.realagents.fake_llm import Directive, FakeLLMServer, fill_arguments, next_reply, plan_arguments

BASH_SCHEMA = {
    "type": "object",
    "properties": {
        "command": {"type": "string"},
        "timeout": {"type": "number", "maximum": 600000},
        "description": {"type": "string"},
    },
    "required": ["command", "timeout"],
}
WRITE_SCHEMA = {
    "type": "object",
    "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["file_path", "content"],
}


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLMServer]:
    server = FakeLLMServer().start()
    yield server
    server.stop()


def test_directive_parsing() -> None:
    found = Directive.find("x [scenario:think,plan,write dir=/w/d] y")
    assert found == Directive(["plan", "write"], True, "/w/d")
    assert Directive.find("[scenario:text] then [scenario:shell]") == Directive(["shell"], False, None)
    assert Directive.find("no directive") is None


def test_arguments_follow_the_offered_schema() -> None:
    args = fill_arguments(BASH_SCHEMA, {"command": "echo hi"})
    assert args == {"command": "echo hi", "timeout": 60000, "description": "Run a scripted command"}
    array_schema = {"properties": {"command": {"type": "array"}}, "required": ["command"]}
    assert fill_arguments(array_schema, {"command": "ls"}) == {"command": ["bash", "-lc", "ls"]}
    todos = {
        "properties": {
            "todos": {
                "type": "array",
                "items": {
                    "properties": {
                        "content": {"type": "string"},
                        "status": {"enum": ["pending", "in_progress", "completed"]},
                        "activeForm": {"type": "string"},
                    },
                    "required": ["content", "status", "activeForm"],
                },
            }
        },
        "required": ["todos"],
    }
    entries = plan_arguments(todos)["todos"]
    assert entries[0] == {"content": "Write the file", "status": "in_progress", "activeForm": "Writing the file"}


def test_one_tool_call_per_step_then_the_final_text() -> None:
    directive = Directive(["write", "shell"], False, "/w")
    tools = {"Write": WRITE_SCHEMA, "Bash": BASH_SCHEMA}
    first = next_reply(directive, 0, tools)
    assert first.call is not None and first.call.name == "Write"
    assert first.call.arguments == {"file_path": "/w/hello.txt", "content": fake_llm.FILE_TEXT}
    second = next_reply(directive, 1, tools)
    assert second.call is not None and second.call.arguments["command"] == fake_llm.SHELL_COMMAND
    final = next_reply(directive, 2, tools)
    assert final.call is None and fake_llm.FINAL_MARK in final.text
    # No tools offered (a side call): plain text, never a loop.
    assert next_reply(directive, 0, {}).call is None


def anthropic_stream(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


def test_anthropic_streaming_round_trip(llm: FakeLLMServer) -> None:
    prompt = {"role": "user", "content": [{"type": "text", "text": "[scenario:think,write dir=/w] go"}]}
    body: dict[str, Any] = {
        "model": "m",
        "stream": True,
        "messages": [prompt],
        "tools": [{"name": "Write", "input_schema": WRITE_SCHEMA}],
    }
    first = anthropic_stream(httpx.post(llm.base_url + "/v1/messages?beta=true", json=body, timeout=10))
    assert first[0]["type"] == "message_start" and first[-1]["type"] == "message_stop"
    kinds = [e["content_block"]["type"] for e in first if e["type"] == "content_block_start"]
    assert kinds == ["thinking", "text", "tool_use"]
    partial = "".join(e["delta"].get("partial_json", "") for e in first if e["type"] == "content_block_delta")
    assert json.loads(partial)["file_path"] == "/w/hello.txt"
    assert next(e for e in first if e["type"] == "message_delta")["delta"]["stop_reason"] == "tool_use"
    call_id = next(e for e in first if e["type"] == "content_block_start" and e["index"] == 2)["content_block"]["id"]
    body["messages"] += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": "Write", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "ok"}]},
    ]
    second = anthropic_stream(httpx.post(llm.base_url + "/v1/messages", json=body, timeout=10))
    text = "".join(e["delta"].get("text", "") for e in second if e["type"] == "content_block_delta")
    assert text.endswith(fake_llm.FINAL_MARK)
    assert [r["reply"] for r in llm.log.entries[-2:]] == ["write", "final"]


def test_gemini_round_trip(llm: FakeLLMServer) -> None:
    decl = {"name": "run_shell_command", "parametersJsonSchema": {"properties": {"command": {"type": "string"}}}}
    body = {
        "contents": [{"role": "user", "parts": [{"text": "[scenario:shell]"}]}],
        "tools": [{"functionDeclarations": [decl]}],
    }
    url = llm.base_url + "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    chunks = [
        json.loads(line[5:])
        for line in httpx.post(url, json=body, timeout=10).text.splitlines()
        if line.startswith("data:")
    ]
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    call = next(p["functionCall"] for p in parts if "functionCall" in p)
    assert call == {"name": "run_shell_command", "args": {"command": fake_llm.SHELL_COMMAND}}
    side = {
        "contents": body["contents"],
        "generationConfig": {
            "responseJsonSchema": {"type": "object", "properties": {"next_speaker": {"enum": ["model", "user"]}}}
        },
    }
    answer = httpx.post(llm.base_url + "/v1beta/models/m:generateContent", json=side, timeout=10).json()
    assert json.loads(answer["candidates"][0]["content"]["parts"][0]["text"]) == {"next_speaker": "user"}


def test_the_request_log_keeps_the_user_messages_of_each_api() -> None:
    """What the real-agent restart test reads: the conversation each request carries."""
    user = fake_llm.user_texts
    messages = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "two"}]},
    ]
    assert user("anthropic", {"messages": messages}) == ["one", "two"]
    assert user("chat", {"messages": messages}) == ["one", "two"]
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "one"}]},
        {"type": "function_call", "name": "shell", "arguments": "{}"},
        {"role": "user", "content": "two"},
    ]
    assert user("responses", {"input": items}) == ["one", "two"]
    contents = [{"role": "user", "parts": [{"text": "one"}]}, {"role": "model", "parts": [{"text": "ok"}]}]
    assert user("gemini", {"contents": contents}) == ["one"]


def test_codex_code_mode_gets_javascript_for_the_nested_tool(llm: FakeLLMServer) -> None:
    """codex 0.166's default model: no top-level tools, one custom `exec` in an `additional_tools` item
    whose description declares the nested tools; each step is an `exec` call running one of them."""
    description = "Run JavaScript.\n\n### `apply_patch`\nEdits files.\n\n### `exec_command`\nRuns a command.\n"
    exec_tool = {"type": "custom", "name": "exec", "description": description, "format": {"type": "grammar"}}
    tools_item = {
        "type": "additional_tools",
        "role": "developer",
        "tools": [{"type": "namespace", "name": "functions", "tools": [exec_tool]}],
    }
    user = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "[scenario:write,shell dir=/w]"}],
    }
    body: dict[str, Any] = {"model": "gpt-6.1-sol", "stream": True, "input": [tools_item, user]}
    calls = []
    for _ in range(2):
        events = [
            json.loads(line[5:])
            for line in httpx.post(llm.base_url + "/v1/responses", json=body, timeout=10).text.splitlines()
            if line.startswith("data:")
        ]
        call = next(e["item"] for e in events if e["type"] == "response.output_item.done" and "call_id" in e["item"])
        calls.append(call)
        body["input"] += [call, {"type": "custom_tool_call_output", "call_id": call["call_id"], "output": "ok"}]
    assert [c["type"] for c in calls] == ["custom_tool_call", "custom_tool_call"] and {c["name"] for c in calls} == {
        "exec"
    }
    assert (
        calls[0]["input"].startswith("const result = await tools.apply_patch(")
        and "*** Add File: /w/hello.txt" in calls[0]["input"]
    )
    assert f'tools.exec_command({{"cmd": "{fake_llm.SHELL_COMMAND}"}})' in calls[1]["input"]
    logged = llm.log.entries[-2:]
    assert [e["reply"] for e in logged] == ["write", "shell"] and "exec_command" in logged[0]["tools"]
