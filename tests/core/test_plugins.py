"""The plugin loader (core/plugins.py): `--plugin` modules and the `zerohop.plugins` entry
points imported once per process, a broken one named on one line (exit 2 from every
entry: the CLI, the embedded target, the Locust process), the names handed to child
processes through `ZEROHOP_PLUGINS`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_fork import ForkedZerohop
from zerohop.core import plugins
from zerohop.core.plugins import (
    PLUGINS_ENV,
    PluginError,
    load_plugins,
    plugins_from_argv,
    plugins_in_environment,
    publish_plugins,
)

REPO = Path(__file__).resolve().parents[2]

COUNTED = "import plugin_counter\nplugin_counter.loads.append(__name__)\n"


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for toy plugins; what they loaded is forgotten afterwards."""
    (tmp_path / "plugin_counter.py").write_text("loads = []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before_loaded, before_modules = set(plugins._LOADED), set(sys.modules)
    yield tmp_path
    plugins._LOADED.intersection_update(before_loaded)
    for name in set(sys.modules) - before_modules:
        del sys.modules[name]


def _entry_point(folder: Path, name: str, value: str) -> None:
    dist = folder / f"{name}_dist-1.0.dist-info"
    dist.mkdir()
    (dist / "entry_points.txt").write_text(f"[zerohop.plugins]\n{name} = {value}\n")


@pytest.mark.unit
def test_a_named_module_and_an_entry_point_load_once_per_process(plugin_dir: Path) -> None:
    (plugin_dir / "toy_named.py").write_text(COUNTED)
    (plugin_dir / "toy_listed.py").write_text(COUNTED)
    _entry_point(plugin_dir, "toy_ep", "toy_listed")
    assert load_plugins(["toy_named", " toy_named "]) == ["toy_named", "toy_listed"]
    del sys.modules["toy_named"], sys.modules["toy_listed"]  # a second import would count
    assert load_plugins(["toy_named"]) == []
    import plugin_counter  # type: ignore[import-not-found]

    assert plugin_counter.loads == ["toy_named", "toy_listed"]


@pytest.mark.unit
def test_a_plugin_that_fails_is_one_line_naming_it(plugin_dir: Path) -> None:
    with pytest.raises(PluginError) as missing:
        load_plugins(["no_such_plugin_module"])
    assert str(missing.value) == ("plugin 'no_such_plugin_module' failed to load: "
                                  "ModuleNotFoundError: No module named 'no_such_plugin_module'")
    (plugin_dir / "toy_broken.py").write_text(
        "raise ValueError('registry refused it\\nsecond line')\n")
    with pytest.raises(PluginError) as broken:
        load_plugins(["toy_broken"])
    assert str(broken.value) == ("plugin 'toy_broken' failed to load: "
                                 "ValueError: registry refused it")
    assert "toy_broken" not in plugins._LOADED  # a fixed module may be loaded later
    _entry_point(plugin_dir, "toy_bad_ep", "toy_broken")
    with pytest.raises(PluginError, match=r"^plugin entry point 'toy_bad_ep' \(toy_broken\)"):
        load_plugins()


@pytest.mark.unit
def test_the_names_travel_in_one_variable_and_are_read_before_the_command() -> None:
    assert plugins_from_argv(["run", "--plugin", "a.b", "--only", "X", "--plugin=c",
                              "--", "--plugin", "after_the_end"]) == ("a.b", "c")
    assert plugins_from_argv(["run", "--plugin"]) == ()
    env = {PLUGINS_ENV: "given, earlier"}
    assert publish_plugins(["earlier", "new"], env) == ("given", "earlier", "new")
    assert env[PLUGINS_ENV] == "given,earlier,new"
    assert plugins_in_environment(env) == ("given", "earlier", "new")
    empty: dict[str, str] = {}
    assert publish_plugins([], empty) == () and empty == {}


@pytest.mark.integration  # runs `zerohop run` as a child process (forked: tests/cli_fork.py)
def test_the_cli_refuses_a_broken_plugin_with_exit_2(tmp_path: Path,
                                                     forked_zerohop: ForkedZerohop) -> None:
    res = forked_zerohop.run(["run", "--plugin", "no_such_plugin_module", "--results-dir",
                              str(tmp_path)], timeout=60)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == ("zerohop: error: plugin 'no_such_plugin_module' failed to "
                                  "load: ModuleNotFoundError: No module named "
                                  "'no_such_plugin_module'")
    assert not any(tmp_path.iterdir())


@pytest.mark.integration  # starts the target's and Locust's entries as child processes
@pytest.mark.parametrize("entry", [
    ["-m", "zerohop.sim", "--port", "0"],
    ["-m", "locust", "-f", str(REPO / "loadtests" / "plugin_kinds.py"), "--headless",
     "-t", "1s"],
], ids=["embedded-target", "locust"])
def test_the_target_and_locust_entries_refuse_a_broken_plugin_with_exit_2(
        entry: list[str], tmp_path: Path) -> None:
    env = {**os.environ, PLUGINS_ENV: "no_such_plugin_module"}
    res = subprocess.run([sys.executable, *entry], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path, env=env)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    assert res.stderr.strip().endswith(
        "error: plugin 'no_such_plugin_module' failed to load: ModuleNotFoundError: "
        "No module named 'no_such_plugin_module'")
