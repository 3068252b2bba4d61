"""``/docs`` is off by default; on, its page loads nothing from another origin (in process)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from app.api import docs
from tests.support import ROOT, in_process_bridge


def test_docs_are_off_by_default(tmp_path: Path) -> None:
    with in_process_bridge(tmp_path) as client:
        assert client.get("/docs").status_code == 404
        assert client.get("/openapi.json").status_code == 200


def test_docs_load_their_assets_from_the_server_itself(tmp_path: Path) -> None:
    with in_process_bridge(tmp_path, docs=True) as client:
        page = client.get("/docs")
        assert page.status_code == 200 and "swagger-ui" in page.text
        urls = re.findall(r"""(?:src|href|url)\s*[=:]\s*['"]([^'"]+)['"]""", page.text)
        assert urls, page.text
        for url in urls:
            assert url.startswith("/"), f"/docs loads {url} from elsewhere"
            assert client.get(url).status_code == 200, url
        assert "http" not in page.text.lower()
        assert page.headers["content-security-policy"].startswith("default-src 'self';")


def test_docs_without_their_extra_is_one_line_before_the_server_starts(tmp_path: Path) -> None:
    """ACP_BRIDGE_DOCS=1 where swagger-ui-bundle cannot be imported: the server says what to install
    in one line and exits, without a traceback, before it listens or makes its data dir."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "swagger_ui_bundle.py").write_text('raise ImportError("No module named swagger_ui_bundle")\n')
    env = {**os.environ, "ACP_BRIDGE_DOCS": "1", "PYTHONPATH": f"{hidden}{os.pathsep}{ROOT}"}
    argv = [sys.executable, "-m", "app", "server", "--port", "0", "--data-dir", str(tmp_path / "data")]
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"acp-rest-bridge: {docs.MISSING}"], done.stderr
    assert "pip install swagger-ui-bundle" in docs.MISSING and "'.[docs]'" in docs.MISSING
    assert not (tmp_path / "data").exists()
