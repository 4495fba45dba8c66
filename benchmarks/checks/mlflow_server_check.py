"""Did ``--mlflow`` mirror a run to a real MLflow tracking server exactly? (issue 25)

The tests of ``--mlflow`` use a local store; this check reads back what a real server
(``mlflow server``, which needs the full ``mlflow`` package) holds for one finished run
folder and compares it, metric by metric, with the run's ``events.jsonl``: every
expected key present, the same number of points, the same steps and values (the
expected series are :func:`attnas.tracking.event_mirrors.scalars` of the events under
:func:`attnas.tracking.mlflow_mirror.metric_key`), and the MLflow run ``FINISHED``. Prints one
line per metric; exits 1 on any difference.

Usage (the server in its own environment: ``pip install mlflow``)::

    mlflow server --backend-store-uri sqlite:///mlflow.db --host 127.0.0.1 --port 5055 &
    attnas --threads 1 search autoattend-digits-quick --out runs/mlf --set strategy.supernet.epochs=40 \\
        --set 'strategy.objectives=[val_accuracy, params]' --mlflow http://127.0.0.1:5055 --mlflow-experiment check
    python -m benchmarks.checks.mlflow_server_check runs/mlf --uri http://127.0.0.1:5055 --experiment check
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path


def expected_series(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """``{metric key: [(step, value), ...]}`` that the run's events should have produced."""
    from attnas.tracking.event_mirrors import StepCounter
    from attnas.tracking.mlflow_mirror import metric_key

    counter = StepCounter()
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        if line.strip():
            step, pairs = counter(run_dir, json.loads(line))
            for tag, value in pairs:
                series[metric_key(tag)].append((step, value))
    return series


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--uri", required=True, help="the tracking server, e.g. http://127.0.0.1:5055")
    ap.add_argument("--experiment", default="attnas")
    args = ap.parse_args()

    from mlflow.tracking import MlflowClient

    from attnas.tracking.mlflow_mirror import RUN_DIR_TAG

    client = MlflowClient(tracking_uri=args.uri)
    experiment = client.get_experiment_by_name(args.experiment)
    if experiment is None:
        print(f"no experiment '{args.experiment}' at {args.uri}")
        return 1
    tag = str(args.run_dir.resolve())
    runs = [r for r in client.search_runs([experiment.experiment_id]) if r.data.tags.get(RUN_DIR_TAG) == tag]
    if len(runs) != 1:
        print(f"{len(runs)} MLflow runs tagged {RUN_DIR_TAG}={tag} (expected 1)")
        return 1
    run = runs[0]
    expected = expected_series(args.run_dir)
    bad = 0
    print(f"MLflow run {run.info.run_name} ({run.info.run_id}): {run.info.status}")
    bad += run.info.status != "FINISHED"
    for key in sorted(set(expected) | set(run.data.metrics)):
        want = sorted(expected.get(key, []))
        got = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
        same = len(want) == len(got) and all(
            ws == gs and abs(wv - gv) <= 1e-6 * max(1.0, abs(wv)) for (ws, wv), (gs, gv) in zip(want, got))
        bad += not same
        print(f"{'ok ' if same else 'BAD'} {key}: {len(want)} expected, {len(got)} on the server")
    print(f"{len(expected)} metrics, {sum(map(len, expected.values()))} points: "
          + ("all mirrored exactly" if not bad else f"{bad} differences"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
