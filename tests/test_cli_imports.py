"""What the command line imports: a recipe's components only, no optional extra it does not name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

#: Runs ``attnas`` command lines (a JSON list of argument lists) one after another in a new
#: Python, then prints each one's exit status and which heavy modules they imported.
RUN_AND_REPORT = """
import json, sys
blocked, commands = sys.argv[1].split(",") if sys.argv[1] else [], json.loads(sys.argv[2])
for name in blocked:
    sys.modules[name] = None  # as where the extra that installs it is missing
from attnas.cli import main
codes = []
for args in commands:
    sys.argv = ["attnas", *args]
    try:
        main()
    except SystemExit as exc:
        codes.append(exc.code)
heavy = ("torch_geometric", "gpytorch", "botorch", "torch._dynamo", "scipy", "sklearn", "matplotlib")
from attnas import registry
print(json.dumps({"codes": codes, "imported": [m for m in heavy if sys.modules.get(m) is not None],
                  "plugins_looked_up": registry._plugins_loaded}))
"""


def _attnas(*commands: list[str], blocked: str = "") -> tuple[dict, str, str]:
    proc = subprocess.run([sys.executable, "-c", RUN_AND_REPORT, blocked, json.dumps(commands)],
                          cwd=Path(__file__).parents[1], capture_output=True, text=True, timeout=300)
    *output, report = proc.stdout.splitlines()
    return json.loads(report), "\n".join(output), proc.stderr


def test_show_imports_no_graph_or_bo_package():
    # an image, a graph and a sequence recipe; each checks its option names against the registry
    recipes = ("autola-cifar10", "autoattend-cora-quick", "mechanism-listops-quick")
    report, output, err = _attnas(*(["show", recipe] for recipe in recipes))
    assert report["codes"] == [0, 0, 0], err
    assert all(f"name: {recipe}" in output for recipe in recipes)
    assert report["imported"] == [], f"attnas show imported {report['imported']}"
    # membership checks answer from the index: the installed packages' entry points (a tenth
    # of a second and more to scan) are read only for a name that is not built in
    assert report["plugins_looked_up"] is False


def test_a_graph_recipe_without_the_graph_extra_is_one_line(tmp_path):
    out = tmp_path / "run"
    report, _, err = _attnas(["search", "autoattend-digits-quick", "--out", str(out)], blocked="torch_geometric")
    assert report["codes"] == [2]
    assert err.strip().splitlines() == ["error: dataset 'digits-graph' needs torch_geometric, which is not "
                                        'installed: pip install "attnas[graph]"']
    assert not out.exists()
