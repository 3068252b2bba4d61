"""Diffs that apply: made from the agent's exact record of a change (claude's toolResponse), else
from the file the change is found in (read by the session layer), else from whole-file texts; a diff
the bridge cannot make exact is left out. Checked with ``git apply`` and ``patch``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.translate import diffs
from app.translate.diffs import apply_hunks, located, vendor_change
from app.translate.session_translator import SessionTranslator
from app.translate.tools import ToolStyle
from tests.golden.harness import PROJECT_TRANSCRIPTS, replay_transcript
from tests.realagents.diffcheck import check_events

FILE = "".join(f"line {i}\n" for i in range(1, 11))
EDITED = FILE.replace("line 5\n", "line five\n")
CLAUDE = ToolStyle(whole_file_diffs=False)


def events(drafts: list[Any]) -> list[dict[str, Any]]:
    return [{"type": d.type, "data": d.data} for d in drafts]


def refs(drafts: list[Any]) -> list[dict[str, Any]]:
    return [
        p
        for e in events(drafts)
        if e["type"] == "item.completed" and e["data"]["item"]["kind"] == "tool_result"
        for p in e["data"]["item"]["content"]
        if p["type"] == "file_ref"
    ]


# ---- finding the change in the file -------------------------------------------------------------
def test_a_snippet_is_found_in_the_file_after_the_change() -> None:
    # claude trims its strings: the file's newline stays where it was.
    assert located("line 5", "line five", EDITED, changed=True) == (FILE, EDITED)
    # ...and before it (a change not made, or not yet).
    assert located("line 5", "line five", FILE, changed=False) == (FILE, EDITED)


def test_whole_files_are_found_as_they_are() -> None:
    assert located(FILE, EDITED, EDITED, changed=True) == (FILE, EDITED)
    assert located("", FILE, FILE, changed=True) == (None, FILE)  # created
    assert located("", FILE, None, changed=False) == (None, FILE)  # not created yet
    assert located(None or "", "", "", changed=True) == (None, "")


def test_a_change_that_is_not_there_once_gives_nothing() -> None:
    assert located("line 5", "line five", FILE, changed=True) is None  # not made (or made over)
    assert located("line", "row", FILE, changed=False) is None  # ten places: which one?
    assert located("x", "y", None, changed=True) is None  # the file is gone
    assert located("", "text", "other text", changed=False) is None


def test_overlapping_places_count_as_two() -> None:
    assert located("aa", "b", "aaa", changed=False) is None


# ---- the agent's own record ----------------------------------------------------------------------
def test_structured_patch_hunks_apply_with_their_line_numbers() -> None:
    hunks = [
        {
            "oldStart": 2,
            "oldLines": 7,
            "newStart": 2,
            "newLines": 7,
            "lines": [" line 2", " line 3", " line 4", "-line 5", "+line five", " line 6", " line 7", " line 8"],
        }
    ]
    assert apply_hunks(FILE, hunks) == EDITED
    wrong = [dict(hunks[0], oldStart=3)]
    assert apply_hunks(FILE, wrong) is None  # the context does not fit there


def test_structured_patch_keeps_missing_final_newlines() -> None:
    hunks = [
        {
            "oldStart": 1,
            "oldLines": 2,
            "newStart": 1,
            "newLines": 2,
            "lines": [" a", "-b", "\\ No newline at end of file", "+c", "\\ No newline at end of file"],
        }
    ]
    assert apply_hunks("a\nb", hunks) == "a\nc"
    assert apply_hunks("a\nb\n", hunks) is None


def test_claude_tool_responses_are_whole_files() -> None:
    edit = {
        "claudeCode": {
            "toolName": "Edit",
            "toolResponse": {
                "filePath": "/w/f.txt",
                "oldString": "line 5",
                "newString": "line five",
                "originalFile": FILE,
                "structuredPatch": [
                    {
                        "oldStart": 4,
                        "oldLines": 3,
                        "newStart": 4,
                        "newLines": 3,
                        "lines": [" line 4", "-line 5", "+line five", " line 6"],
                    }
                ],
            },
        }
    }
    assert vendor_change(edit) == ("/w/f.txt", (FILE, EDITED))
    create: dict[str, Any] = {
        "claudeCode": {
            "toolResponse": {
                "type": "create",
                "filePath": "/w/n.txt",
                "content": "x\n",
                "structuredPatch": [],
                "originalFile": None,
            }
        }
    }
    assert vendor_change(create) == ("/w/n.txt", (None, "x\n"))
    broken = json.loads(json.dumps(edit))
    broken["claudeCode"]["toolResponse"]["originalFile"] = "something else\n"
    assert vendor_change(broken) is None
    assert vendor_change({"claudeCode": {"toolName": "Edit"}}) is None


# ---- through the translator ----------------------------------------------------------------------
def edit_updates(old: str, new: str, meta: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    diff = {"type": "diff", "path": "/w/f.txt", "oldText": old, "newText": new}
    done: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}
    if meta is not None:
        done["_meta"] = meta
    return [
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "Edit",
            "kind": "edit",
            "status": "pending",
            "content": [diff],
        },
        done,
    ]


def translate(t: SessionTranslator, updates: list[dict[str, Any]], file: str | None = None) -> list[Any]:
    out: list[Any] = []
    for update in updates:
        params = {"sessionId": "s", "update": update}
        wanted = t.files_wanted(params)
        if wanted and file is not None:
            t.supply_files(params, dict.fromkeys(wanted, file))
        out += t.session_update(params, {"jsonrpc": "2.0", "method": "session/update", "params": params})
    return out


def test_a_snippet_diff_is_exact_with_the_file_and_left_out_without_it() -> None:
    t = SessionTranslator(tool_style=CLAUDE)
    assert t.files_wanted({"update": edit_updates("line 5", "line five")[1]}) == []  # nothing shown yet
    translate(t, edit_updates("line 5", "line five")[:1])
    assert t.files_wanted({"update": edit_updates("line 5", "line five")[1]}) == ["/w/f.txt"]
    [ref] = refs(translate(t, edit_updates("line 5", "line five")[1:], EDITED))
    assert ref["action"] == "patch"
    assert ref["diff"] == diffs.unified_diff("/w/f.txt", FILE, EDITED)
    assert "@@ -2,7 +2,7 @@" in ref["diff"]
    [ref] = refs(translate(SessionTranslator(tool_style=CLAUDE), edit_updates("line 5", "line five")))
    assert ref == {"type": "file_ref", "path": "/w/f.txt", "action": "patch", "diff": None}


def test_a_file_changed_again_gives_no_diff_rather_than_a_wrong_one() -> None:
    [ref] = refs(translate(SessionTranslator(tool_style=CLAUDE), edit_updates("line 5", "line five"), FILE))
    assert ref["diff"] is None


def test_the_agents_record_needs_no_file() -> None:
    meta = {
        "claudeCode": {
            "toolResponse": {
                "filePath": "/w/f.txt",
                "originalFile": FILE,
                "structuredPatch": [
                    {
                        "oldStart": 4,
                        "oldLines": 3,
                        "newStart": 4,
                        "newLines": 3,
                        "lines": [" line 4", "-line 5", "+line five", " line 6"],
                    }
                ],
            }
        }
    }
    t = SessionTranslator(tool_style=CLAUDE)
    updates = edit_updates("line 4\nline 5\nline 6", "line 4\nline five\nline 6", meta)
    translate(t, updates[:1])
    assert t.files_wanted({"update": updates[1]}) == []
    [ref] = refs(translate(t, updates[1:]))
    assert ref["diff"] == diffs.unified_diff("/w/f.txt", FILE, EDITED)


def test_whole_file_agents_without_the_file_show_their_texts() -> None:
    [ref] = refs(translate(SessionTranslator(), edit_updates(FILE, EDITED)))
    assert ref["diff"] == diffs.unified_diff("/w/f.txt", FILE, EDITED)


@pytest.mark.parametrize("style", [CLAUDE, ToolStyle()])
def test_every_diff_of_a_whole_session_applies(style: ToolStyle) -> None:
    t = SessionTranslator(tool_style=style)
    write = {"type": "diff", "path": "/w/f.txt", "oldText": None, "newText": FILE}
    out = translate(
        t,
        [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "w",
                "title": "Write",
                "kind": "edit",
                "status": "pending",
                "content": [write],
            },
            {"sessionUpdate": "tool_call_update", "toolCallId": "w", "status": "completed"},
        ],
        FILE,
    )
    out += translate(t, edit_updates("line 5", "line five"), EDITED)
    check = check_events(events(out), {"/w/f.txt": EDITED})
    assert check.ok and check.diffs == 2, check.problems


def test_the_recorded_claude_session_has_diffs_that_apply() -> None:
    transcript = PROJECT_TRANSCRIPTS / "legacy-claude.jsonl"
    drafts = replay_transcript(transcript)
    check = check_events(events(drafts))
    assert check.ok and check.diffs == 2 and check.missing == 0, check.problems


def test_a_write_through_the_bridge_is_the_exact_change_of_the_call_that_made_it() -> None:
    """opencode shows no diff for a write it does not ask about; it writes through fs/write_text_file,
    where the bridge sees the file before and after."""
    t = SessionTranslator()
    start = {
        "sessionUpdate": "tool_call",
        "toolCallId": "w",
        "title": "write",
        "kind": "edit",
        "status": "pending",
        "rawInput": {"filePath": "/w/f.txt", "content": EDITED},
    }
    translate(t, [start])
    t.file_written("/w/f.txt", FILE, EDITED)
    t.file_written("/w/elsewhere.txt", None, "x")  # no open call names it: nothing
    done = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "w",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "Wrote file successfully."}}],
    }
    assert t.files_wanted({"update": done}) == []
    [ref] = refs(translate(t, [done]))
    assert ref == diffs.file_ref("/w/f.txt", FILE, EDITED) and ref["action"] == "patch"


def test_file_text_held_for_open_calls_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.translate import tools

    monkeypatch.setattr(tools, "FILE_TEXT_BUDGET", len(EDITED) + 10)
    t = SessionTranslator(tool_style=CLAUDE)
    [ref] = refs(translate(t, edit_updates("line 5", "line five"), EDITED))
    assert ref["diff"] == diffs.unified_diff("/w/f.txt", FILE, EDITED)  # it fits, and is let go after
    assert t.tools._held == 0
    updates = [dict(u, toolCallId="t2") for u in edit_updates("line 5", "line five")]
    translate(t, updates[:1])
    params = {"update": updates[1]}
    t.supply_files(params, {"/w/f.txt": EDITED + "x" * 20})  # over the budget: not kept
    [ref] = refs(t.session_update(params, None))
    assert ref["diff"] is None and t.tools._held == 0
