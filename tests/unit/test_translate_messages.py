"""Message chunks and v2 message upserts -> message items."""

from __future__ import annotations

import json
from typing import Any

from app.events.envelope import dumps
from app.events.model import raw_json_text
from app.translate.session_translator import SessionTranslator
from tests.unit.translate_support import end_turn, feed, items, notification, text_chunk, types


def test_chunks_stream_into_one_item_with_a_delta_each() -> None:
    t = SessionTranslator()
    out = feed(t, text_chunk("Hel", "m1"), text_chunk("lo", "m1"))
    assert types(out) == ["item.started", "item.delta", "item.delta"]
    started = out[0].data["item"]
    assert started["kind"] == "message" and started["role"] == "assistant" and started["status"] == "in_progress"
    assert started["native_item_id"] == "m1" and started["content"] == [{"type": "text", "text": "Hel"}]
    assert [d.data["delta"] for d in out[1:]] == ["Hel", "lo"]
    assert all(d.raw["params"]["update"]["sessionUpdate"] == "agent_message_chunk" for d in out)
    done = end_turn(t)
    assert types(done) == ["item.completed", "turn.ended"]
    assert done[0].data["item"]["content"] == [{"type": "text", "text": "Hello"}]
    assert len(done[0].raw) == 2  # the completed item came from both chunks


def test_many_small_chunks_join_in_order() -> None:
    t = SessionTranslator()
    feed(t, *(text_chunk(str(i % 10), "m") for i in range(5000)))
    text = items(end_turn(t))[0]["content"][0]["text"]
    assert text == "".join(str(i % 10) for i in range(5000))


def test_thoughts_are_reasoning_and_private_ones_give_no_delta() -> None:
    t = SessionTranslator()
    private = {
        "sessionUpdate": "agent_thought_chunk",
        "messageId": "r",
        "content": {"type": "text", "text": "secret", "_meta": {"sandbox-agent/reasoningVisibility": "private"}},
    }
    out = feed(t, text_chunk("think", "r", kind="agent_thought_chunk"), private)
    assert [d.data["delta"] for d in out if d.type == "item.delta"] == ["think"]
    content = items(end_turn(t))[0]["content"]
    assert content == [
        {"type": "reasoning", "text": "think", "visibility": "public"},
        {"type": "reasoning", "text": "secret", "visibility": "private"},
    ]


def test_visibility_on_the_update_meta_is_honoured_too() -> None:
    t = SessionTranslator()
    feed(t, text_chunk("x", kind="agent_thought_chunk", _meta={"sandbox-agent/reasoningVisibility": "private"}))
    assert items(end_turn(t))[0]["content"] == [{"type": "reasoning", "text": "x", "visibility": "private"}]


def test_text_and_thought_chunks_sharing_a_message_id_are_one_item() -> None:
    t = SessionTranslator()
    feed(t, text_chunk("a", "m"), text_chunk("b", "m", kind="agent_thought_chunk"), text_chunk("c", "m"))
    done = items(end_turn(t))
    assert len(done) == 1
    assert [p["type"] for p in done[0]["content"]] == ["text", "reasoning", "text"]


def test_without_message_ids_a_new_update_kind_starts_a_new_item() -> None:
    t = SessionTranslator()
    out = feed(t, text_chunk("th", kind="agent_thought_chunk"), text_chunk("a"), text_chunk("b"))
    out += end_turn(t)
    done = items(out)
    assert [d["content"][0]["type"] for d in done] == ["reasoning", "text"]
    assert done[1]["content"][0]["text"] == "ab"
    assert done[0]["native_item_id"] is None and done[0]["item_id"] != done[1]["item_id"]


def test_a_new_message_id_completes_the_previous_item() -> None:
    t = SessionTranslator()
    out = feed(t, text_chunk("one", "m1"), text_chunk("two", "m2"))
    assert types(out) == ["item.started", "item.delta", "item.completed", "item.started", "item.delta"]
    assert out[2].data["item"]["native_item_id"] == "m1"


def test_a_message_continued_after_another_item_is_a_new_segment() -> None:
    t = SessionTranslator()
    out = feed(
        t,
        text_chunk("before ", "m1"),
        {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "ls", "status": "completed"},
        text_chunk("after", "m1"),
    )
    out += end_turn(t)
    messages = [i for i in items(out) if i["kind"] == "message"]
    assert [m["native_item_id"] for m in messages] == ["m1", "m1#2"]
    assert messages[0]["item_id"] != messages[1]["item_id"]
    kinds = [(d.type, d.data["item"]["kind"]) for d in out if "item" in d.data]
    assert kinds[:2] == [("item.started", "message"), ("item.completed", "message")]  # text done before the tool


def test_incoming_meta_ids_kind_and_parent_are_honoured() -> None:
    t = SessionTranslator()
    meta = {
        "sandbox-agent/itemId": "itm_custom",
        "sandbox-agent/parentId": "native-parent",
        "sandbox-agent/itemKind": "system",
    }
    out = feed(t, text_chunk("System ready.", "sys", _meta=meta))
    item = out[0].data["item"]
    assert item["item_id"] == "itm_custom" and item["kind"] == "system" and item["role"] == "system"
    assert item["parent_id"].startswith("itm_") and item["parent_id"] != "itm_custom"
    assert types(out) == ["item.started"]  # no deltas for non-message kinds (legacy)
    done = end_turn(t)
    assert types(done) == ["item.completed", "turn.ended"]  # and no synthetic delta either


def test_status_meta_makes_a_status_item_that_updates_its_part() -> None:
    t = SessionTranslator()
    out = feed(
        t,
        text_chunk("", "st", _meta={"sandbox-agent/status": {"label": "Indexing", "detail": "2 files"}}),
        text_chunk("", "st", _meta={"sandbox-agent/status": {"label": "Indexing", "detail": "Done"}}),
    )
    assert types(out) == ["item.started"]
    assert out[0].data["item"]["kind"] == "status"
    assert out[0].data["item"]["content"] == [{"type": "status", "label": "Indexing", "detail": "2 files"}]
    done = items(end_turn(t))[0]
    assert done["content"] == [{"type": "status", "label": "Indexing", "detail": "Done"}]


def test_item_status_meta_completes_the_item_at_once() -> None:
    t = SessionTranslator()
    out = feed(t, text_chunk("oops", "m", _meta={"sandbox-agent/status": "failed"}))
    assert types(out) == ["item.started", "item.delta", "item.completed"]
    assert out[-1].data["item"]["status"] == "failed"
    assert types(end_turn(t)) == ["turn.ended"]


def test_non_text_blocks_become_their_parts() -> None:
    t = SessionTranslator()
    blocks = [
        {"type": "image", "mimeType": "image/png", "data": "AAAA", "uri": "file:///tmp/a%20b.png"},
        {"type": "resource_link", "uri": "file:///tmp/readme.md", "name": "readme.md"},
        {"type": "resource", "resource": {"uri": "x:1", "mimeType": "application/json", "text": '{"ok":true}'}},
        {"type": "resource", "resource": {"uri": "x:2", "text": "plain"}},
        {"type": "brand_new_block", "value": 1},
    ]
    feed(t, *({"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": b} for b in blocks))
    assert items(end_turn(t))[0]["content"] == [
        {"type": "image", "path": "/tmp/a b.png", "mime": "image/png"},
        {"type": "file_ref", "path": "/tmp/readme.md", "action": "read", "diff": None},
        {"type": "json", "json": {"ok": True}},
        {"type": "text", "text": "plain"},
        {"type": "json", "json": {"type": "brand_new_block", "value": 1}},
    ]


def test_user_chunks_make_user_items_without_synthetic_deltas() -> None:
    t = SessionTranslator()
    out = feed(t, text_chunk("replayed prompt", "u1", kind="user_message_chunk")) + end_turn(t)
    assert types(out) == ["item.started", "item.delta", "item.completed", "turn.ended"]
    assert out[0].data["item"]["role"] == "user"


def test_invalid_chunks_are_unparsed_and_the_stream_goes_on() -> None:
    t = SessionTranslator()
    bad: list[dict[str, Any]] = [
        {"sessionUpdate": "agent_message_chunk"},
        {"sessionUpdate": "agent_message_chunk", "content": "text"},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text"}},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "image", "uri": "x"}},
        {"sessionUpdate": "agent_message_chunk", "content": {"text": "no type"}},
    ]
    out = feed(t, text_chunk("a", "m"), *bad, text_chunk("b", "m"))
    unparsed = [d for d in out if d.type == "agent.unparsed"]
    assert len(unparsed) == len(bad)
    assert all(d.data["location"] == "session/update" and d.data["raw_hash"].startswith("sha256:") for d in unparsed)
    assert all(d.raw["params"]["update"] in bad for d in unparsed)
    assert items(end_turn(t))[0]["content"] == [{"type": "text", "text": "ab"}]


def test_v2_message_upsert_replaces_the_streamed_content() -> None:
    t = SessionTranslator()
    out = feed(
        t,
        text_chunk("draft", "m"),
        {"sessionUpdate": "agent_message", "messageId": "m", "content": [{"type": "text", "text": "Final."}]},
    )
    assert types(out) == ["item.started", "item.delta"]
    assert items(end_turn(t))[0]["content"] == [{"type": "text", "text": "Final."}]


def test_v2_upsert_alone_gets_the_synthetic_delta() -> None:
    t = SessionTranslator()
    out = feed(t, {"sessionUpdate": "agent_thought", "messageId": "th", "content": [{"type": "text", "text": "hm"}]})
    out += end_turn(t)
    assert types(out) == ["item.started", "item.completed", "turn.ended"]  # reasoning only: no text to delta
    assert out[1].data["item"]["content"] == [{"type": "reasoning", "text": "hm", "visibility": "public"}]
    t2 = SessionTranslator()
    out = feed(t2, {"sessionUpdate": "agent_message", "messageId": "a", "content": [{"type": "text", "text": "Hi"}]})
    out += end_turn(t2)
    assert types(out) == ["item.started", "item.delta", "item.completed", "turn.ended"]
    assert out[1].synthetic is True


def test_v2_user_message_echo_of_the_prompt_is_not_shown_twice() -> None:
    t = SessionTranslator()
    start = t.turn_started("turn_1", "Do it", [], raw=None)
    assert [d.data["item"]["role"] for d in start if d.type == "item.completed"] == ["user"]
    echo = {"sessionUpdate": "user_message", "messageId": "u", "content": [{"type": "text", "text": "Do it"}]}
    assert feed(t, echo) == []
    other = {"sessionUpdate": "user_message", "messageId": "u2", "content": [{"type": "text", "text": "Other"}]}
    assert items(feed(t, other) + end_turn(t))[0]["role"] == "user"


def test_v2_upsert_without_message_id_is_unparsed() -> None:
    t = SessionTranslator()
    out = feed(t, {"sessionUpdate": "agent_message", "content": [{"type": "text", "text": "x"}]})
    assert types(out) == ["agent.unparsed"]
    assert "messageId" in out[0].data["error"]


def test_compaction_summary_streams_into_a_system_item() -> None:
    t = SessionTranslator()
    out = feed(
        t,
        {"sessionUpdate": "compaction_summary_chunk", "content": {"type": "text", "text": "Earlier, "}},
        {"sessionUpdate": "compaction_summary_chunk", "content": {"type": "text", "text": "we did X."}},
    )
    out += end_turn(t)
    done = items(out)[0]
    assert done["kind"] == "system" and done["role"] == "system"
    assert done["content"] == [{"type": "text", "text": "Earlier, we did X."}]


def test_every_event_carries_its_acp_message() -> None:
    t = SessionTranslator()
    message = notification(text_chunk("x", "m"))
    out = t.session_update(message["params"], message)
    assert all(d.raw is message for d in out)


class _Wire(dict):  # type: ignore[type-arg]
    """A message as the connection hands it over: parsed, with the text it arrived as."""

    __slots__ = ("json_text",)
    json_text: str


def _wire(message: dict) -> _Wire:  # type: ignore[type-arg]
    wire = _Wire(message)
    wire.json_text = json.dumps(message, separators=(",", ":"))
    return wire


def test_an_open_message_keeps_its_chunks_as_their_json_text() -> None:
    """A long streamed message holds texts, not parsed messages, until it completes."""
    t = SessionTranslator()
    chunks = [_wire(notification(text_chunk(f"part {i}", "m"))) for i in range(3)]
    for message in chunks:
        t.session_update(message["params"], message)
    assert t.messages.open is not None and t.messages.open.raw == [c.json_text for c in chunks]
    done = end_turn(t)[0]
    assert raw_json_text(done.raw) == "[" + ",".join(c.json_text for c in chunks) + "]"
    single = SessionTranslator()
    only = _wire(notification(text_chunk("only", "m2")))
    single.session_update(only["params"], only)
    assert raw_json_text(end_turn(single)[0].raw) == only.json_text


def test_a_delta_is_written_as_the_encoder_writes_it() -> None:
    t = SessionTranslator()
    texts = ["plain", 'quote " and \\ backslash', "é ü 漢字 😀", "line\nbreak\ttab\r\x00\x1f", "\u2028\u2029"]
    out = feed(t, *(text_chunk(text, 'id "q" é') for text in texts), text_chunk("other", None))
    deltas = [d for d in out if d.type == "item.delta"]
    assert len(deltas) == len(texts) + 1
    for draft in deltas:
        assert draft.data_json == dumps(draft.data)


def test_a_whole_message_can_mix_text_and_marked_reasoning() -> None:
    t = SessionTranslator()
    thought = {"type": "text", "text": "why", "_meta": {"sandbox-agent/reasoningVisibility": "private"}}
    update = {
        "sessionUpdate": "agent_message",
        "messageId": "w1",
        "content": [{"type": "text", "text": "answer"}, thought],
        "_meta": {"sandbox-agent/status": "completed"},
    }
    out = feed(t, update)
    assert [d.type for d in out] == ["item.started", "item.delta", "item.completed"]
    assert out[2].data["item"]["content"] == [
        {"type": "text", "text": "answer"},
        {"type": "reasoning", "text": "why", "visibility": "private"},
    ]
    assert out[1].synthetic is True and out[1].data["delta"] == "answer"


# ---- lone surrogates (an emoji cut in two by the agent) ------------------------------------------
def test_an_emoji_split_across_two_chunks_shows_whole() -> None:
    t = SessionTranslator()
    out = feed(t, text_chunk("hi \ud83d", "m"), text_chunk("\ude00 there", "m"))
    deltas = [d.data["delta"] for d in out if d.type == "item.delta"]
    assert deltas == ["hi ", "\U0001f600 there"]
    assert out[0].data["item"]["content"] == [{"type": "text", "text": "hi "}]
    assert items(end_turn(t))[0]["content"] == [{"type": "text", "text": "hi \U0001f600 there"}]
    for draft in out:
        dumps(draft.data).encode()  # every event can be written as UTF-8


def test_other_lone_surrogates_become_the_replacement_character() -> None:
    t = SessionTranslator()
    out = feed(t, text_chunk("a\udc00b", "m"), text_chunk("c\ud800", "m"), text_chunk("d", "m"))
    out += feed(t, text_chunk("e\ud83d", "n"))
    done = end_turn(t)
    deltas = [d.data["delta"] for d in out if d.type == "item.delta"]
    assert deltas == ["a\ufffdb", "c", "\ufffdd", "e"]
    assert [i["content"][0]["text"] for i in items(out + done)] == ["a\ufffdbc\ufffdd", "e\ufffd"]


def test_lone_surrogates_elsewhere_in_an_update_are_replaced() -> None:
    t = SessionTranslator()
    tool = {
        "sessionUpdate": "tool_call",
        "toolCallId": "c\ud800",
        "title": "run \udfff",
        "kind": "execute",
        "status": "completed",
        "rawInput": {"command": "echo \ud83d"},
        "content": [{"type": "content", "content": {"type": "text", "text": "out \ud800"}}],
    }
    out = feed(t, tool, {"sessionUpdate": "session_info_update", "title": "T\ud800"})
    for draft in out:
        dumps(draft.data).encode()
    assert t.state.title == "T\ufffd"
