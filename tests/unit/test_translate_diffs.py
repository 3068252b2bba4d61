"""ACP v1 and v2 diffs -> file_ref parts, git-style unified diffs, the 2 MiB caps."""

from __future__ import annotations

import time

from app.translate import diffs
from app.translate.diffs import DIFF_CAP, split_patch, unified_diff, v1_file_ref, v2_parts


def test_unified_diff_is_git_style_with_three_lines_of_context() -> None:
    old = "".join(f"line {i}\n" for i in range(1, 21))
    new = old.replace("line 10\n", "line ten\n")
    diff = unified_diff("/home/u/p/f.txt", old, new)
    assert diff.splitlines() == [
        "--- a/home/u/p/f.txt",
        "+++ b/home/u/p/f.txt",
        "@@ -7,7 +7,7 @@",
        " line 7",
        " line 8",
        " line 9",
        "-line 10",
        "+line ten",
        " line 11",
        " line 12",
        " line 13",
    ]


def test_identical_texts_give_an_empty_diff() -> None:
    assert unified_diff("f", "same\n", "same\n") == ""
    assert v1_file_ref({"type": "diff", "path": "f", "oldText": "x", "newText": "x"})["diff"] == ""


def test_no_or_empty_old_text_is_a_write_otherwise_a_patch() -> None:
    for old in (None, "", "absent"):
        item: dict[str, str | None] = {"type": "diff", "path": "/w/a.txt", "newText": "a\n"}
        if old != "absent":
            item["oldText"] = old
        ref = v1_file_ref(item)
        assert ref["action"] == "write" and ref["path"] == "/w/a.txt"
        assert ref["diff"] == "--- /dev/null\n+++ b/w/a.txt\n@@ -0,0 +1 @@\n+a\n"  # created: as git writes it
    ref = v1_file_ref({"type": "diff", "path": "/w/a.txt", "oldText": "a\n", "newText": "b\n"})
    assert ref == {"type": "file_ref", "path": "/w/a.txt", "action": "patch", "diff": ref["diff"]}
    assert ref["diff"].endswith("@@ -1 +1 @@\n-a\n+b\n")


def test_missing_final_newline_is_marked_as_git_does() -> None:
    diff = unified_diff("f", "old", "new")
    assert diff.endswith("-old\n\\ No newline at end of file\n+new\n\\ No newline at end of file\n")


def test_only_newline_ends_a_line() -> None:
    diff = unified_diff("f", "a\rb\u2028c\n", "a\rb\u2028C\n")
    assert diff.endswith("-a\rb\u2028c\n+a\rb\u2028C\n")


def test_a_diff_over_two_mib_is_cut_with_a_marker() -> None:
    new = "".join(f"{i:07d} {'x' * 60}\n" for i in range(40_000))  # about 2.7 MB of added lines
    diff = unified_diff("big.txt", "", new)
    lines = diff.splitlines(keepends=True)
    marker = lines[-1]
    assert marker.startswith("[diff truncated at ") and marker.endswith(" bytes]\n")
    kept = int(marker.split()[3])
    assert kept == len("".join(lines[:-1]).encode()) and DIFF_CAP - 200 < kept <= DIFF_CAP
    assert lines[-2].startswith("+") and lines[-2].endswith("\n")  # cut at a line boundary


def test_the_cap_counts_utf8_bytes() -> None:
    diff = unified_diff("f", "", "é\n" * 10, cap=40)
    assert len(diff.encode()) - len(diff.splitlines(keepends=True)[-1].encode()) <= 40
    assert diff.endswith(" bytes]\n")


def test_huge_inputs_get_one_whole_file_hunk_quickly() -> None:
    old = "".join(f"{i}\n" for i in range(60_000))
    new = "".join(f"{i}\n" for i in range(1, 60_001))
    start = time.perf_counter()
    diff = unified_diff("f", old, new)
    assert time.perf_counter() - start < 5
    assert diff.startswith("--- a/f\n+++ b/f\n@@ -1,60000 +1,60000 @@\n-0\n")


PATCH = (
    "diff --git a/w/new.txt b/w/new.txt\n"
    "new file mode 100644\n"
    "--- /dev/null\n"
    "+++ b/w/new.txt\n"
    "@@ -0,0 +1 @@\n"
    "+new\n"
    "diff --git /w/cfg.json /w/cfg.json\n"
    "--- /w/cfg.json\n"
    "+++ /w/cfg.json\n"
    "@@ -1,3 +1,3 @@\n"
    " {\n"
    '-  "debug": false\n'
    '+  "debug": true\n'
    " }\n"
    "diff --git a/w/a b.txt b/w/c d.txt\n"
    "similarity index 100%\n"
    "rename from w/a b.txt\n"
    "rename to w/c d.txt\n"
)


def test_v2_one_file_ref_per_change_with_its_patch_section() -> None:
    changes = [
        {"operation": "add", "path": "/w/new.txt", "fileType": "text"},
        {"operation": "modify", "path": "/w/cfg.json", "mimeType": "application/json"},
        {"operation": "move", "oldPath": "/w/a b.txt", "path": "/w/c d.txt"},
        {"operation": "modify", "path": "/w/logo.png", "fileType": "binary"},
    ]
    parts = v2_parts({"type": "diff", "changes": changes, "patch": {"format": "git_patch", "text": PATCH}})
    refs = parts[:-1]
    assert [(r["path"], r["action"]) for r in refs] == [
        ("/w/new.txt", "write"),
        ("/w/cfg.json", "patch"),
        ("/w/c d.txt", "patch"),
        ("/w/logo.png", "patch"),
    ]
    assert refs[0]["diff"].startswith("diff --git a/w/new.txt") and refs[0]["diff"].endswith("+new\n")
    assert refs[1]["diff"].startswith("diff --git /w/cfg.json") and '+  "debug": true\n' in refs[1]["diff"]
    assert refs[2]["diff"].startswith("diff --git a/w/a b.txt b/w/c d.txt")
    assert refs[3]["diff"] is None  # binary: no section in the patch
    assert parts[-1] == {"type": "json", "json": {"changes": changes}}


def test_v2_without_patch_gives_null_diffs_and_keeps_unknown_operations() -> None:
    changes = [
        {"operation": "delete", "path": "/w/gone"},
        {"operation": "copy", "oldPath": "/w/a", "path": "/w/b"},
        {"operation": "_vendor/chmod", "path": "/w/x", "mode": "755"},
        {"operation": "modify", "oldPath": "/w/only-old"},
        "not an object",
    ]
    parts = v2_parts({"type": "diff", "changes": changes})
    assert [(p["path"], p["action"], p["diff"]) for p in parts[:-1]] == [
        ("/w/gone", "patch", None),
        ("/w/b", "patch", None),
        ("/w/x", "patch", None),
        ("/w/only-old", "patch", None),
    ]
    assert parts[-1]["json"]["changes"] == changes  # kept as sent, unknown entries included


def test_v2_older_patch_key_and_plain_unified_patches() -> None:
    plain = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-1\n+2\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-3\n+4\n"
    changes = [{"operation": "modify", "path": "/x"}, {"operation": "modify", "path": "/y"}]
    parts = v2_parts({"type": "diff", "changes": changes, "patch": {"format": "git_patch", "diff": plain}})
    assert parts[0]["diff"] == "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-1\n+2\n"
    assert parts[1]["diff"] == "--- a/y\n+++ b/y\n@@ -1 +1 @@\n-3\n+4\n"


def test_v2_one_change_takes_the_only_section_even_if_named_otherwise() -> None:
    patch = "diff --git a/relative/f b/relative/f\n--- a/relative/f\n+++ b/relative/f\n@@ -1 +1 @@\n-a\n+b\n"
    parts = v2_parts({"type": "diff", "changes": [{"operation": "modify", "path": "/abs/f"}], "patch": {"text": patch}})
    assert parts[0]["diff"] == patch


def test_v2_unsplittable_patch_gives_null() -> None:
    parts = v2_parts({"type": "diff", "changes": [{"operation": "modify", "path": "/a"}], "patch": {"text": "junk"}})
    assert parts[0]["diff"] is None


def test_v2_patch_sections_are_capped_too() -> None:
    body = "".join(f"+{i:07d} {'y' * 60}\n" for i in range(40_000))
    patch = "diff --git a/big b/big\n--- /dev/null\n+++ b/big\n@@ -0,0 +1,40000 @@\n" + body
    parts = v2_parts({"type": "diff", "changes": [{"operation": "add", "path": "/big"}], "patch": {"text": patch}})
    diff = parts[0]["diff"]
    assert diff.endswith(" bytes]\n") and len(diff.encode()) < DIFF_CAP + 100


def test_split_patch_names_every_path_a_section_mentions() -> None:
    sections = split_patch(PATCH)
    assert len(sections) == 3
    assert "w/new.txt" in sections[0][0] and "w/cfg.json" in sections[1][0]
    assert {"w/a b.txt", "w/c d.txt"} <= sections[2][0]


def test_file_refs_dispatches_on_the_shape() -> None:
    assert len(diffs.file_refs({"type": "diff", "path": "p", "newText": "x"})) == 1
    assert diffs.file_refs({"type": "diff", "changes": []}) == [{"type": "json", "json": {"changes": []}}]
