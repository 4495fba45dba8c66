"""The ``attnas`` command.

::

    attnas list [spaces|strategies|tasks|datasets|ops|recipes]
    attnas show RECIPE [--set key=value ...]
    attnas search RECIPE [--set key=value ...] [--out RUN_DIR] [--data-dir DIR] [--seed N] [--device D]
                  [--workers N] [--ray-address ADDR] [--tensorboard DIR] [--mlflow URI [--mlflow-experiment NAME]]
    attnas search --resume RUN_DIR [--workers N] [--ray-address ADDR] [--force] [--tensorboard DIR]
                  [--mlflow URI [--mlflow-experiment NAME]]
    attnas retrain RUN_DIR [--dataset NAME] [--seeds N] [--init supernet|scratch] [--workers N]
    attnas sweep RECIPE [--seeds N] [--grid key=[v1,v2] ...] [--set key=value ...] [--out DIR] [--workers N]
    attnas compare RECIPE [--seeds N] [--search-seeds K] [--baselines a,b] [--no-random] [--set key=value ...] [--out DIR] [--workers N]
    attnas bench [--out DIR] [--seeds N] [--budgets 25,50,...] [--datasets cora,...] [--strategy SPEC ...]
    attnas evaluate RUN_DIR
    attnas report RUN_DIR
    attnas check-arch ARCH_JSON RECIPE
    attnas export RUN_DIR --pick INDEX|CONDITIONS [--out ARCH_JSON]
    attnas export RUN_DIR --format pytorch|safetensors|torch-export|onnx [--out DIR]

Exit status is 0 on success. On failure one line goes to stderr (``error: ...``) and the
status says what happened:

- 2: bad input (recipe, ``--set`` value, command-line option, architecture, data, run
  directory), found before anything is written;
- 1: a failure during the run (a diverged loss, a full disk, a Ray worker that died on
  every try, an error from torch); the run directory is kept, ``run.json`` says
  ``"status": "failed"`` with the error, and ``attnas search --resume RUN_DIR`` continues
  it (a retrain run again keeps the seeds that finished). An error attnas does not expect
  is printed as ``error: <type>: <message>``;
- 130: interrupted (Ctrl-C); ``run.json`` says ``"status": "interrupted"``;
- 143: terminated (SIGTERM, as sent by Slurm, Kubernetes or ``timeout``): as Ctrl-C.

No traceback is printed unless the global ``--debug`` option (or ``ATTNAS_DEBUG=1``) is
given; then the error is raised with its traceback.

What the library says goes through the standard :mod:`logging` package, on the ``attnas``
logger and its children; the command shows its INFO messages on stderr (a kernel being
built, the row a comparison is at), ``--verbose`` adds DEBUG, ``--quiet`` keeps warnings and
errors only (and turns the progress bars off), as does ``ATTNAS_PROGRESS=0`` unless
``--verbose`` is given.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Optional

import typer

from attnas._version import __version__
from attnas.runtime.command_errors import fail, guard, is_click_exception, one_line, set_debug
from attnas.runtime.verbosity import set_verbosity

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Neural architecture search for attention (AutoAttend, DARTFormer, AutoLA, "
                       "full-attention NAS, operation embeddings).")


WORKERS_HELP = "Score candidates on N parallel Ray workers (needs attnas\\[ray]); the result is the same."


# The options and arguments several commands declare alike (the same flags, the same help).
# Each call gives a command its own declaration.
def _finished_run_dir() -> Any:
    return typer.Argument(..., help="A finished run directory.")


def _data_dir_option() -> Any:
    return typer.Option(None, "--data-dir")


def _device_option() -> Any:
    return typer.Option(None, "--device")


def _ray_address_option() -> Any:
    return typer.Option(None, "--ray-address",
                        help="Use the Ray cluster at ADDR (e.g. ray://head:10001) instead of a local Ray.")


#: The commands that train or run models: the console script tunes the process for these
#: only (:func:`tune_process`), never for ``--version``, ``list``, ``show``, ``report`` or
#: ``check-arch``.
TUNED_COMMANDS = frozenset({"search", "retrain", "sweep", "compare", "evaluate"})


#: Most torch threads ``--threads`` sets (torch takes a 32-bit count; more threads than this
#: only oversubscribe any machine).
MAX_THREADS = 4096

def _version(value: bool) -> None:
    if value:
        typer.echo(f"attnas {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(ctx: typer.Context,
                  version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                               help="Print the version and exit."),
                  threads: Optional[int] = typer.Option(None, "--threads", envvar="ATTNAS_THREADS",
                                                        help="CPU threads of torch and numpy's BLAS."),
                  debug: bool = typer.Option(False, "--debug", envvar="ATTNAS_DEBUG",
                                             help="Raise errors with their traceback instead of one line."),
                  verbose: bool = typer.Option(False, "--verbose", "-v", help="Also show debug messages (which "
                                               "cached kernel is loaded, ...)."),
                  quiet: bool = typer.Option(False, "--quiet", "-q", help="Show only warnings and errors (no "
                                             "progress, no notices)."),
                  offline: bool = typer.Option(False, "--offline", "--no-download", help="Never download a missing "
                                               "dataset; name the missing files instead (as $ATTNAS_OFFLINE=1).")) -> None:
    """attnas: neural architecture search for attention."""
    set_debug(debug)
    ctx.call_on_close(set_verbosity(verbose, quiet))
    if offline:
        from attnas.data.download import OFFLINE_VAR

        os.environ[OFFLINE_VAR] = "1"
    warnings.formatwarning = lambda message, category, *a, **k: f"warning: {message}\n"
    if ctx.invoked_subcommand in TUNED_COMMANDS and (ctx.obj or {}).get("tune_process"):
        tune_process()
    if threads is not None:
        if threads < 1:
            fail(f"--threads must be >= 1, got {threads}")
        if threads > MAX_THREADS:
            fail(f"--threads {threads}: at most {MAX_THREADS:,} threads")
        import torch

        torch.set_num_threads(threads)
        from attnas.runtime.blas_threads import set_blas_limit

        set_blas_limit(threads)  # scipy's own BLAS, loaded later: attnas.runtime.blas_threads
        try:  # numpy's BLAS too (scikit-learn's GPs): a 1-thread run must not spin a second core
            from threadpoolctl import threadpool_limits
        except ImportError:
            pass
        else:
            threadpool_limits(threads)


@app.command("list")
@guard
def list_cmd(what: str = typer.Argument("all", help="spaces, strategies, tasks, datasets, ops, recipes or all")) -> None:
    """List registered components and shipped recipes."""
    from attnas import registry
    from attnas.config import list_recipes, read_yaml, recipe_path
    from attnas.reporting.display import plain_text

    kinds = {"spaces": "space", "strategies": "strategy", "tasks": "task", "datasets": "dataset", "ops": "op"}
    valid = [*kinds, "recipes", "all"]
    if what not in valid:
        from attnas.core.errors import ConfigError, unknown_name

        raise ConfigError(unknown_name("list target", what, valid))
    for name, kind in kinds.items():
        if what not in (name, "all"):
            continue
        typer.echo(f"{name}:")
        for e in registry.entries(kind):
            label = f"{e.group}/{e.name}" if kind == "op" and e.group else e.name
            typer.echo(f"  {label:28s} {plain_text(e.help)}")
    if what in ("recipes", "all"):
        typer.echo("recipes:")
        for r in list_recipes():
            desc = read_yaml(recipe_path(r)).get("description", "")
            typer.echo(f"  {r:28s} {plain_text(desc.splitlines()[0]) if desc else ''}")


@app.command()
@guard
def show(recipe: str = typer.Argument(..., help="Recipe name or YAML path."),
         set_: list[str] = typer.Option([], "--set", help="Override: key.sub=value (repeatable).")) -> None:
    """Print a recipe's fully resolved configuration."""
    from attnas.config import load_config

    typer.echo(load_config(recipe, set_).to_yaml().rstrip())


@app.command()
@guard
def search(recipe: Optional[str] = typer.Argument(None, help="Recipe name (attnas list recipes) or YAML path."),
           set_: list[str] = typer.Option([], "--set", help="Override: key.sub=value (repeatable)."),
           out: Optional[Path] = typer.Option(None, "--out", help="Run directory (default runs/<name>-<time>)."),
           data_dir: Optional[Path] = typer.Option(None, "--data-dir", help="Data root (default $ATTNAS_DATA)."),
           seed: Optional[int] = typer.Option(None, "--seed", help="Override the recipe's seed."),
           device: Optional[str] = typer.Option(None, "--device", help="auto (default), cpu or cuda."),
           resume: Optional[Path] = typer.Option(None, "--resume", help="Continue the killed search in RUN_DIR."),
           workers: Optional[int] = typer.Option(None, "--workers", help=WORKERS_HELP),
           ray_address: Optional[str] = _ray_address_option(),
           force: bool = typer.Option(False, "--force", help="With --resume: resume even when the torch threads, "
                                      "compiled kernels or torch/attnas version differ from the run's (run.json "
                                      "records it)."),
           tensorboard: Optional[Path] = typer.Option(None, "--tensorboard", help="Mirror the run's events "
                                                      "(losses, scores, costs) to TensorBoard logs in this folder "
                                                      "while it goes (pip install \"attnas\\[tensorboard]\")."),
           mlflow: Optional[str] = typer.Option(None, "--mlflow", help="Mirror the run's events as metrics of an "
                                                "MLflow run at this tracking URI (http://host:5000, file:./mlruns) "
                                                "while it goes (pip install \"attnas\\[mlflow]\")."),
           mlflow_experiment: Optional[str] = typer.Option(None, "--mlflow-experiment", help="With --mlflow: the "
                                                           "MLflow experiment (default attnas).")) -> None:
    """Search an architecture; writes arch.json, metrics.json and model.pt to the run directory."""
    from attnas.tracking import mlflow_mirror, tensorboard_mirror

    if mlflow_experiment is not None and mlflow is None:
        from attnas.core.errors import ConfigError

        raise ConfigError("--mlflow-experiment goes with --mlflow URI")
    with tensorboard_mirror.mirroring(tensorboard), mlflow_mirror.mirroring(mlflow, mlflow_experiment or "attnas"):
        _search(recipe, set_, out, data_dir, seed, device, resume, workers, ray_address, force)


def _search(recipe: Optional[str], set_: list[str], out: Optional[Path], data_dir: Optional[Path], seed: Optional[int],
            device: Optional[str], resume: Optional[Path], workers: Optional[int], ray_address: Optional[str],
            force: bool) -> None:
    from attnas import pipeline

    if resume is not None:
        if recipe or set_ or out or seed is not None:
            fail("--resume takes only the run directory (and --data-dir/--device/--workers/--ray-address/--force); "
                  "the run keeps its own config")
        run = pipeline.resume(resume, data_dir=data_dir, device=device, workers=workers, ray_address=ray_address,
                              force=force)
    else:
        if not recipe:
            fail("give a RECIPE (see `attnas list recipes`) or --resume RUN_DIR")
        if force:
            fail("--force goes with --resume RUN_DIR")
        run = pipeline.search(recipe, set_, out=out, data_dir=data_dir, seed=seed, device=device, workers=workers,
                              ray_address=ray_address)
    if not run.exists("metrics.json"):  # a distributed rank other than 0
        return
    from attnas.reporting.display import rounded

    metrics = run.read_json("metrics.json")
    typer.echo(f"run: {run.path}")
    typer.echo(json.dumps(rounded({k: v for k, v in metrics.items() if isinstance(v, (int, float))}), indent=1))


@app.command()
@guard
def retrain(run_dir: Path = _finished_run_dir(),
            dataset: Optional[str] = typer.Option(None, "--dataset", help="Transfer to another dataset."),
            seeds: Optional[int] = typer.Option(None, "--seeds", help="Number of seeds (default retrain.seeds)."),
            init: Optional[str] = typer.Option(None, "--init", help="supernet or scratch."),
            set_: list[str] = typer.Option([], "--set", help="retrain.* overrides, e.g. retrain.epochs=300."),
            data_dir: Optional[Path] = _data_dir_option(),
            device: Optional[str] = _device_option(),
            workers: Optional[int] = typer.Option(None, "--workers", help="Train the seeds on N parallel Ray workers."),
            ray_address: Optional[str] = _ray_address_option()) -> None:
    """Retrain the found architecture with several seeds (mean and std go to metrics.json)."""
    from attnas.reporting.display import rounded
    from attnas.training.retraining import retrain as run_retrain

    if init not in (None, "supernet", "scratch"):
        fail(f"--init must be supernet or scratch, got {init!r}")
    s = run_retrain(run_dir, dataset=dataset, seeds=seeds, data_dir=data_dir, device=device, init=init,
                         overrides=set_, workers=workers, ray_address=ray_address)
    typer.echo(json.dumps(rounded({k: v for k, v in s.items() if k != "per_seed"}), indent=1))


@app.command()
@guard
def sweep(recipe: str = typer.Argument(..., help="Recipe name or YAML path."),
          seeds: int = typer.Option(1, "--seeds", help="Seeds per grid point (the recipe's seed, +1, ...)."),
          grid: list[str] = typer.Option([], "--grid", help="key=\\[v1, v2] (repeatable): search every combination."),
          set_: list[str] = typer.Option([], "--set", help="Override shared by every run (repeatable)."),
          out: Optional[Path] = typer.Option(None, "--out", help="Sweep folder (default runs/<name>-sweep-<time>)."),
          data_dir: Optional[Path] = _data_dir_option(),
          device: Optional[str] = _device_option(),
          workers: Optional[int] = typer.Option(None, "--workers", help="Run N searches at once on Ray."),
          ray_address: Optional[str] = _ray_address_option()) -> None:
    """Run independent searches (seeds x grid) into sub-run folders; summary.json has mean and std."""
    from attnas.scale.sweep import sweep as run_sweep

    s = run_sweep(recipe, set_, seeds=seeds, grid=grid, out=out, data_dir=data_dir, device=device, workers=workers,
                  ray_address=ray_address)
    for p in s["points"]:
        label = " ".join(p["point"]) or "(recipe)"
        cols = " ".join(f"{k[:-5]}={p[k]:.4f}+-{p[k[:-5] + '_std']:.4f}" for k in p
                        if k.endswith("_mean") and k.startswith(("val_", "test_")))
        typer.echo(f"{label}: {cols}  [{len(p['runs'])} runs]")


@app.command()
@guard
def compare(recipe: str = typer.Argument(..., help="A recipe that searches (name or YAML path)."),
            seeds: Optional[int] = typer.Option(None, "--seeds", help="Retraining seeds per row (default compare.seeds: 10, fewer for GPU recipes)."),
            baselines: Optional[str] = typer.Option(None, "--baselines",
                                                    help="Comma-separated baselines of the space (default: all it declares)."),
            search_seeds: Optional[int] = typer.Option(None, "--search-seeds",
                                                       help="Independent searches per searching row; the verdict pairs their means (default compare.search_seeds: 3 for one-shot recipes, else 1)."),
            random: bool = typer.Option(True, "--random/--no-random", help="Run random search at the same compute."),
            random_architecture: bool = typer.Option(False, "--random-architecture",
                                                     help="Also train one architecture drawn from the prior."),
            set_: list[str] = typer.Option([], "--set", help="Override for every row, e.g. task.dataset=graph-file."),
            out: Optional[Path] = typer.Option(None, "--out", help="Comparison folder (default runs/<name>-compare-<time>)."),
            data_dir: Optional[Path] = _data_dir_option(),
            device: Optional[str] = _device_option(),
            workers: Optional[int] = typer.Option(None, "--workers", help="Run rows, then seeds, on N Ray workers."),
            ray_address: Optional[str] = _ray_address_option()) -> None:
    """Is the searched attention better? Search, random search and the space's hand-designed
    baselines, each retrained with the same seeds; writes compare.json, compare.md and compare.png."""
    from attnas.comparison import compare as run_compare

    names = [b.strip() for b in baselines.split(",") if b.strip()] if baselines is not None else None
    result = run_compare(recipe, set_, seeds=seeds, baselines=names, random=random, out=out, data_dir=data_dir,
                         device=device, workers=workers, ray_address=ray_address, search_seeds=search_seeds,
                         random_architecture=random_architecture)
    metric = result["metric"]
    k = result.get("search_seeds", 1)
    for r in result["rows"]:
        t = r["test"]
        line = (f"{r['name']:>12s}: test {metric} {t['mean']:.4f} +- {t['std']:.4f} "
                f"(95% CI {t['ci95'][0]:.4f}..{t['ci95'][1]:.4f}, {t['n']} seeds")
        if k > 1:
            line += f"; per search seed {', '.join(f'{x:.4f}' for x in r['test_per_search'])}"
        typer.echo(line + ")")
    for v in result["verdicts"]:
        typer.echo(f"{v['verdict']}: {v['sentence']}")


@app.command()
@guard
def bench(out: Path = typer.Option(Path("runs/bench"), "--out", help="Output folder (finished cells are kept: "
                                   "running again continues)."),
          seeds: int = typer.Option(100, "--seeds", help="Seeds per cell (seed k: the same first draws for every strategy)."),
          budgets: str = typer.Option("25,50,100,200,500", "--budgets", help="Distinct architectures queried."),
          datasets: Optional[str] = typer.Option(None, "--datasets", help="NAS-Bench-Graph datasets (default: all nine)."),
          strategy: list[str] = typer.Option([], "--strategy", help="NAME or NAME:key=value,... (repeatable; default: "
                                             "table-random, regularized-evolution, local-search, table-evolution)."),
          constraint: list[str] = typer.Option([], "--constraint", help="COST=LIMIT for every strategy, e.g. "
                                               "params=1.2e6 or latency_ms=4 (repeatable)."),
          objectives: Optional[str] = typer.Option(None, "--objectives", help="e.g. val_score,params: keep Pareto "
                                                   "fronts and compare their hypervolume.")) -> None:
    """Search strategies on NAS-Bench-Graph's tables: anytime curves and paired tests against random search;
    writes bench.json, bench.md and figures/ (needs attnas\\[nasbench])."""
    from attnas.bench import DATASETS, DEFAULT_STRATEGIES, run_bench
    from attnas.core.errors import ConfigError

    try:
        budget_list = [int(b) for b in budgets.split(",") if b.strip()]
    except ValueError:
        raise ConfigError(f"--budgets: comma-separated integers, got {budgets!r}") from None
    names = [d.strip() for d in datasets.split(",") if d.strip()] if datasets else list(DATASETS)
    limits = {}
    for item in constraint:
        name, eq, limit = item.partition("=")
        if not eq:
            raise ConfigError(f"--constraint: expected COST=LIMIT (e.g. params=1.2e6), got {item!r}")
        limits[name.strip()] = limit.strip()
    run_bench(out, strategy or DEFAULT_STRATEGIES, names, budget_list, seeds,
              log=lambda line: typer.echo(line, err=True), constraints=limits or None,
              objectives=[o.strip() for o in objectives.split(",") if o.strip()] if objectives else None)
    typer.echo(f"bench: {out / 'bench.md'}")


@app.command()
@guard
def evaluate(run_dir: Path = _finished_run_dir(),
             data_dir: Optional[Path] = _data_dir_option(),
             device: Optional[str] = _device_option()) -> None:
    """Score the run's final model on the validation and test splits."""
    from attnas import pipeline
    from attnas.reporting.display import rounded

    typer.echo(json.dumps(rounded(pipeline.evaluate(run_dir, data_dir=data_dir, device=device)), indent=1))


@app.command()
@guard
def report(run_dir: Path = typer.Argument(..., help="A run directory.")) -> None:
    """Write report.md with the search-progress figure and the architecture drawn."""
    from attnas.reporting.report import write_report

    typer.echo(str(write_report(run_dir)))


@app.command("export")
@guard
def export(run_dir: Path = _finished_run_dir(),
           pick: Optional[str] = typer.Option(None, "--pick", help="A Pareto-front member's index (0: best validation score) or "
                                                         "conditions like 'latency_ms<5' or 'params<=2e4,val_accuracy>0.8' "
                                                         "(the best validation score among the members that meet them)."),
           format_: Optional[str] = typer.Option(None, "--format", help="Export the final model: pytorch (state_dict), "
                                                 "safetensors, torch-export (.pt2) or onnx, with its architecture and "
                                                 "input sizes (attnas.load_model reads pytorch and safetensors)."),
           data_dir: Optional[Path] = typer.Option(None, "--data-dir", help="Data root, only for a model.pt from before "
                                                   "models stored their input sizes."),
           out: Optional[Path] = typer.Option(None, "--out", help="Where to write it (default RUN_DIR/picked.arch.json "
                                              "with --pick, RUN_DIR/export-FORMAT with --format).")) -> None:
    """Write the arch.json of a Pareto-front member (--pick), or the final model in a portable format (--format)."""
    if (pick is None) == (format_ is None):
        fail("give one of --pick (a Pareto-front member's arch.json) or --format (the final model)")
    if format_ is not None:
        from attnas.export.model_export import export_run

        info = export_run(run_dir, format_, out, data_dir=data_dir)
        check = info.get("check", {})
        checked = (f"; checked on example inputs: max |difference| {check['max_abs_diff']:.2g}"
                   if "max_abs_diff" in check else f"; not checked: {check['why']}" if "why" in check else "")
        typer.echo(f"{info['path']}/{info['file']}: {format_} export of the final model{checked}")
        if "other_sizes" in check:
            typer.echo(f"warning: it runs only at the traced input sizes; other sizes {check['other_sizes']}", err=True)
        return
    from attnas.costs.pareto import export_member

    path, member = export_member(run_dir, pick, out or Path(run_dir) / "picked.arch.json")
    typer.echo(f"{path}: front member {member['index']} "
               + " ".join(f"{k}={v:g}" for k, v in member["objectives"].items()))
    typer.echo(f"train it: attnas search {Path(run_dir) / 'config.yaml'} "
               f"--set 'strategy={{name: fixed, arch_file: {path}}}' --out RUN_DIR")


@app.command("check-arch")
@guard
def check_arch(arch_json: Path = typer.Argument(..., help="An arch.json file."),
               recipe: str = typer.Argument(..., help="The recipe whose space it belongs to.")) -> None:
    """Validate an architecture file against a recipe's space."""
    from attnas import pipeline

    arch, space = pipeline.check_arch_file(arch_json, recipe)
    typer.echo(f"ok: {space.describe(arch)}")


def tune_process() -> None:
    """Process-wide settings for training, made before any torch work.

    Sets the OpenMP wait policy (:func:`attnas.runtime.cpu_busy.choose_omp_wait_policy`, which
    measures how busy the CPUs are for a quarter of a second) and glibc's ``malloc``
    thresholds (:func:`attnas.runtime.allocator.keep_freed_memory`; ``ATTNAS_MALLOC=default`` keeps
    glibc's own).
    """
    from attnas.runtime.allocator import keep_freed_memory
    from attnas.runtime.cpu_busy import choose_omp_wait_policy

    choose_omp_wait_policy()
    keep_freed_memory()


def main() -> None:
    """Console-script entry point: runs the command, with the process tuned
    (:func:`tune_process`) for the commands in :data:`TUNED_COMMANDS`.

    A command line that does not parse (an unknown option, a value of the wrong type) is
    one line on stderr and exit status 2, like every other bad input.
    """
    try:
        code = app(obj={"tune_process": True}, standalone_mode=False)
    except Exception as exc:
        if not (is_click_exception(exc) and hasattr(exc, "format_message")):
            raise
        ctx = getattr(exc, "ctx", None)
        where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        typer.echo(f"error: {one_line(exc.format_message())}{where}", err=True)
        sys.exit(getattr(exc, "exit_code", 2))
    except KeyboardInterrupt:  # outside a command (a command's own Ctrl-C is handled by guard)
        typer.echo("error: interrupted", err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
