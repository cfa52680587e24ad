"""The pipeline is pure Python: importing it never loads Django."""

from __future__ import annotations

import subprocess
import sys

from tests.shared import ROOT


def test_the_pipeline_imports_without_django() -> None:
    code = (
        "import importlib, pkgutil, sys\n"
        "import ctxsim.pipeline as p\n"
        "names = [m.name for m in pkgutil.walk_packages(p.__path__, 'ctxsim.pipeline.')]\n"
        "for name in names: importlib.import_module(name)\n"
        "assert 'ctxsim.pipeline.replay' in sys.modules\n"
        "assert 'django' not in sys.modules, sorted(m for m in sys.modules if 'django' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, env={"PATH": ""})


def test_the_simulate_cli_imports_without_django() -> None:
    code = (
        "import sys\n"
        "import ctxsim.cli\n"
        "assert 'ctxsim.importers' in sys.modules\n"
        "assert 'django' not in sys.modules, sorted(m for m in sys.modules if 'django' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, env={"PATH": ""})
