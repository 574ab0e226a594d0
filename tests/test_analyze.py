"""`kerasbatch.analyze` and `kerasbatch analyze`: its figures are the builders'."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import kerasbatch
from kerasbatch.__main__ import _without_native_logs, main
from kerasbatch.analysis import BACKEND_COSTS, read_lengths
from kerasbatch.io import write_dataset

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NUM_EPOCHS = 3


def make_data(num_elements=300, seed=0):
    """Token sequences with lognormal lengths in [1, 100] (tokens >= 1, so
    0 is padding) and per-example labels."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(3.0, 0.7, num_elements).astype(int), 1, 100)
    x = [rng.integers(1, 50, n).astype(np.int32) for n in lengths]
    return x, rng.integers(0, 2, num_elements).astype(np.float32), lengths


@pytest.fixture(scope="module")
def data():
    return make_data()


@pytest.fixture(scope="module")
def analysis(data):
    x, _, _ = data
    return kerasbatch.analyze(
        x,
        batch_size=16,
        epochs=NUM_EPOCHS,
        backend="jax",
        num_buckets=(4, 8),
        verbose=0,
    )


def passes(dataset, count):
    """The `(x tensor shapes, real positions, fed positions)` of `count`
    passes over a built dataset (each pass is the next epoch). Rows whose
    sample weights are all 0 are filler: their positions are padding."""
    epochs = []
    for _ in range(count):
        shapes, real, fed = set(), 0, 0
        for batch in dataset:
            x, weights = batch[0], batch[2] if len(batch) == 3 else None
            tokens = (x["x"] if isinstance(x, dict) else x).numpy()
            shapes.add(tokens.shape)
            rows = np.ones(len(tokens), bool)
            if weights is not None:
                rows = weights.numpy().reshape(len(tokens), -1).max(axis=1) > 0
            real += int((tokens[rows] != 0).sum())
            fed += tokens.size
        epochs.append((shapes, real, fed))
    return epochs


@pytest.mark.backend
def test_the_table_is_what_the_built_builders_feed(data, analysis):
    x, y, lengths = data
    rows = {row.name: row for row in analysis.rows}
    chosen = [
        analysis.recommended,
        analysis.recommended_unpacked,
        rows["padded"],
        rows["sorted"],
        rows["buckets 8"],
    ]
    assert analysis.recommended.packed  # on JAX, one shape wins
    for row in chosen:
        builder = row.make_builder()
        dataset = builder.build(x, y)
        statistics = builder.statistics()
        assert statistics.padding_efficiency == row.padding_efficiency, row.name
        assert statistics.distinct_shapes == row.distinct_shapes, row.name
        assert len(builder.batch_shapes()) == row.distinct_shapes, row.name
        assert statistics.num_batches == row.steps_per_epoch, row.name
        assert int(dataset.cardinality()) == row.steps_per_epoch, row.name
        assert row.tokens_per_step == lengths.sum() / row.steps_per_epoch
        later = {
            tuple(shape["x"])
            for epoch in range(1, NUM_EPOCHS)
            for shape in builder.batch_shapes(epoch)
        } - {tuple(shape["x"]) for shape in builder.batch_shapes(0)}
        assert len(later) == row.new_shapes_later, row.name
        # What iterating the dataset shows: one pass is one epoch.
        seen = passes(dataset, NUM_EPOCHS)
        first_shapes, real, fed = seen[0]
        assert len(first_shapes) == row.distinct_shapes, row.name
        assert real == lengths.sum()
        assert real / fed == pytest.approx(row.padding_efficiency, abs=1e-12)
        later_seen = set().union(*(shapes for shapes, _, _ in seen[1:]))
        assert len(later_seen - first_shapes) == row.new_shapes_later, row.name
        total_shapes = row.distinct_shapes + row.new_shapes_later
        assert row.compile_seconds == pytest.approx(6.5 * total_shapes)


def test_rows_estimates_and_recommendation(analysis, data):
    names = [row.name for row in analysis.rows]
    assert names == [
        "padded",
        "sorted",
        "buckets 4",
        "buckets 8",
        "buckets 4, tokens",
        "buckets 8, tokens",
        "packed 128",
    ]
    costs = BACKEND_COSTS["jax"]
    for row in analysis.rows:
        builder = row.make_builder()
        builder.adapt(data[2])
        plans = [builder.plan(epoch) for epoch in range(NUM_EPOCHS)]
        positions = sum(int(p.padded_positions().sum()) for p in plans)
        shapes = row.distinct_shapes + row.new_shapes_later
        expected = (
            positions * costs.seconds_per_position
            + NUM_EPOCHS * row.steps_per_epoch * costs.seconds_per_step
            + shapes * 6.5
        )
        assert row.estimated_seconds == pytest.approx(expected), row.name
    assert analysis.recommended is min(analysis.rows, key=lambda r: r.estimated_seconds)
    unpacked = [row for row in analysis.rows if not row.packed]
    assert analysis.recommended_unpacked is min(
        unpacked, key=lambda r: r.estimated_seconds
    )
    # Bounded shapes on JAX: the shape-per-batch rows are never recommended.
    assert analysis.recommended_unpacked.new_shapes_later == 0
    assert analysis.recommended_unpacked.arguments["pad_to_bucket"] is True
    # The default budget: batch size x the 90th percentile length.
    p90 = int(np.quantile(data[2], 0.9, method="higher"))
    assert analysis.max_tokens == 16 * p90
    packed = analysis.rows[-1]
    assert packed.arguments == {
        "sequence_length": 128,
        "batch_size": 16 * p90 // 128,
        "remainder": "even",
    }
    assert packed.builder_line == (
        f'kerasbatch.PackedBuilder(128, batch_size={16 * p90 // 128}, remainder="even")'
    )


def test_backends_weigh_steps_padding_and_compiles(data):
    lengths = data[2]

    def run(backend, seconds):
        return kerasbatch.analyze(
            lengths,
            batch_size=16,
            epochs=2,
            backend=backend,
            compile_seconds_per_shape=seconds,
            num_buckets=(4, 8),
            verbose=0,
        )

    # Compiles count on JAX only.
    jax_slow, jax_free = run("jax", 100.0), run("jax", 0.0)
    assert jax_slow.rows[1].estimated_seconds > jax_free.rows[1].estimated_seconds
    for backend in ("torch", "tensorflow"):
        slow, free = run(backend, 100.0), run(backend, 0.0)
        assert [r.estimated_seconds for r in slow.rows] == [
            r.estimated_seconds for r in free.rows
        ]
        assert slow.rows[1].compile_seconds == 100.0 * (
            slow.rows[1].distinct_shapes + slow.rows[1].new_shapes_later
        )
    # torch: per-step overhead rules, so the fewest steps win.
    torch = run("torch", 6.5)
    unpacked = [row for row in torch.rows if not row.packed]
    assert torch.recommended_unpacked.steps_per_epoch == min(
        row.steps_per_epoch for row in unpacked
    )
    assert "max_tokens" in torch.recommended_unpacked.arguments
    # tensorflow without XLA: padding dominates and shapes cost nothing, so
    # it takes more buckets (less padding) than JAX, which pays compiles.
    tensorflow, jax = run("tensorflow", 6.5), run("jax", 6.5)
    assert (
        tensorflow.recommended_unpacked.padding_efficiency
        > jax.recommended_unpacked.padding_efficiency
    )


def test_a_measured_compile_cost_replaces_the_defaults(data):
    from kerasbatch.tuner import CompileCost

    cost = CompileCost(
        seconds_per_shape=2.0,
        seconds_per_position=1e-6,
        seconds_per_step=0.01,
        epochs=2,
    )
    analysis = kerasbatch.analyze(
        data[2],
        batch_size=16,
        epochs=2,
        backend="torch",
        compile_seconds_per_shape=cost,
        num_buckets=(4,),
        verbose=0,
    )
    assert analysis.costs.seconds_per_position == 1e-6
    assert analysis.costs.compiles
    for row in analysis.rows:
        if row.packed:
            continue
        builder = row.make_builder()
        builder.adapt(data[2])
        estimate = cost.estimate(builder)  # the tuner's estimate, the same
        assert row.estimated_seconds == pytest.approx(estimate.training_time)
        assert row.compile_seconds == pytest.approx(estimate.compile_time)


def test_three_input_kinds_give_the_same_lengths(data, tmp_path):
    x, y, lengths = data
    np.save(tmp_path / "lengths.npy", lengths)
    (tmp_path / "lengths.txt").write_text(
        "\n".join(map(str, lengths)) + "\n\n", encoding="utf-8"
    )
    records = [
        {
            "tokens": tokens,
            "frames": np.zeros((len(tokens) + 1, 2), np.float32),
            "label": np.int64(label),
        }
        for tokens, label in zip(x[:40], y[:40], strict=True)
    ]
    write_dataset(tmp_path / "records", records)
    for source in (
        tmp_path / "lengths.npy",
        str(tmp_path / "lengths.txt"),
        x,
        lengths,
        lengths.tolist(),
    ):
        assert read_lengths(source).tolist() == lengths.tolist(), source
    records_dir = str(tmp_path / "records")
    frames = [len(tokens) + 1 for tokens in x[:40]]  # the longer feature
    assert read_lengths(records_dir, verbose=0).tolist() == frames
    assert (
        read_lengths(os.path.join(records_dir, "__manifest__.json"), verbose=0).tolist()
        == frames
    )
    assert read_lengths(records_dir, features=["tokens"], verbose=0).tolist() == [
        len(tokens) for tokens in x[:40]
    ]
    from_records = kerasbatch.analyze(
        records_dir, batch_size=8, epochs=2, backend="jax", verbose=0
    )
    from_array = kerasbatch.analyze(
        np.array(frames), batch_size=8, epochs=2, backend="jax", verbose=0
    )
    assert from_records.to_dict() == from_array.to_dict()
    with pytest.raises(ValueError, match="no feature 'words'.*'tokens'"):
        read_lengths(records_dir, features=["words"])
    with pytest.raises(ValueError, match="'label' .* is not variable-length"):
        read_lengths(records_dir, features=["label"])


@pytest.mark.parametrize(
    ("make_source", "error", "match"),
    [
        (
            lambda tmp: tmp / "missing.npy",
            FileNotFoundError,
            "missing.npy does not exist",
        ),
        (lambda tmp: np.array([], np.int64), ValueError, "lengths is empty"),
        (lambda tmp: [], ValueError, "lengths is empty"),
        (lambda tmp: np.array([3, 4, -2]), ValueError, r"lengths\[2\] = -2"),
        (
            lambda tmp: np.array([0, 0]),
            ValueError,
            "Every one of the 2 sequences is empty",
        ),
        (lambda tmp: np.array([1.5, 2.0]), ValueError, "integer-valued"),
        (lambda tmp: np.ones((2, 3), np.int64), ValueError, "1-D"),
    ],
)
def test_bad_lengths_say_what_is_wrong(tmp_path, make_source, error, match):
    with pytest.raises(error, match=match):
        kerasbatch.analyze(make_source(tmp_path), backend="jax", verbose=0)


def test_bad_files_name_the_file_and_line(tmp_path):
    text = tmp_path / "lengths.txt"
    text.write_text("12\n7\n\nseven\n3\n", encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"lengths.txt, line 4: 'seven' is not an integer"
    ):
        kerasbatch.analyze(text, backend="jax", verbose=0)
    text.write_text("12\n-3\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"lengths.txt: .*lengths\[1\] = -3"):
        kerasbatch.analyze(text, backend="jax", verbose=0)
    text.write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match="lengths.txt: lengths is empty"):
        kerasbatch.analyze(text, backend="jax", verbose=0)
    other = tmp_path / "lengths.csv"
    other.write_text("1,2\n", encoding="utf-8")
    with pytest.raises(ValueError, match="give a .npy or .txt file"):
        kerasbatch.analyze(other, backend="jax", verbose=0)
    empty_dir = tmp_path / "records"
    empty_dir.mkdir()
    with pytest.raises(FileNotFoundError, match="records has no __manifest__.json"):
        kerasbatch.analyze(empty_dir, backend="jax", verbose=0)


def test_bad_settings_say_what_is_wrong():
    lengths = np.array([5, 9, 40])
    with pytest.raises(
        ValueError,
        match=r"backend must be one of \['jax', 'tensorflow', 'torch'\], got 'mxnet'",
    ):
        kerasbatch.analyze(lengths, backend="mxnet")
    with pytest.raises(
        ValueError, match="max_tokens=30 is less than the longest sequence \\(40\\)"
    ):
        kerasbatch.analyze(lengths, backend="jax", max_tokens=30)
    with pytest.raises(
        ValueError, match="sequence_length=32 is shorter than the longest"
    ):
        kerasbatch.analyze(lengths, backend="jax", sequence_length=32)
    with pytest.raises(ValueError, match="epochs must be a positive int, got 0"):
        kerasbatch.analyze(lengths, backend="jax", epochs=0)
    with pytest.raises(ValueError, match="compile_seconds_per_shape must be"):
        kerasbatch.analyze(lengths, backend="jax", compile_seconds_per_shape=-1)
    with pytest.raises(ValueError, match="features applies to a TFRecord"):
        kerasbatch.analyze(lengths, backend="jax", features=["x"])


def test_the_report_and_its_parts(analysis, tmp_path):
    text = str(analysis)
    assert text.startswith(f"300 sequences, {analysis.lengths.sum()} tokens: lengths")
    assert "█" in analysis.histogram()
    table = analysis.table()
    assert table.splitlines()[0].split()[:3] == ["strategy", "pad.", "eff."]
    assert "packed 128 *" in table and "+" in table
    recommendation = analysis.recommendation()
    assert "Recommended on jax, 3 epochs: packed 128" in recommendation
    assert f"builder = {analysis.recommended.builder_line}" in recommendation
    assert f"builder = {analysis.recommended_unpacked.builder_line}" in recommendation
    assert "packed_segment_ids" in recommendation
    assert repr(analysis).startswith("Analysis(300 sequences, 7 strategies")
    as_dict = json.loads(json.dumps(analysis.to_dict()))
    assert as_dict["recommended"] == "packed 128"
    assert sum(as_dict["histogram"]["counts"]) == 300
    assert (
        as_dict["rows"][0]["builder_line"] == "kerasbatch.PaddedBuilder(batch_size=16)"
    )
    path = tmp_path / "analysis.png"
    figure = analysis.plot(str(path))
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert len(figure.axes) == 2


def test_bucket_rows_with_the_same_boundaries_are_left_out():
    lengths = np.array([1, 2, 3, 1, 2, 3, 1, 2, 3, 3])  # 3 distinct lengths
    analysis = kerasbatch.analyze(
        lengths,
        batch_size=2,
        epochs=1,
        backend="tensorflow",
        num_buckets=(4, 8),
        verbose=0,
    )
    assert [row.name for row in analysis.rows] == [
        "padded",
        "sorted",
        "buckets 4",
        "buckets 4, tokens",
        "packed 64",
    ]


def test_the_command_in_process(tmp_path, capsys, data):
    np.save(tmp_path / "lengths.npy", data[2])
    main(
        [
            "analyze",
            str(tmp_path / "lengths.npy"),
            "--json",
            "--epochs",
            "2",
            "--backend",
            "torch",
            "--buckets",
            "4,8",
            "--batch-size",
            "16",
        ]
    )
    result = json.loads(capsys.readouterr().out)
    assert result["backend"] == "torch" and result["epochs"] == 2
    assert len(result["rows"]) == 7
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", str(tmp_path / "missing.npy")])
    assert exit_info.value.code == 2
    assert "missing.npy does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["analyze", str(tmp_path / "lengths.npy"), "--backend", "mxnet"])
    assert "invalid choice: 'mxnet'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["analyze", str(tmp_path / "lengths.npy"), "--buckets", "4,eight"])
    assert "--buckets must be comma-separated ints" in capsys.readouterr().err


def test_the_command_end_to_end(tmp_path, data):
    np.save(tmp_path / "lengths.npy", data[2])
    plot = tmp_path / "out.png"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kerasbatch",
            "analyze",
            str(tmp_path / "lengths.npy"),
            "--plot",
            str(plot),
            "--epochs",
            "2",
            "--backend",
            "jax",
            "--buckets",
            "4,8",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={  # as a user runs it: the command sets the log level itself
            **{k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"},
            "PYTHONIOENCODING": "utf-8",
        },
    )
    assert result.returncode == 0, result.stderr
    assert "strategy" in result.stdout and "pad. eff." in result.stdout
    assert "Recommended on jax, 2 epochs: packed 128" in result.stdout
    assert "builder = kerasbatch.PackedBuilder(128" in result.stdout
    assert "Without packing:" in result.stdout
    assert plot.read_bytes()[:8] == PNG_MAGIC
    # TensorFlow's native log lines of its import are held back.
    assert "absl::InitializeLog" not in result.stderr
    assert "I0000" not in result.stderr and "cuInit" not in result.stderr


def test_native_log_lines_are_told_apart():
    held = (
        "WARNING: All log messages before absl::InitializeLog() is called are "
        "written to STDERR\n"
        "I0000 00:00:1795671086.449721    4020 port.cc:153] oneDNN custom operations\n"
        "I0000 00:00:1795671086.487958    4020 cpu_feature_guard.cc:227] This binary\n"
        "To enable the following instructions: AVX2, rebuild TensorFlow.\n"
        "/x/module.py:3: UserWarning: a Python warning\n"
        "E0000 00:00:1795671289.863681    7014 cuda_platform.cc:52] failed call to cuInit\n"
    )
    assert (
        _without_native_logs(held, 3)
        == "/x/module.py:3: UserWarning: a Python warning\n"
    )
    assert _without_native_logs(held, 2).endswith("failed call to cuInit\n")
    assert "oneDNN" not in _without_native_logs(held, 2)
