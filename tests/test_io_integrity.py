"""Data integrity: no record lost without being counted and named.

Damaged files (cut short at any offset, a bit flipped anywhere) in every
compression, read by `read_file_records`, `TFRecordLoader` and
`check_dataset`; and every kind of bad record with `on_error="skip"`.
"""

import dataclasses
import functools
import os
import re
import shutil
import tempfile

import hypothesis
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_io_loader import config as loader_config
from test_io_loader import make_model

from kerasbatch import StreamBucketBuilder
from kerasbatch.io import (
    Manifest,
    TFRecordLoader,
    add_record_counts,
    check_dataset,
    load_manifest,
    make_parser,
    parse_batches,
    read_file_records,
    write_dataset,
)
from kerasbatch.io.compressed_streams import gzip_stream_size
from kerasbatch.io.record_scan import scan_records

COMPRESSIONS = [None, "gzip", "zlib"]
NUM_RECORDS = 12
NAME = "part-00000-of-00001.tfrecords"
PROPERTY = settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def records(count=NUM_RECORDS):
    """Record i: tokens `[100 i, ...]` of length 1 + i % 5, label i."""
    return [
        {"tokens": np.arange(100 * i, 100 * i + 1 + i % 5), "label": np.int64(i)}
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def originals():
    """`{compression: (directory, file bytes)}` of one-file datasets."""
    root = tempfile.mkdtemp()
    written = {}
    for compression in COMPRESSIONS:
        path = os.path.join(root, str(compression))
        write_dataset(path, records(), compression=compression)
        with open(os.path.join(path, NAME), "rb") as file:
            written[compression] = (path, file.read())
    yield written
    shutil.rmtree(root)


def damaged_copy(originals, compression, data, counts=True):
    """A fresh dataset directory holding `data` as its file."""
    source, _ = originals[compression]
    path = tempfile.mkdtemp()
    manifest = load_manifest(source)
    if not counts:
        manifest = dataclasses.replace(manifest, record_counts=None)
    manifest.save(path)
    with open(os.path.join(path, NAME), "wb") as file:
        file.write(data)
    return path


def read(path, compression, on_damage, counts=True, python_checks=True):
    """`(labels read, damaged files, lost records)` by `read_file_records`
    (`python_checks=False`: as a tf.data service worker reads)."""
    manifest = load_manifest(path)
    file = os.path.join(path, NAME)
    damaged = tf.Variable(0, dtype=tf.int64)
    lost = tf.Variable(0, dtype=tf.int64)
    dataset = read_file_records(
        file,
        compression,
        file_size=os.path.getsize(file),
        num_records=manifest.records_in(file, path) if counts else None,
        on_damage=on_damage,
        damaged_files=damaged,
        lost_records=lost,
        python_checks=python_checks,
    )
    labels = []
    for serialized, _, _ in dataset:
        example = tf.train.SequenceExample.FromString(serialized.numpy())
        labels.append(example.context.feature["label"].int64_list.value[0])
    return labels, int(damaged.numpy()), int(lost.numpy())


class Reader:
    """`read` for many files, by one pipeline built once: its file, stream
    size and record count are variables, set before each read, as a loader's
    interleave passes them (a new iterator costs a tenth of a new pipeline).
    """

    def __init__(self, compression, on_damage):
        self.compression = compression
        self.file = tf.Variable("", dtype=tf.string)
        self.stream_size = tf.Variable(-1, dtype=tf.int64)
        self.num_records = tf.Variable(-1, dtype=tf.int64)
        self.damaged = tf.Variable(0, dtype=tf.int64)
        self.lost = tf.Variable(0, dtype=tf.int64)
        self.dataset = tf.data.Dataset.from_tensors(0).flat_map(
            lambda _: read_file_records(
                self.file.read_value(),
                compression,
                stream_size=self.stream_size.read_value(),
                num_records=self.num_records.read_value(),
                on_damage=on_damage,
                damaged_files=self.damaged,
                lost_records=self.lost,
            )
        )

    def __call__(self, path, counts=True):
        """`(labels read, damaged files, lost records)` of `path`'s file."""
        file = os.path.join(path, NAME)
        size = os.path.getsize(file)
        # what read_file_records finds of a file named in Python
        stream_size = {None: size, "gzip": gzip_stream_size(file, size), "zlib": -1}
        num_records = load_manifest(path).records_in(file, path) if counts else None
        self.file.assign(file)
        self.stream_size.assign(stream_size[self.compression])
        self.num_records.assign(-1 if num_records is None else num_records)
        self.damaged.assign(0)
        self.lost.assign(0)
        labels = []
        for serialized, _, _ in self.dataset:
            example = tf.train.SequenceExample.FromString(serialized.numpy())
            labels.append(example.context.feature["label"].int64_list.value[0])
        return labels, int(self.damaged.numpy()), int(self.lost.numpy())


@functools.cache
def reader(compression, on_damage):
    return Reader(compression, on_damage)


def loader_labels(loader):
    dataset = loader.build(inputs=["x"], outputs=["y"])
    return [int(v) for _, y in dataset.as_numpy_iterator() for v in np.ravel(y["y"])]


def assert_named_damage(path, compression, counts=True, read=read):
    """Raise mode fails naming the file; skip mode counts every lost record
    (read by `read`, or by `reader`'s pipelines with `read=None`)."""
    file = re.escape(os.path.join(path, NAME))

    def read_as(on_damage):
        if read is None:
            return reader(compression, on_damage)(path, counts)
        return read(path, compression, on_damage, counts)

    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=rf"TFRecord file {file} is corrupt or truncated at record \d+ \(",
    ):
        read_as("raise")
    labels, damaged, lost = read_as("skip")
    assert damaged == 1
    return labels, lost


# ------------------------------------------------------------- truncation
@pytest.mark.parametrize("compression", COMPRESSIONS)
@PROPERTY
@given(cut=st.floats(0, 1, exclude_max=True))
def test_a_file_cut_anywhere_is_named_and_every_lost_record_counted(
    originals, compression, cut
):
    _, data = originals[compression]
    cut = int(cut * len(data))
    path = damaged_copy(originals, compression, data[:cut])
    labels, damaged, lost = reader(compression, "skip")(path)
    if compression == "zlib" and labels == list(range(NUM_RECORDS)):
        # cut in the checksum after the last record: nothing lost, and with
        # record counts the stream is not decompressed again; the check finds it
        assert (damaged, lost) == (0, 0)
    else:
        labels, lost = assert_named_damage(path, compression, read=None)
    # what is kept is the records before the cut, intact and in order
    assert labels == list(range(len(labels)))
    assert len(labels) + lost == NUM_RECORDS
    check = check_dataset(
        load_manifest(path), [os.path.join(path, NAME)], verbose=0, manifest_path=path
    )
    assert not check.ok and check.errors[0][0] == os.path.join(path, NAME)
    assert check.num_records + check.lost_records[os.path.join(path, NAME)] == 12


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_cuts_at_every_offset_without_record_counts_are_found(originals, compression):
    """Without the manifest's counts: the file's size, the gzip trailer's, and
    the zlib stream checked in Python find every cut (every 97th offset, and
    the last 12) but, in an uncompressed file, those between records, which
    leave a well-formed file of fewer records (the counts find those)."""
    path, data = originals[compression]
    cuts = {*range(0, len(data), 97), *range(len(data) - 12, len(data))}
    if compression is None:
        boundaries = [0]
        for _, record in scan_records(os.path.join(path, NAME)):
            boundaries.append(boundaries[-1] + len(record) + 16)
        cuts -= set(boundaries)
    cuts = sorted(cuts)
    for cut in cuts:
        path = damaged_copy(originals, compression, data[:cut], counts=False)
        labels, lost = assert_named_damage(path, compression, False, read=None)
        assert labels == list(range(len(labels))) and lost >= 1
        shutil.rmtree(path)


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("counts", [True, False])
def test_a_damage_warning_states_a_lost_count_only_where_it_is_known(
    originals, compression, counts, capfd
):
    """With record_counts the warning gives the exact count; without them
    (where 3, 6 or 5 records were lost) it names the records lost, the rest
    of the file from the first one not read, and states no number."""
    _, data = originals[compression]
    path = damaged_copy(originals, compression, data[: len(data) * 2 // 3], counts)
    capfd.readouterr()
    labels, damaged, lost = read(path, compression, "skip", counts)
    warning = capfd.readouterr().err
    file = os.path.join(path, NAME)
    assert damaged == 1 and labels == list(range(len(labels)))
    start = f"kerasbatch: TFRecord file {file} is corrupt or truncated at record "
    assert warning.count(start) == 1 and "\\" not in warning
    (line,) = [line for line in warning.splitlines() if line.startswith(start)]
    assert line.startswith(f"{start}{len(labels)} (")
    if counts:
        assert lost == NUM_RECORDS - len(labels)
        assert line.endswith(f"): lost {lost} record(s).")
    else:
        assert lost == 1  # a lower bound: the damaged stretches
        assert line.endswith(
            f"): lost the rest of the file from record {len(labels)} (how many "
            "records that is cannot be known without record_counts in the "
            "manifest)."
        )
        assert "lost 1 " not in line


def test_a_warning_without_counts_names_a_damaged_stretch_and_what_was_kept(
    originals, capfd
):
    path, data = originals[None]
    offsets = [0]
    for _, record in scan_records(os.path.join(path, NAME)):
        offsets.append(offsets[-1] + len(record) + 16)
    data = bytearray(data)
    data[offsets[4] + 14] ^= 0x01  # record 4's data
    path = damaged_copy(originals, None, bytes(data), counts=False)
    capfd.readouterr()
    labels, damaged, lost = read(path, None, "skip", counts=False)
    warning = capfd.readouterr().err
    assert labels == [i for i in range(NUM_RECORDS) if i != 4] and lost == 1
    assert (
        f"filling {offsets[4]} of its {len(data)} bytes): lost what 1 damaged "
        "stretch(es) of bytes held from record 4 on (how many records that is "
        "cannot be known without record_counts in the manifest), kept 7 record(s) "
        "after the damage." in warning
    )


# --------------------------------------------------------------- bit flips
@pytest.mark.parametrize("compression", COMPRESSIONS)
@PROPERTY
@given(position=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7))
def test_a_bit_flipped_anywhere_loses_no_record_uncounted(
    originals, compression, position, bit
):
    _, data = originals[compression]
    data = bytearray(data)
    position = int(position * len(data))
    data[position] ^= 1 << bit
    path = damaged_copy(originals, compression, bytes(data))
    labels, damaged, lost = reader(compression, "skip")(path)
    # kept records are intact originals, in order, each once
    assert labels == sorted(set(labels)) and set(labels) <= set(range(NUM_RECORDS))
    assert len(labels) + lost == NUM_RECORDS
    if damaged == 0:  # a flip that changes nothing read (a gzip header's time)
        assert labels == list(range(NUM_RECORDS))
        reader(compression, "raise")(path)  # no error either
    else:
        assert_named_damage(path, compression, read=None)
    if compression is None:  # read on past the damage: one record lost
        assert lost == 1


def test_a_bit_flip_in_the_middle_of_a_compressed_stream(originals):
    """Both compressions are read and checked; a skipping loader (seconds to
    build) reads the zlib file, whose end only Python checks (a gzip file
    cut short goes through one in test_damage_in_a_sequence_loader_is_counted)."""
    for compression in ("gzip", "zlib"):
        _, data = originals[compression]
        data = bytearray(data)
        data[len(data) // 2] ^= 0x10
        path = damaged_copy(originals, compression, bytes(data))
        labels, lost = assert_named_damage(path, compression, read=None)
        assert len(labels) < NUM_RECORDS and len(labels) + lost == NUM_RECORDS
        if compression == "zlib":
            loader = TFRecordLoader(**loader_config(path, on_error="skip"))
            kept = loader_labels(loader)
            assert kept == labels
            assert (loader.damaged_files, loader.lost_records) == (1, lost)
        check = TFRecordLoader(**loader_config(path)).check(verbose=0)
        assert check.errors and check.lost_records == {os.path.join(path, NAME): lost}


def test_uncompressed_reads_resynchronise_after_each_damaged_record(originals):
    """Records 3 and 8 damaged (one in its data, one in its length): the
    other 10 are kept, 2 counted lost, the check names both."""
    path, data = originals[None]
    offsets = [0]
    for kind, record in scan_records(os.path.join(path, NAME)):
        assert kind == "record"
        offsets.append(offsets[-1] + len(record) + 16)
    data = bytearray(data)
    data[offsets[3] + 14] ^= 0x01  # record 3's data
    data[offsets[8] + 2] ^= 0x80  # record 8's length
    path = damaged_copy(originals, None, bytes(data))
    labels, damaged, lost = read(path, None, "skip")
    assert labels == [i for i in range(NUM_RECORDS) if i not in (3, 8)]
    assert (damaged, lost) == (1, 2)
    loader = TFRecordLoader(**loader_config(path, on_error="skip"))
    assert sorted(loader_labels(loader)) == labels
    assert (loader.damaged_files, loader.lost_records) == (1, 2)
    check = loader.check(verbose=0)
    assert [(index, "corrupted record" in text) for _, index, text in check.errors] == [
        (3, True),
        (7, True),
    ]
    assert check.num_records == 10
    assert check.lost_records == {os.path.join(path, NAME): 2}


def test_a_file_with_more_records_than_the_manifest_says_is_an_error(originals):
    path, data = originals[None]
    path = damaged_copy(originals, None, data + data[:20])  # a stray tail
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match="record_counts in the manifest gives it 12",
    ):
        read(path, None, "raise")
    check = check_dataset(
        load_manifest(path), [os.path.join(path, NAME)], verbose=0, manifest_path=path
    )
    assert not check.ok


def test_damage_in_a_sequence_loader_is_counted(originals):
    _, data = originals["gzip"]
    path = damaged_copy(originals, "gzip", data[: len(data) * 2 // 3])
    config = loader_config(
        path, type="discrete_sequence", min_window=1, max_window=1, on_error="skip"
    )
    loader = TFRecordLoader(**config)
    kept = loader_labels(loader)
    assert loader.damaged_files == 1
    assert len(kept) + loader.lost_records == NUM_RECORDS


def test_skip_with_a_stream_builder_fits_exactly_the_kept_records(originals):
    """The length index and the training pass skip the same records, so the
    lengths given to the builder match what it streams (an uncompressed file:
    which records a damaged file keeps is the reader's, tested above for
    every compression; a skipping loader and a fit take seconds each)."""
    _, data = originals[None]
    path = damaged_copy(originals, None, data[: len(data) * 2 // 3])
    kept, _, lost = read(path, None, "skip")
    loader = TFRecordLoader(**loader_config(path, padding=False, on_error="skip"))
    names = {"inputs": ["x"], "outputs": ["y"]}
    lengths = loader.lengths(**names, verbose=0)
    assert len(lengths) == len(kept)
    builder = StreamBucketBuilder(boundaries=[3], batch_size=2, seed=1)
    dataset = loader.build(**names, builder=builder, lengths=lengths)
    labels = [int(v) for _, y in dataset.as_numpy_iterator() for v in y["y"]]
    assert sorted(labels) == kept
    history = make_model().fit(dataset, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    assert builder.statistics().num_elements == len(kept)
    assert (loader.damaged_files, loader.lost_records) == (3, 3 * lost)  # 3 passes


# ------------------------------------------------- where no Python runs
@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_without_python_a_cut_file_is_named_and_its_lost_records_counted(
    originals, compression
):
    """A tf.data service worker runs no Python: no zlib check in Python and
    no scan past damage, but the record counts find every cut."""
    _, data = originals[compression]
    path = damaged_copy(originals, compression, data[: len(data) // 2])
    file = re.escape(os.path.join(path, NAME))
    with pytest.raises(tf.errors.InvalidArgumentError, match=file):
        read(path, compression, "raise", python_checks=False)
    labels, damaged, lost = read(path, compression, "skip", python_checks=False)
    assert labels == list(range(len(labels)))
    assert (damaged, lost) == (1, NUM_RECORDS - len(labels))


def test_without_python_a_zlib_file_needs_record_counts(originals):
    path, _ = originals["zlib"]
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"has no record_counts .* kerasbatch.io.add_record_counts",
    ):
        read(path, "zlib", "raise", counts=False, python_checks=False)
    labels, _, _ = read(path, "zlib", "raise", python_checks=False)
    assert labels == list(range(NUM_RECORDS))


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_add_record_counts_to_a_dataset_written_without_them(originals, compression):
    source, data = originals[compression]
    path = damaged_copy(originals, compression, data, counts=False)
    assert load_manifest(path).record_counts is None
    manifest = add_record_counts(path, verbose=0)
    assert manifest.record_counts == load_manifest(source).record_counts
    assert load_manifest(path) == manifest
    # now a cut is found even where no Python runs, every lost record counted
    with open(os.path.join(path, NAME), "wb") as file:
        file.write(data[: len(data) * 2 // 3])
    labels, damaged, lost = read(path, compression, "skip", python_checks=False)
    assert (damaged, len(labels) + lost) == (1, NUM_RECORDS)
    # a damaged file is not counted: the error names it, the manifest stays
    path = damaged_copy(originals, compression, data[: len(data) // 2], counts=False)
    with pytest.raises(ValueError, match=re.escape(os.path.join(path, NAME))):
        add_record_counts(path, verbose=0)
    assert load_manifest(path).record_counts is None


def test_add_record_counts_bad_arguments(originals, tmp_path):
    with pytest.raises(TypeError, match="data directory or a dataset specifier"):
        add_record_counts(3)
    with pytest.raises(ValueError, match="does not exist"):
        add_record_counts(str(tmp_path / "nowhere"))
    source, _ = originals[None]
    manifest_file = os.path.join(source, "__manifest__.json")
    elsewhere = tmp_path / "data.tfrecords"
    shutil.copy(os.path.join(source, NAME), elsewhere)
    list_file = tmp_path / "files.txt"
    list_file.write_text(f"{elsewhere}\n")
    specifier = {
        "type": "list",
        "args": {"manifest_file": manifest_file, "list_file": str(list_file)},
    }
    with pytest.raises(ValueError, match="is not under the manifest's directory"):
        add_record_counts(specifier, verbose=0)


# ---------------------------------------------------------------- records
EXAMPLE_MANIFEST = {
    "compression": None,
    "allow_var_len": False,
    "features": [
        {"name": "x", "dtype": "int64", "shape": [2], "deserialize_type": "int"},
        {"name": "y", "dtype": "float32", "shape": [], "deserialize_type": "float"},
    ],
}


def example(x=None, y=None):
    feature = {}
    if x is not None:
        feature["x"] = x
    if y is not None:
        feature["y"] = y
    return tf.train.Example(
        features=tf.train.Features(feature=feature)
    ).SerializeToString()


def ints(*values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def floats(*values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def good(i):
    return example(ints(i, i), floats(i))


#: Each kind of bad record, as the record that replaces record i.
BAD = {
    "float for int": lambda i: example(floats(i, i), floats(i)),
    "int for float": lambda i: example(ints(i, i), ints(i)),
    "bytes for int": lambda i: example(
        tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a", b"b"])), floats(i)
    ),
    "wrong length": lambda i: example(ints(i), floats(i)),
    "missing feature": lambda i: example(None, floats(i)),
    "unparsable bytes": lambda i: b"\xff\xff\xff not an Example",
    "cut Example": lambda i: good(i)[:-3],
}


def write_examples(directory, bad, shard=0, num_shards=1):
    """20 records, record i replaced by `BAD[kind](i)` for each `(i, kind)`;
    shard k of several holds the records of labels 20 k to 20 k + 19."""
    Manifest.from_dict(EXAMPLE_MANIFEST).save(directory)
    first = 20 * shard
    serialized = [
        BAD[bad[i]](first + i) if i in bad else good(first + i) for i in range(20)
    ]
    file = os.path.join(directory, f"part-{shard:05d}-of-{num_shards:05d}.tfrecords")
    with tf.io.TFRecordWriter(file) as writer:
        for record in serialized:
            writer.write(record)
    return file


def example_loader(directory, **overrides):
    return TFRecordLoader(
        **loader_config(
            directory,
            padding=False,
            target_batch_size=20,
            primary_features=[
                {"from_name": "x", "to_name": "x"},
                {"from_name": "y", "to_name": "y"},
            ],
            **overrides,
        )
    )


# One loader reads the files of each drawn set of bad records (a skipping
# loader takes seconds to build): the explicit example, every kind in two
# shards, and one drawn set.
@settings(max_examples=1, deadline=None)
@given(
    bads=st.lists(
        st.dictionaries(st.integers(0, 19), st.sampled_from(sorted(BAD)), max_size=4),
        min_size=1,
        max_size=3,
    )
)
@hypothesis.example(bads=[{3 * i: kind for i, kind in enumerate(sorted(BAD))}, {}])
def test_skip_leaves_out_and_counts_every_kind_of_bad_record(bads):
    with tempfile.TemporaryDirectory() as directory:
        files = [
            write_examples(directory, bad, shard, len(bads))
            for shard, bad in enumerate(bads)
        ]
        loader = example_loader(directory, on_error="skip")
        kept = loader_labels(loader)
        assert kept == [
            20 * shard + i
            for shard, bad in enumerate(bads)
            for i in range(20)
            if i not in bad
        ]
        assert loader.skipped_records == sum(len(bad) for bad in bads)
        check = loader.check(verbose=0)
        assert sorted((file, index) for file, index, _ in check.errors) == sorted(
            (files[shard], i) for shard, bad in enumerate(bads) for i in bad
        )


#: The kinds read through loaders too: one that TensorFlow's parse op
#: finds, one that kerasbatch's checks of the manifest's shapes find.
LOADER_KINDS = ("float for int", "wrong length")


@pytest.mark.parametrize("kind", sorted(BAD))
def test_raise_names_the_file_and_record_of_every_kind(tmp_path, kind):
    """Every kind fails the parsers, record by record and in batches, naming
    file and record. A loader parses with `parse_batches` (the batches of
    `multi_load`, or its own): the naming is the parser's, so loaders (seconds
    each to build) read a kind of each source of error, both ways."""
    file = write_examples(str(tmp_path), {13: kind})
    manifest = Manifest.from_dict(EXAMPLE_MANIFEST)
    where = re.escape(f"record 13 of file {file}")
    for dataset in (
        read_file_records(file, None).map(make_parser(manifest)),
        parse_batches(read_file_records(file, None).batch(8), manifest),
    ):
        with pytest.raises(tf.errors.InvalidArgumentError, match=where):
            list(dataset)
    loader = example_loader(str(tmp_path))
    if kind in LOADER_KINDS:
        for multi_load in (False, True):  # record by record, or in batches
            loader = example_loader(str(tmp_path), multi_load=multi_load)
            with pytest.raises(tf.errors.InvalidArgumentError, match=where):
                loader_labels(loader)
    ((where, index, _),) = loader.check(verbose=0).errors
    assert (where, index) == (file, 13)


def write_wrong_type(file, first=0):
    """12 SequenceExamples labelled `first + i`, each with one `tokens`
    element; record 4's holds floats where the manifest says int64."""
    with tf.io.TFRecordWriter(file) as writer:
        for i in range(NUM_RECORDS):
            record = tf.train.SequenceExample()
            record.context.feature["label"].int64_list.value.append(first + i)
            element = record.feature_lists.feature_list["tokens"].feature.add()
            values = element.float_list if i == 4 else element.int64_list
            values.value.append(i)
            writer.write(record.SerializeToString())


def test_a_wrong_type_in_a_feature_list_is_named(originals, tmp_path):
    """The check and a raising loader name record 4 (a skipping loader leaves
    it out in test_a_skipping_loader_leaves_out_bad_feature_lists)."""
    source, _ = originals[None]
    load_manifest(source).save(tmp_path)
    file = str(tmp_path / NAME)
    write_wrong_type(file)
    check = check_dataset(load_manifest(tmp_path), [file], verbose=0)
    assert check.errors == (
        (
            file,
            4,
            "feature list `tokens` element 0 is stored as another type than the "
            "manifest says (TensorFlow expected int64)",
        ),
    )
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=f"record 4 of file {file}"
    ):
        loader_labels(TFRecordLoader(**loader_config(str(tmp_path))))


def sequence_record(i, lists=("tokens",)):
    """A SequenceExample like `records()`'s record i, with the feature lists
    `lists` (each holding i % 3 elements: record 0's are present but empty)."""
    record = tf.train.SequenceExample()
    record.context.feature["label"].int64_list.value.append(i)
    for name in lists:
        feature_list = record.feature_lists.feature_list[name]
        for t in range(i % 3):
            feature_list.feature.add().int64_list.value.append(100 * i + t)
    return record.SerializeToString()


def label_example(i):
    """A tf.train.Example with record i's label, and no feature lists."""
    feature = tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))
    return tf.train.Example(
        features=tf.train.Features(feature={"label": feature})
    ).SerializeToString()


#: Records missing the manifest's feature list `tokens`, as the record i.
MISSING_LIST = {
    "Example": label_example,
    "other feature list": lambda i: sequence_record(i, ("other",)),
    "no feature lists": lambda i: sequence_record(i, ()),
}
MISSING_MESSAGES = {
    "Example": "feature list `tokens` is missing: the record has no feature lists "
    "(a tf.train.Example has none), but the manifest sets allow_var_len true, so "
    "its records are SequenceExamples",
    "other feature list": "feature list `tokens` is missing from the record, which "
    "holds other feature lists",
}
MISSING_MESSAGES["no feature lists"] = MISSING_MESSAGES["Example"]
#: The records that lack `tokens` in `write_missing_list`'s files.
MISSING_AT = (3, 7)


def write_missing_list(file, kind, first=0):
    """12 records labelled `first + i`: `sequence_record`s, but those at
    `MISSING_AT`, which lack `tokens` as `MISSING_LIST[kind]` makes them."""
    with tf.io.TFRecordWriter(file) as writer:
        for i in range(NUM_RECORDS):
            make = MISSING_LIST[kind] if i in MISSING_AT else sequence_record
            writer.write(make(first + i))


@pytest.mark.parametrize("kind", sorted(MISSING_LIST))
def test_a_record_without_the_feature_list_is_an_error_not_an_empty_sequence(
    originals, tmp_path, kind
):
    """Records 3 and 7 lack `tokens` (an Example, or a SequenceExample without
    it); record 0's `tokens` is present but empty, a valid empty sequence.
    Raising loaders (seconds each to build) read the records of each message
    (a skipping one leaves them out in
    test_a_skipping_loader_leaves_out_bad_feature_lists); every kind goes
    through the parsers and the checks."""
    source, _ = originals[None]
    load_manifest(source).save(tmp_path)
    file = str(tmp_path / NAME)
    bad = MISSING_AT
    write_missing_list(file, kind)
    manifest = load_manifest(tmp_path)
    message = MISSING_MESSAGES[kind]
    check = TFRecordLoader(**loader_config(str(tmp_path))).check(verbose=0)
    assert check.errors == tuple((file, i, message) for i in bad)
    assert check_dataset(manifest, [file], verbose=0).errors == check.errors
    # raise: one record, a batch, each naming file and record 3
    where = re.escape(f"record 3 of file {file}: {message}")
    for dataset in (
        read_file_records(file, None).map(make_parser(manifest)),
        parse_batches(read_file_records(file, None).batch(8), manifest),
    ):
        with pytest.raises(tf.errors.InvalidArgumentError, match=where):
            list(dataset)
    # the loader raises too (read for each message: "no feature lists" gives
    # an Example's)
    if kind != "no feature lists":
        with pytest.raises(tf.errors.InvalidArgumentError, match=where):
            loader_labels(TFRecordLoader(**loader_config(str(tmp_path))))
    features, valid = make_parser(manifest, on_error="skip")(
        tf.constant(MISSING_LIST[kind](3)), tf.constant(file), tf.constant(3, tf.int64)
    )
    assert not bool(valid) and features["tokens"].shape == (0,)
    elements = read_file_records(file, None).map(make_parser(manifest, on_error="skip"))
    valid = [bool(ok) for _, ok in elements]
    assert valid == [i not in bad for i in range(NUM_RECORDS)]


def test_a_skipping_loader_leaves_out_bad_feature_lists(originals, tmp_path):
    """One skipping loader (seconds to build) over a file of each problem: a
    wrong type in a feature list, and the feature list missing (from an
    Example, and from a SequenceExample holding others; a SequenceExample
    without feature lists gives an Example's message). It leaves out and
    counts exactly those records, and keeps those whose `tokens` are present
    but empty."""
    source, _ = originals[None]
    manifest = dataclasses.replace(load_manifest(source), record_counts=None)
    manifest.save(tmp_path)
    write_wrong_type(str(tmp_path / "part-00000-of-00003.tfrecords"))
    bad = [4]
    for shard, kind in ((1, "Example"), (2, "other feature list")):
        first = NUM_RECORDS * shard
        file = str(tmp_path / f"part-{shard:05d}-of-00003.tfrecords")
        write_missing_list(file, kind, first)
        bad += [first + i for i in MISSING_AT]
    loader = TFRecordLoader(**loader_config(str(tmp_path), on_error="skip"))
    kept = [i for i in range(3 * NUM_RECORDS) if i not in bad]
    assert loader_labels(loader) == kept
    assert loader.skipped_records == len(bad) == 5


def test_present_empty_feature_lists_read_as_empty_sequences(originals, tmp_path):
    source, _ = originals[None]
    load_manifest(source).save(tmp_path)
    file = str(tmp_path / NAME)
    with tf.io.TFRecordWriter(file) as writer:
        for i in range(NUM_RECORDS):
            writer.write(sequence_record(3 * i))  # every feature list empty
    assert check_dataset(load_manifest(tmp_path), [file], verbose=0).ok
    loader = TFRecordLoader(**loader_config(str(tmp_path)))
    assert loader_labels(loader) == [3 * i for i in range(NUM_RECORDS)]


def test_a_batch_that_fails_to_parse_keeps_its_good_records_in_order(tmp_path):
    bad = {1: "float for int", 2: "wrong length", 5: "unparsable bytes"}
    file = write_examples(str(tmp_path), {**bad, 17: "cut Example"})
    skipped = tf.Variable(0, dtype=tf.int64)
    batches = parse_batches(
        read_file_records(file, None).batch(20),  # parsed again in 16 and 4
        Manifest.from_dict(EXAMPLE_MANIFEST),
        on_error="skip",
        counter=skipped,
        num_parallel_calls=2,
        deterministic=True,
    )
    xs = [row.tolist() for batch in batches for row in batch["x"].numpy()]
    expected = [i for i in range(20) if i not in (1, 2, 5, 17)]
    assert xs == [[i, i] for i in expected]
    assert int(skipped.numpy()) == 4
