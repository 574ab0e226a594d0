"""`kerasbatch.analyze` and `kerasbatch analyze`: its figures are the builders'."""

import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

import numpy as np
import pytest

import kerasbatch
from kerasbatch.__main__ import _without_native_logs, main
from kerasbatch.io import write_dataset
from kerasbatch.planning import costs as costs_lib
from kerasbatch.planning.costs import BACKEND_COSTS
from kerasbatch.tools.lengths import read_lengths

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NUM_EPOCHS = 3
GUIDE = (
    pathlib.Path(__file__).resolve().parents[1]
    / "docs"
    / "guides"
    / "choosing-a-builder.md"
)


def make_data(num_elements=300, seed=0):
    """Token sequences with lognormal lengths in [1, 100] (tokens >= 1, so
    0 is padding) and per-example labels."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(3.0, 0.7, num_elements).astype(int), 1, 100)
    x = [rng.integers(1, 50, n).astype(np.int32) for n in lengths]
    return x, rng.integers(0, 2, num_elements).astype(np.float32), lengths


def workload(name, num_elements=3000):
    """Small versions of three kinds of lengths: `clustered` (as the
    characters of the lines of a license text: most 60 to 75, a tenth
    shorter), the `lognormal` and `bimodal` reference workloads."""
    rng = np.random.default_rng(0)
    if name == "clustered":
        lengths = np.rint(rng.normal(67, 3, num_elements)).clip(55, 82)
        short = rng.random(num_elements) < 0.1
        lengths[short] = rng.integers(3, 55, short.sum())
    elif name == "lognormal":
        lengths = rng.lognormal(3.5, 0.7, num_elements).astype(int).clip(1, 512)
    else:
        num_short = int(0.7 * num_elements)
        lengths = np.concatenate(
            [
                rng.normal(12, 4, num_short),
                rng.normal(200, 50, num_elements - num_short),
            ]
        )
        lengths = np.rint(rng.permutation(lengths)).clip(1, 512)
    return lengths.astype(np.int64)


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
        device="gpu",
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
        rows["buckets 1"],
        rows["buckets 8"],
        rows["buckets 4, tokens"],
        next(
            row for row in analysis.rows if row.packed and row != analysis.recommended
        ),
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
        assert row.compile_seconds == pytest.approx(7.7 * total_shapes)


def test_rows_estimates_and_recommendation(analysis, data):
    lengths = data[2]
    p90 = int(np.quantile(lengths, 0.9, method="higher"))
    names = [row.name for row in analysis.rows]
    packed = [row for row in analysis.rows if row.packed]
    assert names == [
        "padded",
        "sorted",
        "buckets 1",
        "buckets 4",
        "buckets 8",
        "buckets 1, tokens",
        "buckets 4, tokens",
        "buckets 8, tokens",
        *(f"packed {row.arguments['sequence_length']}" for row in packed),
    ]
    # Packed rows of about 1, 2, 4 and 8 sequences of the 90th percentile
    # length, at least the longest, within the token budget.
    assert analysis.max_tokens == 16 * p90  # batch size x the 90th percentile
    assert analysis.sequence_lengths == tuple(
        sorted(
            {
                length
                for length in (-(-max(100, k * p90) // 64) * 64 for k in (1, 2, 4, 8))
                if length == 128 or length <= 16 * p90
            }
        )
    )
    assert len(packed) >= 2
    for row in packed:
        length = row.arguments["sequence_length"]
        assert row.arguments == {
            "sequence_length": length,
            "batch_size": 16 * p90 // length,
            "remainder": "even",
        }
        assert row.builder_line == (
            f"kerasbatch.PackedBuilder({length}, batch_size={16 * p90 // length}, "
            'remainder="even")'
        )
    costs = BACKEND_COSTS["jax"]["gpu"]
    for row in analysis.rows:
        builder = row.make_builder()
        builder.adapt(lengths)
        plans = [builder.plan(epoch) for epoch in range(NUM_EPOCHS)]
        positions = sum(int(p.padded_positions().sum()) for p in plans)
        shapes = row.distinct_shapes + row.new_shapes_later
        expected = (
            positions * costs.seconds_per_position
            + NUM_EPOCHS * row.steps_per_epoch * costs.seconds_per_step
            + shapes * costs.seconds_per_shape
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


@pytest.mark.parametrize("name", ["clustered", "lognormal", "bimodal"])
def test_candidates_hold_a_fixed_length_and_several_packed_rows(name):
    lengths = workload(name)
    longest = int(lengths.max())
    for backend, device in (("jax", "gpu"), ("torch", "cpu"), ("jax", "cpu")):
        analysis = kerasbatch.analyze(
            lengths, epochs=2, backend=backend, device=device, verbose=0
        )
        rows = {row.name: row for row in analysis.rows}
        fixed = rows["buckets 1"]  # every batch padded to the longest length
        assert fixed.boundaries == () and fixed.distinct_shapes == 1
        assert fixed.new_shapes_later == 0
        assert fixed.padding_efficiency == pytest.approx(
            lengths.sum() / (fixed.steps_per_epoch * 32 * longest), rel=0.02
        )
        packed = [row for row in analysis.rows if row.packed]
        assert len(packed) >= 2, [row.name for row in packed]
        assert {row.arguments["sequence_length"] for row in packed} == set(
            analysis.sequence_lengths
        )
        # The recommendation is the cheapest row of the table, with and
        # without packing.
        cheapest = min(row.estimated_seconds for row in analysis.rows)
        assert analysis.recommended.estimated_seconds == cheapest
        assert analysis.recommended_unpacked.estimated_seconds == min(
            row.estimated_seconds for row in analysis.rows if not row.packed
        )
        assert f"{analysis.recommended.name} *" in analysis.table()
    if name == "clustered":
        # Two sequences of about 67 do not fit a row of 128, so a row of 128
        # is two-thirds padding; the longer rows pack them.
        jax = kerasbatch.analyze(lengths, epochs=2, backend="jax", device="gpu")
        rows = {row.name: row for row in jax.rows}
        assert rows["packed 128"].padding_efficiency < 0.75
        assert jax.recommended.packed
        assert jax.recommended.padding_efficiency > 0.9


def test_each_estimate_names_its_hardware_and_a_cpu_gets_cpu_figures():
    lengths = workload("lognormal")

    def run(backend, device):
        return kerasbatch.analyze(
            lengths, epochs=2, backend=backend, device=device, verbose=0
        )

    for backend, devices in BACKEND_COSTS.items():
        for device, costs in devices.items():
            analysis = run(backend, device)
            assert analysis.costs == costs
            assert analysis.device_reason == "as asked"
            text = analysis.recommendation()
            assert f"Recommended for {backend} on a {device.upper()}" in text
            assert f"measured on {costs.hardware}" in text
            assert f"with {backend} on a {device.upper()}" in analysis.table()
    # On a CPU, torch spends its time on the positions: buckets beat
    # padding, as measured there; the GPU's figures (a step costs the
    # same whatever the padding) say otherwise.
    cpu, gpu = run("torch", "cpu"), run("torch", "gpu")
    assert cpu.costs.hardware.endswith("CPU cores")
    for analysis, buckets_win in ((cpu, True), (gpu, False)):
        rows = {row.name: row for row in analysis.rows}
        faster = rows["buckets 16"].estimated_seconds < rows["padded"].estimated_seconds
        assert faster is buckets_win, analysis.device
    # TensorFlow on a GPU: no figures, so no estimate and no recommendation.
    tensorflow = run("tensorflow", "gpu")
    assert tensorflow.costs is None and tensorflow.recommended is None
    assert {row.estimated_seconds for row in tensorflow.rows} == {None}
    assert "est. s" not in tensorflow.table()
    assert "No time estimate: analyze has no figures for tensorflow on a GPU" in str(
        tensorflow
    )
    assert tensorflow.to_dict()["recommended"] is None


def test_the_device_is_the_machines_unless_given(monkeypatch, tmp_path):
    lengths = workload("lognormal", 200)
    monkeypatch.setattr(costs_lib, "_GPU_PLACES", (str(tmp_path / "none"),))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    analysis = kerasbatch.analyze(lengths, backend="torch", epochs=1, verbose=0)
    assert analysis.device == "cpu"
    assert analysis.device_reason.startswith("this machine shows no GPU")
    (tmp_path / "gpu0").write_text("NVIDIA H200")
    monkeypatch.setattr(costs_lib, "_GPU_PLACES", (str(tmp_path),))
    analysis = kerasbatch.analyze(lengths, backend="torch", epochs=1, verbose=0)
    assert analysis.device == "gpu" and str(tmp_path) in analysis.device_reason
    assert f"on a GPU ({analysis.device_reason})" in analysis.recommendation()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    analysis = kerasbatch.analyze(lengths, backend="torch", epochs=1, verbose=0)
    assert analysis.device == "cpu"
    assert "CUDA_VISIBLE_DEVICES hides" in analysis.device_reason
    with pytest.raises(ValueError, match=r"device must be one of \('cpu', 'gpu'\)"):
        kerasbatch.analyze(lengths, backend="torch", device="tpu")


def test_the_compile_column_shows_only_where_shapes_compile():
    lengths = workload("bimodal", 500)

    def run(backend, device, seconds=None):
        return kerasbatch.analyze(
            lengths,
            epochs=2,
            backend=backend,
            device=device,
            compile_seconds_per_shape=seconds,
            num_buckets=(4, 8),
            verbose=0,
        )

    for backend in ("torch", "tensorflow"):
        analysis = run(backend, "cpu")
        header = analysis.table().splitlines()[0]
        assert "compile" not in header and header.endswith("est. s")
        assert "which compiles no shape" in analysis.table()
        assert "(no compiles)" in analysis.recommendation()
        assert {row.compile_seconds for row in analysis.rows} == {None}
        assert {row.to_dict()["compile_seconds"] for row in analysis.rows} == {None}
    jax = run("jax", "cpu")
    assert "compile s" in jax.table().splitlines()[0]
    per_shape = BACKEND_COSTS["jax"]["cpu"].seconds_per_shape
    assert f"shapes of all epochs x {per_shape:g} s" in jax.table()
    # Seconds per shape given: shapes cost that, on any backend (0: nothing).
    slow, free = run("torch", "cpu", 100.0), run("jax", "cpu", 0.0)
    assert "compile s" in slow.table() and "compile s" not in free.table()
    for row, cpu in zip(slow.rows, run("torch", "cpu").rows, strict=True):
        shapes = row.distinct_shapes + row.new_shapes_later
        assert row.compile_seconds == 100.0 * shapes
        assert row.estimated_seconds == pytest.approx(
            cpu.estimated_seconds + 100.0 * shapes
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
    assert "measured on your hardware with your model (a CompileCost)" in str(analysis)
    for row in analysis.rows:
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


TEXT = "Apache License\n\n  Version 2.0, January 2004  \r\nnaïve café\n   \n"


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [("words", [2, 4, 2]), ("chars", [14, 29, 10]), ("bytes", [14, 29, 12])],
)
def test_text_lines_are_counted_in_words_chars_or_bytes(tmp_path, tokens, expected):
    path = tmp_path / "LICENSE"  # any text file: a sequence per non-blank line
    path.write_bytes(TEXT.encode("utf-8"))
    assert read_lengths(path, tokens=tokens).tolist() == expected
    lines = ["Apache License", "  Version 2.0, January 2004  ", "naïve café"]
    assert read_lengths(lines, tokens=tokens).tolist() == expected
    analysis = kerasbatch.analyze(
        path, tokens=tokens, backend="torch", device="cpu", epochs=1, verbose=0
    )
    assert analysis.lengths.tolist() == expected


def test_a_tokenizer_counts_the_tokens_of_each_line(tmp_path):
    path = tmp_path / "sentences.md"
    path.write_text(TEXT, encoding="utf-8")
    seen = []

    def tokenizer(line):
        seen.append(line)
        return [ord(char) for char in line.strip()]

    analysis = kerasbatch.analyze(
        path, tokenizer=tokenizer, backend="jax", device="cpu", epochs=1, verbose=0
    )
    assert analysis.lengths.tolist() == [14, 25, 10]
    assert seen == ["Apache License", "  Version 2.0, January 2004  ", "naïve café"]
    with pytest.raises(TypeError, match="tokenizer must return a line's tokens"):
        read_lengths(path, tokenizer=lambda line: 3)
    with pytest.raises(ValueError, match="Give tokens or tokenizer, not both"):
        read_lengths(path, tokens="words", tokenizer=tokenizer)


def test_text_without_tokens_says_how_to_count_them(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("Apache License\nVersion 2.0\n", encoding="utf-8")
    with pytest.raises(
        ValueError,
        match=r"lines.txt, line 1: 'Apache License' is not an integer length; to "
        r"count the tokens of lines of text, give tokens='words', 'chars' or "
        r"'bytes' \(--tokens\)\.",
    ):
        read_lengths(path)
    with pytest.raises(ValueError, match="lengths is a list of str: give tokens="):
        read_lengths(["Apache License"])
    with pytest.raises(ValueError, match="tokens must be one of"):
        read_lengths(path, tokens="sentences")
    np.save(tmp_path / "lengths.npy", np.array([3, 4]))
    with pytest.raises(ValueError, match="lengths.npy is a .npy file of lengths"):
        read_lengths(tmp_path / "lengths.npy", tokens="words")
    (tmp_path / "blank.txt").write_text("\n  \n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"blank.txt holds no text"):
        read_lengths(tmp_path / "blank.txt", tokens="chars")
    (tmp_path / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.txt is not UTF-8 text \(byte 3"):
        read_lengths(tmp_path / "latin1.txt", tokens="chars")


@pytest.mark.parametrize(
    ("make_source", "error", "match"),
    [
        (
            lambda tmp: tmp / "missing.npy",
            FileNotFoundError,
            "missing.npy does not exist: give a .npy or .txt file",
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
        (
            lambda tmp: np.array([3, 10**12]),
            ValueError,
            r"lengths\[1\] = 1000000000000 is beyond the longest length "
            r"kerasbatch plans \(2147483647\)",
        ),
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
    text.write_text("12\n2000000000000\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"lengths.txt: lengths\[1\] = 2000000000000"):
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
    with pytest.raises(ValueError, match="records is a TFRecord dataset: tokens"):
        kerasbatch.analyze(empty_dir, backend="jax", tokens="words", verbose=0)


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
        kerasbatch.analyze(lengths, backend="jax", sequence_length=[64, 32])
    with pytest.raises(ValueError, match="epochs must be a positive int, got 0"):
        kerasbatch.analyze(lengths, backend="jax", epochs=0)
    with pytest.raises(ValueError, match="compile_seconds_per_shape must be"):
        kerasbatch.analyze(lengths, backend="jax", compile_seconds_per_shape=-1)
    with pytest.raises(ValueError, match="features applies to a TFRecord"):
        kerasbatch.analyze(lengths, backend="jax", features=["x"])
    given = kerasbatch.analyze(
        lengths, backend="jax", sequence_length=[128, 64, 128], verbose=0
    )
    assert given.sequence_lengths == (64, 128)
    assert [row.name for row in given.rows if row.packed] == ["packed 64", "packed 128"]


def test_the_report_and_its_parts(analysis, tmp_path):
    text = str(analysis)
    assert text.startswith(f"300 sequences, {analysis.lengths.sum()} tokens: lengths")
    assert "█" in analysis.histogram()
    table = analysis.table()
    assert table.splitlines()[0].split()[:3] == ["strategy", "pad.", "eff."]
    best = analysis.recommended.name
    assert f"{best} *" in table and "+" in table
    recommendation = analysis.recommendation()
    assert f"Recommended for jax on a GPU, 3 epochs: {best}" in recommendation
    assert f"builder = {analysis.recommended.builder_line}" in recommendation
    assert f"builder = {analysis.recommended_unpacked.builder_line}" in recommendation
    assert "packed_segment_ids" in recommendation
    assert repr(analysis).startswith(
        f"Analysis(300 sequences, {len(analysis.rows)} strategies, backend='jax', "
        "device='gpu'"
    )
    as_dict = json.loads(json.dumps(analysis.to_dict()))
    assert as_dict["recommended"] == best
    assert as_dict["device"] == "gpu"
    assert sum(as_dict["histogram"]["counts"]) == 300
    assert (
        as_dict["rows"][0]["builder_line"] == "kerasbatch.PaddedBuilder(batch_size=16)"
    )
    path = tmp_path / "analysis.png"
    figure = analysis.plot(str(path))
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert len(figure.axes) == 2
    with pytest.raises(
        FileNotFoundError, match="Cannot write the plot to .*: the folder .* does not"
    ):
        analysis.plot(str(tmp_path / "missing" / "analysis.png"))


def test_bucket_rows_with_the_same_boundaries_are_left_out():
    lengths = np.array([1, 2, 3, 1, 2, 3, 1, 2, 3, 3])  # 3 distinct lengths
    analysis = kerasbatch.analyze(
        lengths,
        batch_size=2,
        epochs=1,
        backend="tensorflow",
        device="cpu",
        num_buckets=(4, 8),
        verbose=0,
    )
    assert [row.name for row in analysis.rows] == [
        "padded",
        "sorted",
        "buckets 1",
        "buckets 4",
        "buckets 1, tokens",
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
            "--device",
            "cpu",
            "--buckets",
            "4,8",
            "--batch-size",
            "16",
            "--sequence-length",
            "128,256",
        ]
    )
    result = json.loads(capsys.readouterr().out)
    assert result["backend"] == "torch" and result["epochs"] == 2
    assert result["device"] == "cpu" and result["sequence_lengths"] == [128, 256]
    assert len(result["rows"]) == 10
    with pytest.raises(SystemExit):
        main(["analyze", str(tmp_path / "lengths.npy"), "--backend", "mxnet"])
    assert "invalid choice: 'mxnet'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["analyze", str(tmp_path / "lengths.npy"), "--buckets", "4,eight"])
    assert "--buckets must be comma-separated ints" in capsys.readouterr().err


def run_command(*arguments, env=None):
    """`python -m kerasbatch analyze ...` as a user runs it (the command sets
    the log level itself)."""
    return subprocess.run(
        [sys.executable, "-m", "kerasbatch", "analyze", *map(str, arguments)],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **{k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"},
            "PYTHONIOENCODING": "utf-8",
            **(env or {}),
        },
    )


def test_the_command_end_to_end(tmp_path, data):
    np.save(tmp_path / "lengths.npy", data[2])
    plot = tmp_path / "out.png"
    result = run_command(
        tmp_path / "lengths.npy",
        "--plot",
        plot,
        "--epochs",
        "2",
        "--backend",
        "jax",
        "--device",
        "gpu",
        "--buckets",
        "4,8",
    )
    assert result.returncode == 0, result.stderr
    assert "strategy" in result.stdout and "pad. eff." in result.stdout
    assert "Recommended for jax on a GPU, 2 epochs: packed" in result.stdout
    assert "builder = kerasbatch.PackedBuilder(" in result.stdout
    assert "Without packing:" in result.stdout
    assert plot.read_bytes()[:8] == PNG_MAGIC
    assert result.stderr == ""


def test_command_errors_are_one_sentence_and_exit_code_2(tmp_path):
    np.save(tmp_path / "lengths.npy", np.array([3, 5, 8]))
    np.save(tmp_path / "huge.npy", np.array([3.0, 1e12]))
    (tmp_path / "empty.txt").write_text("\n", encoding="utf-8")
    (tmp_path / "LICENSE").write_text("Apache License\n", encoding="utf-8")
    (tmp_path / "LICENSE.txt").write_text("Apache License\n", encoding="utf-8")
    cases = [
        (
            [tmp_path / "lengths.npy", "--plot", tmp_path / "no" / "such" / "a.png"],
            f"Cannot write the plot to {tmp_path / 'no' / 'such' / 'a.png'}: the "
            f"folder {tmp_path / 'no' / 'such'} does not exist.",
        ),
        (
            [tmp_path / "huge.npy"],
            f"{tmp_path / 'huge.npy'}: lengths[1] = 1000000000000 is beyond the "
            "longest length kerasbatch plans (2147483647).",
        ),
        (
            [tmp_path / "missing.npy"],
            f"{tmp_path / 'missing.npy'} does not exist: give a .npy or .txt file "
            "of lengths, a text file with tokens, or a TFRecord dataset's "
            "directory.",
        ),
        (
            [tmp_path / "empty.txt"],
            f"{tmp_path / 'empty.txt'}: lengths is empty; need at least one length.",
        ),
        (
            [tmp_path / "empty.txt", "--tokens", "words"],
            f"{tmp_path / 'empty.txt'} holds no text (every line is blank).",
        ),
        (
            [tmp_path / "LICENSE.txt"],
            f"{tmp_path / 'LICENSE.txt'}, line 1: 'Apache License' is not an "
            "integer length; to count the tokens of lines of text, give "
            "tokens='words', 'chars' or 'bytes' (--tokens).",
        ),
        (
            [tmp_path / "lengths.npy", "--sequence-length", "4"],
            "sequence_length=4 is shorter than the longest sequence (8): packed "
            "rows must hold every sequence; give sequence_length >= 8.",
        ),
    ]
    for arguments, message in cases:
        result = run_command(*arguments, "--backend", "jax")
        assert result.returncode == 2, (arguments, result.stderr)
        assert result.stderr == f"kerasbatch analyze: error: {message}\n", arguments
        assert not re.search(r"\.\s+[A-Z]", message), message  # one sentence
    words = run_command(tmp_path / "LICENSE", "--tokens", "words", "--json")
    assert words.returncode == 0, words.stderr
    assert json.loads(words.stdout)["summary"]["sequences"] == 1


def test_a_tfrecord_dataset_without_tensorflow_is_one_sentence(tmp_path):
    write_dataset(tmp_path / "records", [{"tokens": np.arange(1, 4)}])
    blocked = (
        "import sys\n"
        "sys.modules['tensorflow'] = None  # as if it were not installed\n"
        "sys.argv = ['kerasbatch']\n"
        "from kerasbatch.__main__ import main\n"
        f"main(['analyze', {str(tmp_path / 'records')!r}, '--backend', 'jax'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(
        f"kerasbatch analyze: error: Reading the TFRecord dataset in "
        f"{tmp_path / 'records'} needs TensorFlow and Keras, which could not be "
        "imported ("
    )
    assert result.stderr.endswith(
        "): install them, or give a .npy or .txt file of lengths.\n"
    )
    assert result.stderr.count("\n") == 1


def guide_section():
    """The section of the guide "Choosing a builder" on `kerasbatch analyze`."""
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index("## Let `kerasbatch analyze` choose")
    return text[start : text.index("\n## ", start + 1)]


def test_the_guide_shows_what_the_command_prints(tmp_path):
    command, output = re.findall(r"```(?:bash)?\n(.*?)```", guide_section(), re.S)[:2]
    arguments = shlex.split(command)
    assert arguments[:5] == ["python", "-m", "kerasbatch", "analyze", "lengths.npy"]
    plot = arguments.index("--plot")
    del arguments[plot : plot + 2]
    lengths = np.random.default_rng(0).lognormal(3.5, 0.7, 20_000).astype(int)
    np.save(tmp_path / "lengths.npy", np.clip(lengths, 1, 512))  # lognormal
    result = run_command(tmp_path / "lengths.npy", *arguments[5:])
    assert result.returncode == 0, result.stderr
    assert result.stdout == output


def test_the_guide_shows_the_costs():
    rows = [
        line.split("|")[1:-1]
        for line in guide_section().splitlines()
        if re.match(r"\| `\w+`, `\w+` \|", line)
    ]
    assert len(rows) == 6

    def seconds(cell):
        number = re.match(r"\s*([\d.e-]+) (ms|s)\s*$", cell)
        if number is None:
            assert cell.strip() in ("", "0", "none"), cell
            return 0.0
        return float(number[1]) / (1000 if number[2] == "ms" else 1)

    for first, *cells, _ in rows:
        backend, device = re.findall(r"`(\w+)`", first)
        costs = BACKEND_COSTS[backend].get(device)
        figures = [seconds(cell) for cell in cells]
        if costs is None:
            assert figures == [0.0] * 4, (backend, device)
            continue
        expected = [
            costs.seconds_per_position,
            costs.seconds_per_position_pair,
            costs.seconds_per_step,
            costs.seconds_per_shape,
        ]
        assert figures == pytest.approx(expected, rel=0.01), (backend, device)


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
