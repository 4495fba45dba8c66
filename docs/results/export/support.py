"""Which found models of the five methods' quick recipes export to torch.export and ONNX.

For each recipe: its space's models (every mechanism of DARTFormer's pool, architectures drawn
from the prior for the others, and the found model of a finished run when ``--runs`` names a
folder of runs named after the recipes) are traced with :func:`attnas.export.model_export.trace`
and written to ONNX; each exported program runs on the example inputs it was traced with and
on inputs of another size (5 nodes or 5 examples) beside the model, and the largest output
difference is printed (a markdown table).

    ATTNAS_DATA=../shared/data python -m docs.results.export.support [--draws 4] [--runs RUNS_DIR]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import warnings
from pathlib import Path

import torch

RECIPES = ("autoattend-digits-quick", "dartformer-listops-quick", "autola-digits-quick", "fullattn-digits-quick",
           "latent-bo-cora-quick")


def _onnx_diff(model, info) -> str:
    import onnxruntime

    from attnas.export.model_export import _write_onnx

    with tempfile.TemporaryDirectory() as tmp:
        check = _write_onnx(model, info, Path(tmp) / "m.onnx")
    del onnxruntime
    if "other_sizes" in check:
        return f"traced sizes only ({check['max_abs_diff']:.1e}); other sizes {check['other_sizes'][:120]}"
    return f"ok ({max(check['max_abs_diff'], check['other_size_max_abs_diff']):.1e})"


def _check(model, info) -> tuple[str, str]:
    from attnas.core.errors import UnsupportedError
    from attnas.export.model_export import saved_program, trace
    from attnas.export.model_inputs import example_inputs, tensor_input_model

    try:
        program, inputs = trace(model, info)
        with torch.no_grad():
            other = example_inputs(info, size=5, seed=1)
            diffs = [float((tensor_input_model(model, info.kind)(*x) - program.module()(*x)).abs().max())
                     for x in (inputs, other)]
        saved_program(program)
        exported = f"ok ({max(diffs):.1e})"
    except UnsupportedError as exc:
        exported = f"no: {exc}"
    try:
        onnx = _onnx_diff(model, info)
    except UnsupportedError as exc:
        onnx = f"no: {exc}"
    except ModuleNotFoundError as exc:
        onnx = f"not run ({exc.name} missing)"
    return exported, onnx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=4)
    parser.add_argument("--runs", type=Path)
    parser.add_argument("--recipes", default=",".join(RECIPES))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    from attnas import pipeline
    from attnas.runs.build import build_space, build_task
    from attnas.config import load_config
    from attnas.data.root import resolve_data_root

    print("| recipe | model | torch.export (max abs diff) | ONNX (max abs diff) |\n|---|---|---|---|")
    for name in args.recipes.split(","):
        config = load_config(name)
        space = build_space(config)
        task = build_task(config, resolve_data_root(None), torch.device("cpu"))
        rng = random.Random(0)
        if config.space.name == "attention-mechanisms":
            archs = [space.arch({"mechanism": m}) for m in space.options.candidates]
        else:
            archs = [space.sample(rng) for _ in range(args.draws)]
        models = [(" ".join(space.describe(a).split())[:90], space.build(a, task).eval()) for a in archs]
        run = args.runs / name if args.runs else None
        if run is not None and (run / "model.pt").exists():
            models.insert(0, ("found: " + " ".join(space.describe(pipeline.open_finished(run)[2]).split())[:80],
                              pipeline.load_model(run, device="cpu")))
        for label, model in models:
            exported, onnx = _check(model, task.info)
            print(f"| {name} | {label} | {exported} | {onnx} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
