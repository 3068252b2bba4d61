"""``/docs`` is off by default; on, its page loads nothing from another origin (in process)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import in_process_bridge


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
