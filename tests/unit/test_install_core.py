"""The installer core (app/agents/install_core.py) both installers share: every step's process group
and every folder an install works in are recorded in the process registry and ended or released when
done, whether the install succeeds, fails, times out or is stopped; what a kept install uses is not
left for the next server's sweep. Against a fake `uv` on PATH (the ACP registry's uvx path: steps,
a staging folder and a tool folder beside it)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.acp.orphans import ProcessRegistry
from app.agents.acp_catalog import CatalogAgent, PackageDistribution
from app.agents.catalog_install import CatalogInstaller
from app.agents.install_core import InstallCore
from app.errors import InstallFailed
from tests.support import wait_until_async

# `uv tool install ... <spec>` as uv does it (a program in $UV_TOOL_BIN_DIR), or as $UV_MODE says.
FAKE_UV = """#!/bin/sh
mkdir -p "$UV_TOOL_BIN_DIR" "$UV_TOOL_DIR"
case "$UV_MODE" in
fail) echo "error: no such package"; exit 2 ;;
hang) exec sleep 300 ;;
esac
printf '#!/bin/sh\\necho agent\\n' > "$UV_TOOL_BIN_DIR/probe-agent"
chmod +x "$UV_TOOL_BIN_DIR/probe-agent"
"""

AGENT = CatalogAgent(id="probe", name="probe", version="1.0.0", uvx=PackageDistribution(package="probe-agent@1.0.0"))


@pytest.fixture
def uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    (bin_dir / "uv").write_text(FAKE_UV)
    (bin_dir / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("UV_MODE", "ok")


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[ProcessRegistry]:
    processes = ProcessRegistry(tmp_path / "processes")
    processes.open()
    yield processes
    processes.close()


def installer(tmp_path: Path, registry: ProcessRegistry, timeout: float = 60.0) -> CatalogInstaller:
    return CatalogInstaller(InstallCore(tmp_path / "install", timeout, None, registry))


async def recorded(registry: ProcessRegistry) -> list[str]:
    """The registry's lines so far, then the registry closed (its file goes if nothing is left)."""
    mark = registry.directory / "mark"
    await asyncio.to_thread(registry.made_dir, mark)  # returns once written: all before it is too
    lines = registry.path.read_text().splitlines()[1:-1]
    registry.removed_dir(mark)
    registry.close()
    return lines


@pytest.mark.usefixtures("uv")
async def test_an_install_records_its_steps_and_folders_and_keeps_what_it_installed(
    tmp_path: Path, registry: ProcessRegistry
) -> None:
    catalog = installer(tmp_path, registry)
    await catalog.install(AGENT)
    manifest = catalog.installed("probe")
    assert manifest is not None
    tools = Path(manifest["tools"])
    assert tools.name.startswith(".probe.uv-") and Path(manifest["command"][0]).is_file()
    assert sorted(p.name for p in catalog.root.iterdir()) == [tools.name, "probe"]  # no staging left
    lines = await recorded(registry)
    folders = [line for line in lines if line.startswith(("d ", "-d "))]
    staging = next(line.split(" ", 1)[1] for line in folders if ".probe.staging-" in line)
    assert folders == [f"d {staging}", f'd "{tools}"', f'-d "{tools}"', f"-d {staging}"], lines
    groups = [line.split()[1] for line in lines if line.startswith(("+ ", "- "))]  # uv's, if it was seen
    assert len(groups) in (0, 2) and len(set(groups)) <= 1, lines
    assert not registry.path.exists()  # nothing for a sweep: the tool folder in use is kept
    assert ProcessRegistry(tmp_path / "processes").sweep().directories == 0
    assert tools.is_dir()

    # A reinstall: the replaced install and its tool folder go (recorded on their way out).
    again = ProcessRegistry(tmp_path / "processes")
    again.open()
    catalog.core.recorder = again
    await catalog.install(AGENT, reinstall=True)
    manifest = catalog.installed("probe")
    assert manifest is not None and manifest["tools"] != str(tools) and not tools.exists()
    assert sorted(p.name for p in catalog.root.iterdir()) == [Path(manifest["tools"]).name, "probe"]
    folders = [line for line in await recorded(again) if line.startswith(("d ", "-d "))]
    assert any(".probe.old-" in line for line in folders) and len(folders) == 6, folders
    assert not again.path.exists()


async def test_a_failed_or_timed_out_step_leaves_nothing_recorded_or_on_disk(
    tmp_path: Path, registry: ProcessRegistry, uv: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UV_MODE", "fail")
    catalog = installer(tmp_path, registry, timeout=1.0)
    with pytest.raises(InstallFailed) as failed:
        await catalog.install(AGENT)
    assert failed.value.problem()["details"]["stderr"].endswith(
        "uv tool install probe-agent@1.0.0 failed (exit 2):\nerror: no such package"
    )
    monkeypatch.setenv("UV_MODE", "hang")
    with pytest.raises(InstallFailed) as overdue:
        await asyncio.wait_for(catalog.install(AGENT), 60)
    assert overdue.value.problem()["details"]["stderr"].endswith(
        "uv tool install probe-agent@1.0.0 did not finish in 1s"
    )
    assert os.listdir(catalog.root) == []
    assert not catalog.core.running and catalog.core.active == 0
    lines = await recorded(registry)
    assert any(line.startswith("+ ") for line in lines), lines  # the hanging uv was recorded ...
    assert not registry.path.exists()  # ... and every group ended, every folder removed


async def test_shutdown_kills_a_running_step(
    tmp_path: Path, registry: ProcessRegistry, uv: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UV_MODE", "hang")
    catalog = installer(tmp_path, registry)
    install = asyncio.create_task(catalog.install(AGENT))
    assert await wait_until_async(lambda: catalog.core.running or install.done(), 30)
    assert not install.done(), install
    await asyncio.wait_for(catalog.core.shutdown(), 30)
    with pytest.raises(InstallFailed) as killed:
        await install
    assert "uv tool install probe-agent@1.0.0 failed (exit -9)" in killed.value.problem()["details"]["stderr"]
    assert os.listdir(catalog.root) == []
    await recorded(registry)
    assert not registry.path.exists()
