"""Data read by index from a random-access source gives the batches of the
same data in memory, bit for bit, for every builder, option set and engine;
only the rows of the batches are read; the lengths are computed once and
cached; bad data is an error that names the element or file."""

import hashlib
import json
import os
import warnings

import batch_records as records
import keras
import numpy as np
import pytest
from random_access_sources import ListSource, as_source

import kerasbatch
from kerasbatch.data import source_lengths
from kerasbatch.io import TokenFile, TokenFileWriter, write_token_file

#: The in-memory cases of every planned builder (streams read a source
#: in order already; sparse windows and tensors are not lists and arrays).
CASES = [
    name
    for name in records.CASES
    if not name.startswith("stream")
    and as_source(*records.CASES[name]("grain")[1:]) is not None
]

#: Cases that only a graph of in-memory tensors batches.
NEEDS_MEMORY = {
    "window/user_reducer": r"has the reducer .*, which needs the data in memory: "
    r"data read by index from a source is batched in numpy",
}


def _digest(dataset, epochs=1):
    digest = hashlib.sha256(f"len={len(dataset)}".encode())
    for epoch in range(epochs):
        for index, batch in enumerate(dataset):
            records._update(digest, batch, f"{epoch}/{index}")
    return digest.hexdigest()


#: `{"case/engine": [epoch digests]}` of the data in memory, as recorded;
#: test_batches_unchanged checks that the builders still make them.
RECORDED = json.loads(records.DIGESTS.read_text())


def _first_epoch_digest(dataset):
    """The digest of a dataset's first epoch, as `batch_records` records it."""
    digest = hashlib.sha256(f"len={records._length(dataset)}".encode())
    count = 0
    for count, batch in enumerate(dataset, 1):
        records._update(digest, batch, count - 1)
    digest.update(f"|batches={count}".encode())
    return digest.hexdigest()


def _built(builder, args, kwargs, engine):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "On the TensorFlow backend, Keras reads")
        return builder.build(*args, engine=engine, **kwargs)


def test_the_cases_cover_every_planned_builder():
    builders = {name.split("/")[0] for name in CASES}
    assert {"padded", "sorted", "bucket", "packed", "chunk", "window"} <= builders


@pytest.mark.parametrize("engine", records.ENGINES)
@pytest.mark.parametrize("name", CASES)
def test_a_source_gives_the_batches_of_the_data_in_memory(name, engine):
    """Compared with the recorded digest of the data in memory, which
    test_batches_unchanged checks the builders still make: one build per
    case here, not two."""
    if engine in records.REFUSED.get(name, {}):
        return  # the in-memory data is refused there too (tested elsewhere)
    builder, args, kwargs = records.CASES[name](engine)
    source, lengths = as_source(args, kwargs)
    if engine == "tf.data" and name in NEEDS_MEMORY:
        with pytest.raises(ValueError, match=NEEDS_MEMORY[name]):
            _built(builder, (source,), {"lengths": lengths}, engine)
        return
    dataset = _built(builder, (source,), {"lengths": lengths}, engine)
    assert _first_epoch_digest(dataset) == RECORDED[f"{name}/{engine}"][0]
    # A batch reads each of its rows' elements once: no more reads than
    # the plans' rows, plus element 0 read once for the structure (and on
    # tf.data, batch 0 once for the pipeline's element spec).
    plans = [builder.plan(0)]
    first = plans[0].batch_splits[1]
    if hasattr(plans[0], "row_splits"):  # packed rows: the elements of batch 0
        first = plans[0].row_splits[first]
    probe = 1 + (first if engine == "tf.data" else 0)
    assert source.reads.sum() <= probe + sum(len(plan.indices) for plan in plans)


def _tokens(count=60, seed=0, high=1000):
    rng = np.random.default_rng(seed)
    return [
        rng.integers(1, high, rng.integers(1, 30)).astype(np.int32)
        for _ in range(count)
    ]


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "int32"])
def test_a_token_file_reads_back_what_was_written(tmp_path, dtype):
    sequences = _tokens() + [np.zeros(0, np.int32)]
    tokens = write_token_file(tmp_path / "corpus", sequences, dtype=dtype)
    assert len(tokens) == len(sequences)
    assert tokens.lengths.tolist() == [len(s) for s in sequences]
    for index, sequence in enumerate(sequences):
        assert tokens[index].dtype == np.dtype(dtype)
        np.testing.assert_array_equal(tokens[index], sequence)
    np.testing.assert_array_equal(tokens[-2], sequences[-2])
    read = tokens.__getitems__([3, 0, 3])
    np.testing.assert_array_equal(read[0], sequences[3])
    np.testing.assert_array_equal(read[1], sequences[0])
    assert TokenFile(tmp_path / "corpus", dtype="int64")[1].dtype == np.int64
    assert "61 sequences" in repr(tokens)
    with pytest.raises(
        IndexError, match=r"Index 61 is out of range for the 61 sequences"
    ):
        tokens[61]


def test_a_token_file_is_written_in_blocks_of_sequences(tmp_path):
    sequences = _tokens(200)
    with TokenFileWriter(tmp_path / "corpus", dtype="uint16") as writer:
        writer.write_concatenated(
            np.concatenate(sequences[:150]), [len(s) for s in sequences[:150]]
        )
        for sequence in sequences[150:]:
            writer.write(sequence)
    tokens = TokenFile(tmp_path / "corpus")
    assert [t.tolist() for t in tokens.__getitems__(range(200))] == [
        s.tolist() for s in sequences
    ]


def test_bad_token_files_are_errors_that_name_the_file(tmp_path):
    path = tmp_path / "corpus"
    write_token_file(path, _tokens(), dtype="uint16")
    with pytest.raises(FileNotFoundError, match=r"other\.idx does not exist"):
        TokenFile(tmp_path / "other")
    os.truncate(f"{path}.bin", os.path.getsize(f"{path}.bin") - 2)
    with pytest.raises(
        ValueError, match=r"corpus\.bin hold .* bytes, but its index .* cut short"
    ):
        TokenFile(path)
    write_token_file(path, _tokens(), dtype="uint16")
    os.truncate(f"{path}.idx", os.path.getsize(f"{path}.idx") - 8)
    with pytest.raises(
        ValueError,
        match=r"index .*corpus\.idx holds .* header promises 60 sequences .* cut short",
    ):
        TokenFile(path)
    (tmp_path / "junk.idx").write_bytes(b"x" * 40)
    (tmp_path / "junk.bin").write_bytes(b"")
    with pytest.raises(ValueError, match=r"junk\.idx is not a token file's index"):
        TokenFile(tmp_path / "junk")
    os.remove(f"{path}.bin")
    write_token_file(path, _tokens(), dtype="uint16")
    os.remove(f"{path}.bin")
    with pytest.raises(FileNotFoundError, match=r"corpus\.bin do not exist"):
        TokenFile(path)


def test_a_token_outside_the_dtype_is_an_error_that_names_the_sequence(tmp_path):
    sequences = [np.array([1, 2]), np.array([3, 70_000])]
    with pytest.raises(
        ValueError, match=r"Sequence 1 holds the token id 70000, outside uint16"
    ):
        write_token_file(tmp_path / "corpus", sequences, dtype="uint16")
    assert not os.path.exists(tmp_path / "corpus.bin")  # no half-written file
    with pytest.raises(ValueError, match="stores uint16, uint32 or int32"):
        TokenFileWriter(tmp_path / "c", dtype="float32")


def test_the_lengths_pass_reads_once_and_caches_next_to_the_files(tmp_path):
    sequences = _tokens()
    path = tmp_path / "corpus"
    write_token_file(path, sequences, dtype="int32")

    class Unindexed(ListSource):
        """A source of files that knows no lengths (as an ArrayRecord file)."""

        paths = [f"{path}.bin"]

    builder = kerasbatch.BucketBuilder(boundaries=[10, 20], batch_size=4, seed=1)
    source = Unindexed(sequences)
    dataset = builder.build(source, engine="grain")
    # The lengths pass; element 0 is read once more, for the structure.
    assert source.reads.tolist() == [2] + [1] * (len(sequences) - 1)
    np.testing.assert_array_equal(builder.lengths, [len(s) for s in sequences])
    assert len(os.listdir(tmp_path / source_lengths.CACHE_DIRECTORY)) == 1
    source = Unindexed(sequences)
    again = kerasbatch.BucketBuilder(boundaries=[10, 20], batch_size=4, seed=1)
    cached = again.build(source, engine="grain")
    assert source.reads.tolist() == [1] + [0] * (len(sequences) - 1)  # the cache
    assert _digest(cached, 1) == _digest(dataset, 1)
    assert source.reads.tolist() == [2] + [1] * (len(sequences) - 1)  # one epoch


def test_only_the_batches_rows_are_read():
    sequences = _tokens(100)
    source = ListSource(sequences)
    builder = kerasbatch.BucketBuilder(boundaries=[10], batch_size=5, seed=3)
    dataset = builder.build(
        source, lengths=[len(s) for s in sequences], engine="grain", read_threads=1
    )  # one thread: no batch read ahead
    source.reads[:] = 0  # element 0 was read for the structure
    iterator = iter(dataset)
    first = next(iterator)
    assert source.reads.sum() == len(first)
    np.testing.assert_array_equal(
        np.flatnonzero(source.reads), np.sort(builder.plan(0).indices[: len(first)])
    )


def test_a_source_that_disagrees_with_its_lengths_names_the_element():
    sequences = _tokens(20)
    lengths = [len(s) for s in sequences]
    lengths[7] += 1
    builder = kerasbatch.PaddedBuilder(batch_size=20, shuffle=False)
    dataset = builder.build(ListSource(sequences), lengths=lengths, engine="python")
    with pytest.raises(
        ValueError,
        match=r"Element 7 of the source of x: x has length \d+, but its lengths say",
    ):
        next(iter(dataset))
    with pytest.raises(
        ValueError, match=r"lengths has 19 entries, but the source of x has 20"
    ):
        builder.build(ListSource(sequences), lengths=lengths[:-1], engine="python")
    with pytest.raises(ValueError, match=r"lengths\[2\] is negative"):
        builder.build(
            ListSource(sequences), lengths=[1, 1, -1] + lengths[3:], engine="python"
        )
    with pytest.raises(
        ValueError,
        match=r"lengths names the components \[.y.\], but the sources. elements have no such array",
    ):
        builder.build(ListSource(sequences), lengths={"y": lengths}, engine="python")


def test_elements_that_differ_from_element_0_are_errors_that_name_them():
    sequences = _tokens(20)
    bad_dtype = sequences[:5] + [sequences[5].astype(np.int64)] + sequences[6:]
    with pytest.raises(
        ValueError,
        match=r"1 of the 20 elements of the source of x .*\(element 5 of the source of x: x has dtype int64, but element 0's has int32",
    ):
        kerasbatch.PaddedBuilder(batch_size=4).build(
            ListSource(bad_dtype), engine="python"
        )
    bad_rank = sequences[:3] + [sequences[3][:, None]] + sequences[4:]
    with pytest.raises(
        ValueError,
        match=r"element 3 of the source of x: x has shape \(\d+, 1\), but element 0.s has \(length\)",
    ):
        kerasbatch.PaddedBuilder(batch_size=4).build(
            ListSource(bad_rank), engine="python"
        )
    pairs = [(s, np.int32(1)) for s in sequences]
    pairs[9] = {"tokens": sequences[9]}
    with pytest.raises(
        ValueError, match=r"element 9 of the source of x has no x, which element 0 has"
    ):
        kerasbatch.PaddedBuilder(batch_size=4).build(ListSource(pairs), engine="python")


def test_unreadable_elements_are_counted_and_named():
    sequences = _tokens(30)
    source = ListSource(sequences, broken=(4, 11, 12))
    with pytest.raises(
        ValueError,
        match=r"^3 of the 30 elements of the source of x could not be read .*\(element 4 of the source of x could not be read: OSError: bad block at element 4; element 11 .*; element 12 .*\)\. Nothing was built",
    ):
        kerasbatch.PaddedBuilder(batch_size=4).build(source, engine="python")
    # Lengths given: the element is named when its batch reads it.
    source = ListSource(sequences, broken=(4,))
    dataset = kerasbatch.PaddedBuilder(batch_size=30, shuffle=False).build(
        source, lengths=[len(s) for s in sequences], engine="grain"
    )
    with pytest.raises(
        OSError,
        match="Element 4 of the source of x could not be read: OSError: bad block",
    ):
        next(iter(dataset))


def test_lengths_and_read_threads_are_for_sources_only():
    with pytest.raises(ValueError, match="lengths is for a random-access source"):
        kerasbatch.PaddedBuilder(batch_size=2).build(_tokens(), lengths=[1] * 60)
    with pytest.raises(ValueError, match="read_threads is for a random-access source"):
        kerasbatch.PaddedBuilder(batch_size=2).build(_tokens(), read_threads=2)
    with pytest.raises(ValueError, match="read_threads must be a positive int"):
        kerasbatch.PaddedBuilder(batch_size=2).build(
            ListSource(_tokens()), read_threads=0
        )
    pairs = ListSource([(s, np.int32(0)) for s in _tokens()])
    with pytest.raises(ValueError, match="The source of x gives y in its"):
        kerasbatch.PaddedBuilder(batch_size=2).build(
            pairs, np.zeros(60), engine="python"
        )


def test_the_tf_data_engine_reads_a_source_in_its_pipeline(tmp_path):
    tokens = write_token_file(tmp_path / "corpus", _tokens(64), dtype="int32")
    labels = np.arange(64, dtype=np.int32) % 2
    builder = kerasbatch.BucketBuilder(boundaries=[10], batch_size=8, seed=0)
    dataset = builder.build(tokens, labels, engine="tf.data")
    x_spec, y_spec = dataset.element_spec
    assert x_spec.shape.as_list() == [None, None] and y_spec.shape.as_list() == [None]
    memory = kerasbatch.BucketBuilder(boundaries=[10], batch_size=8, seed=0)
    in_memory = memory.build(list(tokens.__getitems__(range(64))), labels)
    assert _digest(dataset, 2) == _digest(in_memory, 2)


@pytest.mark.parametrize("engine", records.ENGINES)
def test_fit_reads_a_token_file(tmp_path, engine):
    tokens = write_token_file(tmp_path / "corpus", _tokens(64, high=50), dtype="uint16")
    labels = np.arange(64, dtype=np.int32) % 2
    builder = kerasbatch.BucketBuilder(
        boundaries=[10, 20], batch_size=8, seed=0, pad_to_bucket=True, max_length=32
    )
    train = builder.build(TokenFile(tokens.path, dtype="int32"), labels, engine=engine)
    model = keras.Sequential(
        [
            keras.layers.Embedding(50, 4, mask_zero=True),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(2),
        ]
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    callbacks = [kerasbatch.callbacks.WarmUp(builder, dataset=train)]
    history = model.fit(train, epochs=2, verbose=0, callbacks=callbacks)
    assert len(history.history["loss"]) == 2
    assert np.isfinite(history.history["loss"]).all()
    assert builder.last_started_epoch == 1
    # Predictions in input order: those of the same data in memory (up to
    # float rounding: the data's next epochs put rows in other batches).
    memory = kerasbatch.BucketBuilder(
        boundaries=[10, 20], batch_size=8, seed=0, pad_to_bucket=True, max_length=32
    )
    in_memory = memory.build(
        [tokens[i].astype(np.int32) for i in range(64)], labels, engine=engine
    )
    np.testing.assert_allclose(
        kerasbatch.predict(model, train, verbose=0),
        kerasbatch.predict(model, in_memory, verbose=0),
        rtol=1e-5,
        atol=1e-6,
    )


def test_y_and_sample_weight_may_be_sources_themselves():
    sequences = _tokens(40)
    tags = [(s % 5).astype(np.int32) for s in sequences]
    weights = np.linspace(0.5, 1.5, 40).astype(np.float32)
    builder = kerasbatch.BucketBuilder(boundaries=[10], batch_size=6, seed=2)
    expected = _digest(builder.build(sequences, tags, weights, engine="python"), 2)
    builder = kerasbatch.BucketBuilder(boundaries=[10], batch_size=6, seed=2)
    dataset = builder.build(
        ListSource(sequences),
        ListSource(tags),
        ListSource(list(weights)),
        engine="python",
    )
    assert _digest(dataset, 2) == expected


def test_a_grain_map_dataset_over_an_array_record_file(tmp_path):
    grain = pytest.importorskip("grain")
    writer_module = pytest.importorskip("array_record.python.array_record_module")
    sequences = _tokens(50)
    path = str(tmp_path / "corpus.array_record")
    writer = writer_module.ArrayRecordWriter(path, "group_size:1")
    for sequence in sequences:
        writer.write(sequence.tobytes())
    writer.close()
    source = grain.MapDataset.source(grain.sources.ArrayRecordDataSource(path))
    source = source.map(lambda record: np.frombuffer(record, np.int32))
    builder = kerasbatch.PackedBuilder(sequence_length=40, batch_size=3, seed=1)
    dataset = builder.build(source, engine="grain")
    memory = kerasbatch.PackedBuilder(sequence_length=40, batch_size=3, seed=1)
    assert _digest(dataset, 2) == _digest(memory.build(sequences, engine="grain"), 2)
    # The lengths pass is cached next to the ArrayRecord file.
    assert len(os.listdir(tmp_path / source_lengths.CACHE_DIRECTORY)) == 1


def test_a_hugging_face_style_dataset_of_dicts_reads_in_batches(tmp_path):
    sequences = _tokens(30)
    (tmp_path / "data.arrow").write_bytes(b"arrow")

    class Table:
        """As a Hugging Face Dataset: dict rows, `__getitems__`, and
        `cache_files` naming its Arrow files."""

        cache_files = [{"filename": str(tmp_path / "data.arrow")}]
        calls = 0

        def __len__(self):
            return len(sequences)

        def __getitem__(self, index):
            return {"input_ids": sequences[index], "label": np.int64(index % 2)}

        def __getitems__(self, indices):
            Table.calls += 1
            return [self[index] for index in indices]

    builder = kerasbatch.SortedBuilder(batch_size=4, seed=0)
    dataset = builder.build(Table(), engine="python")
    x = next(iter(dataset))
    assert set(x) == {"input_ids", "label"} and x["label"].shape == (4,)
    assert Table.calls > 0  # a batch is read in one call
    assert len(os.listdir(tmp_path / source_lengths.CACHE_DIRECTORY)) == 1
    memory = kerasbatch.SortedBuilder(batch_size=4, seed=0)
    labels = np.arange(30) % 2
    in_memory = memory.build({"input_ids": sequences, "label": labels}, engine="python")
    assert _digest(dataset) == _digest(in_memory)


#: Every planned builder, with options that cut, drop and truncate.
TOKEN_FILE_BUILDERS = {
    "bucket": lambda: kerasbatch.BucketBuilder(num_buckets=4, batch_size=8, seed=1),
    "truncation buckets": lambda: kerasbatch.BucketBuilder(
        boundaries=[10, 20], batch_size=8, seed=1, truncate=True, max_length=30
    ),
    "padded, overflow drop": lambda: kerasbatch.PaddedBuilder(
        batch_size=8, seed=1, max_length=25, overflow="drop"
    ),
    "sorted": lambda: kerasbatch.SortedBuilder(batch_size=8, seed=1),
    "packed": lambda: kerasbatch.PackedBuilder(sequence_length=64, seed=1),
    "chunk": lambda: kerasbatch.ChunkBuilder(chunk_size=8, batch_size=8, seed=1),
    "window": lambda: kerasbatch.WindowBuilder(4, seed=1),
}


@pytest.mark.parametrize("engine", records.ENGINES)
@pytest.mark.parametrize("name", sorted(TOKEN_FILE_BUILDERS))
def test_a_token_file_plans_from_int32_lengths_as_memory_does(tmp_path, name, engine):
    sequences = _tokens(120, seed=4)
    tokens = write_token_file(tmp_path / "corpus", sequences, dtype="int32")
    assert tokens.lengths.dtype == np.int32  # half the memory of int64
    make = TOKEN_FILE_BUILDERS[name]
    in_memory = _built(make(), (sequences,), {}, engine)
    assert _digest(_built(make(), (tokens,), {}, engine), 2) == _digest(in_memory, 2)
