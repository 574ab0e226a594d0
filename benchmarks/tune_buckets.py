"""Bucket tuning on the reference workloads: search quality and speed.

For each reference workload (`workloads.py`: `lognormal`, `bimodal`):

1. `padding_efficiency`: the best configuration of an exhaustive grid over
   the default `BucketSearchSpace` (keras-tuner's GridSearch oracle), then
   20-trial searches, 10 seeds each, with the Bayesian oracle (the tuner's
   default) and the random oracle; target: every 20-trial search with the
   default oracle within 1 % of the grid's best.
2. `throughput`: a 12-trial search training a small GRU (the model of
   `compare_builders.py`) on each candidate's batches, then the best found
   builder and `BucketBuilder()`'s defaults trained side by side with
   `model.fit` (epochs interleaved); target: the best found trains at least as
   many real positions per second as the defaults.

Also times a 20-trial `padding_efficiency` search on 1 million lengths.

Run from the repository root (about 10 minutes on 2 CPU cores):

    .venv/bin/python benchmarks/tune_buckets.py --output benchmarks/out/tune.json \
        --plot benchmarks/tune.png
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import keras
import numpy as np

import kerasbatch
from kerasbatch.tuner import BucketSearchSpace, BucketTuner

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402
from compare_builders import (  # noqa: E402
    EpochTimer,
    gru_model,
    log,
    machine_info,
    rotated,
)

EFFICIENCY_TOLERANCE = 0.01
SEEDS = tuple(range(1, 11))
ORACLES = ("bayesian", "random")


def search(directory, **kwargs):
    return BucketTuner(directory=directory, overwrite=True, **kwargs)


def timed_search(directory, lengths, **kwargs):
    """A `padding_efficiency` search on `lengths`; returns the tuner and the
    seconds it took."""
    tuner = search(directory, **kwargs)
    start = time.perf_counter()
    tuner.search(lengths=lengths, verbose=0)
    return tuner, time.perf_counter() - start


def best_score(tuner):
    return float(tuner.oracle.get_best_trials(1)[0].score)


def describe(builder):
    sizing = (
        f"max_tokens={builder.max_tokens}"
        if builder.max_tokens
        else f"batch_size={builder.batch_size}"
    )
    return (
        f"{builder.boundaries}/{builder.num_buckets}, {sizing}, "
        f"pad_to_bucket={builder.pad_to_bucket}"
    )


def efficiency_part(name, lengths, directory):
    space = BucketSearchSpace()
    grid, grid_seconds = timed_search(
        directory,
        lengths,
        oracle="grid",
        max_trials=space.size(),
        search_space=space,
        project_name=f"{name}-grid",
    )
    grid_best = best_score(grid)
    log(f"{name}: grid of {space.size()} configurations, best {grid_best:.4f}")
    searches = {}
    for oracle, seed in [(o, s) for o in ORACLES for s in SEEDS]:
        tuner, seconds = timed_search(
            directory,
            lengths,
            oracle=oracle,
            seed=seed,
            max_trials=20,
            search_space=space,
            project_name=f"{name}-{oracle}-{seed}",
        )
        score = best_score(tuner)
        searches[f"{oracle} seed {seed}"] = {
            "best": score,
            "ratio": score / grid_best,
            "seconds": seconds,
            "config": describe(tuner.get_best_builder()),
        }
        log(f"{name}: {oracle} seed {seed}: {score:.4f} ({score / grid_best:.4f})")
    return {
        "grid_size": space.size(),
        "grid_best": grid_best,
        "grid_best_config": describe(grid.get_best_builder()),
        "grid_seconds": grid_seconds,
        "searches": searches,
        "worst_ratio": {
            oracle: min(s["ratio"] for k, s in searches.items() if k.startswith(oracle))
            for oracle in ORACLES
        },
        "within_tolerance": {
            oracle: sum(
                s["ratio"] >= 1 - EFFICIENCY_TOLERANCE
                for k, s in searches.items()
                if k.startswith(oracle)
            )
            for oracle in ORACLES
        },
    }


def throughput_part(name, x, y, args, directory):
    space = BucketSearchSpace(batch_size=(32, 64))
    tuner = search(
        directory,
        hypermodel=lambda hp: gru_model(),
        objective="throughput",
        oracle="random",
        seed=1,
        max_trials=args.throughput_trials,
        search_space=space,
        throughput_steps=args.throughput_steps,
        project_name=f"{name}-throughput",
    )
    start = time.perf_counter()
    tuner.search(x, y, verbose=0)
    search_seconds = time.perf_counter() - start
    best = tuner.get_best_builder()
    log(f"{name}: throughput search {search_seconds:.0f} s, best {describe(best)}")
    candidates = {"best found": best, "defaults": kerasbatch.BucketBuilder()}
    runs = {}
    for label, builder in candidates.items():
        model = gru_model()
        timer = EpochTimer()
        runs[label] = (builder, model, builder.build(x, y), timer)
    for epoch in range(args.epochs + 1):  # epoch 0 traces; interleaved epochs
        for label in rotated(list(runs), epoch):
            builder, model, dataset, timer = runs[label]
            model.fit(
                dataset,
                initial_epoch=epoch,
                epochs=epoch + 1,
                verbose=0,
                shuffle=False,
                callbacks=[kerasbatch.callbacks.EpochReshuffle(builder), timer],
            )
    results = {}
    for label, (builder, _, _, timer) in runs.items():
        positions = [
            builder.plan(e).real_positions.sum() for e in range(args.epochs + 1)
        ]
        rates = [p / s for p, s in zip(positions[1:], timer.seconds[1:], strict=True)]
        results[label] = {
            "config": describe(builder),
            "padding_efficiency": builder.statistics(0).padding_efficiency,
            "distinct_shapes": builder.statistics(0).distinct_shapes,
            "batches": builder.statistics(0).num_batches,
            "epoch_seconds": statistics.median(timer.seconds[1:]),
            "first_epoch_seconds": timer.seconds[0],
            "positions_per_second": statistics.median(rates),
        }
        log(f"{name}: {label}: {results[label]}")
    ratio = (
        results["best found"]["positions_per_second"]
        / results["defaults"]["positions_per_second"]
    )
    return {
        "search_seconds": search_seconds,
        "trials": trial_table(tuner),
        "results": results,
        "ratio": ratio,
        "tuner": tuner,
    }


def trial_table(tuner):
    rows = []
    for trial in tuner.oracle.trials.values():
        if trial.status != "COMPLETED":
            continue
        hp = trial.hyperparameters
        rows.append(
            {
                "config": f"{hp.get('boundaries')}/{hp.get('num_buckets')}, "
                f"batch {hp.get('batch_size')}, pad_to_bucket={hp.get('pad_to_bucket')}",
                "batch_size": hp.get("batch_size"),
                "throughput": trial.metrics.get_last_value("throughput"),
                "padding_efficiency": trial.metrics.get_last_value(
                    "padding_efficiency"
                ),
                "distinct_shapes": trial.metrics.get_last_value("distinct_shapes"),
            }
        )
    return rows


def million_lengths_search(directory):
    lengths = workloads.draw_lognormal_lengths(np.random.default_rng(0), 1_000_000)
    tuner, seconds = timed_search(
        directory, lengths, max_trials=20, seed=1, project_name="million"
    )
    log(f"20-trial search on 1M lengths: {seconds:.1f} s, best {best_score(tuner):.4f}")
    return {"seconds": seconds, "best": best_score(tuner)}


def print_report(report):
    print("\n## padding_efficiency: 20-trial searches vs exhaustive grid\n")
    print("| workload | grid best (40 configs) | search | best found | ratio | s |")
    print("|---|---:|---|---:|---:|---:|")
    for name, part in report["efficiency"].items():
        for label, s in part["searches"].items():
            print(
                f"| {name} | {part['grid_best']:.4f} | {label} | {s['best']:.4f} "
                f"| {s['ratio']:.4f} | {s['seconds']:.1f} |"
            )
    print("\n## throughput: best found vs BucketBuilder() defaults (GRU)\n")
    print("| workload | builder | config | pad eff | shapes | epoch s | positions/s |")
    print("|---|---|---|---:|---:|---:|---:|")
    for name, part in report["throughput"].items():
        for label, r in part["results"].items():
            print(
                f"| {name} | {label} | {r['config']} | {r['padding_efficiency']:.3f} "
                f"| {r['distinct_shapes']} | {r['epoch_seconds']:.2f} "
                f"| {r['positions_per_second']:,.0f} |"
            )
    print("\n## targets\n")
    for target in report["targets"]:
        verdict = "PASS" if target["passed"] else "FAIL"
        print(f"- {target['target']}: **{verdict}** {target['value']}")


def targets(report):
    rows = []
    for name, part in report["efficiency"].items():
        worst = part["worst_ratio"]["bayesian"]
        rows.append(
            {
                "target": f"{name}: every 20-trial padding_efficiency search (default "
                "oracle, 10 seeds) within 1 % of the exhaustive grid's best",
                "value": f"worst {worst:.4f}; within 1 %: "
                + ", ".join(
                    f"{oracle} {count}/{len(SEEDS)}"
                    for oracle, count in part["within_tolerance"].items()
                ),
                "passed": worst >= 1 - EFFICIENCY_TOLERANCE,
            }
        )
    for name, part in report["throughput"].items():
        rows.append(
            {
                "target": f"{name}: best throughput configuration trains at least "
                "as fast as BucketBuilder() defaults",
                "value": f"{part['ratio']:.2f}x",
                "passed": part["ratio"] >= 1.0,
            }
        )
    return rows


def plot(report, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["throughput"])
    figure, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 4))
    for ax, name in zip(np.atleast_1d(axes), names, strict=True):
        rows = report["throughput"][name]["trials"]
        shapes = [r["distinct_shapes"] for r in rows]
        for batch_size, marker in zip(
            sorted({r["batch_size"] for r in rows}), "os^D", strict=False
        ):
            chosen = [r for r in rows if r["batch_size"] == batch_size]
            points = ax.scatter(
                [r["padding_efficiency"] for r in chosen],
                [r["throughput"] for r in chosen],
                c=[r["distinct_shapes"] for r in chosen],
                vmin=min(shapes),
                vmax=max(shapes),
                marker=marker,
                label=f"batch size {batch_size}",
            )
        figure.colorbar(points, ax=ax, label="distinct shapes per epoch")
        best = max(rows, key=lambda r: r["throughput"])
        ax.annotate(
            best["config"],
            (best["padding_efficiency"], best["throughput"]),
            xytext=(-10, -12),
            textcoords="offset points",
            ha="right",
            fontsize=7,
        )
        ax.legend(loc="lower left", fontsize=8)
        ax.set_xlabel("padding efficiency")
        ax.set_ylabel("throughput (real positions / s, compile included)")
        ax.set_title(f"{name}: throughput search, {len(rows)} trials")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workload", default="all", choices=[*workloads.WORKLOADS, "all"]
    )
    parser.add_argument("--num-elements", type=int, default=workloads.NUM_ELEMENTS)
    parser.add_argument("--throughput-trials", type=int, default=12)
    parser.add_argument("--throughput-steps", type=int, default=150)
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs")
    parser.add_argument("--output")
    parser.add_argument("--plot")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    names = workloads.WORKLOADS if args.workload == "all" else (args.workload,)
    start = time.perf_counter()
    report = {"efficiency": {}, "throughput": {}}
    with tempfile.TemporaryDirectory() as directory:
        for name in names:
            x, y, lengths = workloads.sequences(name, args.num_elements)
            report["efficiency"][name] = efficiency_part(name, lengths, directory)
            report["throughput"][name] = throughput_part(name, x, y, args, directory)
        report["million_lengths"] = million_lengths_search(directory)
        tuners = {n: p.pop("tuner") for n, p in report["throughput"].items()}
        if args.plot:
            plot(report, args.plot)
            for name, tuner in tuners.items():
                figure = kerasbatch.tuner.plot_trials(tuner)
                figure.savefig(
                    args.plot.replace(".png", f"_{name}_trials.png"), dpi=100
                )
    report["targets"] = targets(report)
    report["wall_seconds"] = time.perf_counter() - start
    report["command"] = " ".join([os.path.relpath(sys.executable), *sys.argv])
    report["machine"] = machine_info()
    print_report(report)
    print(
        f"\n20-trial search on 1M lengths: {report['million_lengths']['seconds']:.1f} s"
    )
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as f:
            json.dump(report, f, indent=2, default=float)
    return 0 if all(t["passed"] for t in report["targets"]) else 1


if __name__ == "__main__":
    keras.utils.set_random_seed(0)
    sys.exit(main())
