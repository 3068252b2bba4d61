"""Legacy skills on create (behavior §3.7 step 4, §4.2)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx

from tests.support import Bridge


def make_source(root: Path) -> Path:
    skill = root / "my-test-skill"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: my-test-skill\n---\nA test skill.\n")
    return root


def test_local_skill_source_is_linked(client: httpx.Client, bridge: Bridge, tmp_path: Path) -> None:
    source = make_source(tmp_path / "skills-src")
    workdir = tmp_path / "work"
    workdir.mkdir()
    body = {
        "agent": "mock",
        "directory": str(workdir),
        "skills": {"sources": [{"type": "local", "source": str(source)}]},
    }
    response = client.post("/v1/sessions/skills-ok", json=body)
    assert response.status_code == 200, response.text
    for rel in (".agents/skills", ".claude/skills", ".opencode/skill"):
        link = workdir / rel / "my-test-skill"
        assert link.is_symlink() and (link / "SKILL.md").is_file()
    info = next(s for s in client.get("/v1/sessions").json()["sessions"] if s["sessionId"] == "skills-ok")
    assert info["skills"] == {"sources": [{"type": "local", "source": str(source)}]}
    assert info["directory"] == str(workdir)


def test_skill_filter_and_errors(client: httpx.Client, tmp_path: Path) -> None:
    source = make_source(tmp_path / "src2")
    ok = {"type": "local", "source": str(source), "skills": ["my-test-skill"]}
    assert client.post("/v1/sessions/skills-f", json={"agent": "mock", "skills": {"sources": [ok]}}).status_code == 200

    missing = {"type": "local", "source": str(tmp_path / "nope")}
    r = client.post("/v1/sessions/skills-m", json={"agent": "mock", "skills": {"sources": [missing]}})
    assert r.status_code == 400
    assert r.json()["detail"] == f"invalid request: local skill directory not found: {tmp_path / 'nope'}"

    nothing = {"type": "local", "source": str(source), "skills": ["wanted-skill"]}
    r = client.post("/v1/sessions/skills-n", json={"agent": "mock", "skills": {"sources": [nothing]}})
    assert r.status_code == 400
    assert r.json()["detail"] == f"invalid request: no skills found in {source} (local) (filter: wanted-skill)"

    odd = {"type": "s3", "source": "x"}
    r = client.post("/v1/sessions/skills-t", json={"agent": "mock", "skills": {"sources": [odd]}})
    assert r.status_code == 400 and r.json()["detail"] == "invalid request: unsupported skill source type: s3"
    ids = {s["sessionId"] for s in client.get("/v1/sessions").json()["sessions"]}
    assert not ids & {"skills-m", "skills-n", "skills-t"}


def test_git_sources_are_cloned_once_and_a_failed_clone_says_why(
    client: httpx.Client, bridge: Bridge, tmp_path: Path
) -> None:
    repo = make_source(tmp_path / "repo")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for argv in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "skills"]):
        subprocess.run([*git, *argv], check=True, capture_output=True, timeout=60)
    workdir = tmp_path / "work"
    workdir.mkdir()
    source = {"type": "git", "source": repo.as_uri()}
    body = {"agent": "mock", "directory": str(workdir), "skills": {"sources": [source]}}
    assert client.post("/v1/sessions/skills-git", json=body).status_code == 200
    link = workdir / ".claude/skills/my-test-skill"
    clones = bridge.data_dir / "skills"
    assert (link / "SKILL.md").is_file() and link.resolve().parent.parent == clones
    before = sorted(clones.iterdir())
    assert not [p for p in before if p.name.startswith(".")]  # the staging folder went into place

    missing = {"type": "git", "source": (tmp_path / "no-repo").as_uri()}
    r = client.post("/v1/sessions/skills-git-missing", json={"agent": "mock", "skills": {"sources": [missing]}})
    assert r.status_code == 502, r.text
    detail = r.json()["detail"]
    assert detail.startswith(f"stream error: cannot fetch skill source {missing['source']}: fatal: "), detail
    assert sorted(clones.iterdir()) == before  # nothing left of the failed clone
