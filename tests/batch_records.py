"""The batches of every builder, engine and option set, as digests.

`CASES` maps a case name to a function of the engine that returns a fresh
`(builder, args, kwargs)`; `build(*args, engine=engine, **kwargs)` makes the
dataset. `digests` iterates it for `EPOCHS` epochs (one iteration per epoch:
epoch 0, then epoch 1) and hashes every batch of each epoch, bit for bit:
the path of every array in the batch's structure, its dtype, shape and raw
bytes, and `len()` of the dataset. `tests/data/batch_digests.json` holds the
digests recorded before a refactoring, one entry per `"case/engine"`;
`tests/test_batches_unchanged.py` checks that the code still makes them.

Only the public API is used (`kerasbatch.XBuilder`, `kerasbatch.Padding`,
`kerasbatch.ModelInputs`, `kerasbatch.Reducer`, and built-in reducers as
config dicts of their registered Keras names), so the cases keep working
while internal modules move.

Record again (from the repository root) only where the batches are meant to
change:

    python -m tests.batch_records --write
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import sys
import time
import warnings

import numpy as np

import kerasbatch

ENGINES = ("tf.data", "grain", "python")
EPOCHS = 2
DIGESTS = pathlib.Path(__file__).parent / "data" / "batch_digests.json"

#: Engines a case cannot run on, each with (a pattern of) the documented
#: error that `build` raises there: `{case: {engine: message pattern}}`.
#: Every other engine of `ENGINES` is recorded.
REFUSED = {}

#: The cases whose engines do not all make the same batches today, and why.
#: On every other case, all the engines of the case give one digest.
DIFFERS_BY_ENGINE = {}

# ------------------------------------------------------------------- data
_NUM = 48
_rng = np.random.default_rng(20240611)
LENGTHS = _rng.integers(2, 41, _NUM)
#: Token ids in [1, 100), one sequence per element, 2 to 40 long.
TOKENS = [_rng.integers(1, 100, n).astype(np.int32) for n in LENGTHS]
#: Per-frame (n, 3) float features, aligned with TOKENS.
FRAMES = [_rng.normal(size=(n, 3)).astype(np.float32) for n in LENGTHS]
#: Per-frame int targets and float weights, aligned with TOKENS.
TAGS = [_rng.integers(0, 5, n).astype(np.int32) for n in LENGTHS]
FRAME_WEIGHTS = [_rng.random(n).astype(np.float32) for n in LENGTHS]
#: A second sequence component of other lengths (1 to 24).
CHARS = [_rng.integers(1, 30, n).astype(np.int32) for n in _rng.integers(1, 25, _NUM)]
#: Per-example labels, weights and features.
LABELS = _rng.integers(0, 3, _NUM).astype(np.int32)
WEIGHTS = _rng.random(_NUM).astype(np.float32)
SPEAKER = _rng.normal(size=(_NUM, 2)).astype(np.float32)
#: Sparse (n, 3) elements for the window builder's sparse component.
_SPARSE_DENSE = [
    ((_rng.random((n, 3)) < 0.4) * (i + 1)).astype(np.float32)
    for i, n in enumerate(_rng.integers(1, 6, 20))
]
del _rng


def _dict_x():
    return {"tokens": TOKENS, "chars": CHARS, "speaker": SPEAKER}


# ------------------------------------------------------------------ cases
CASES = {}


def _case(name, make, refused=None):
    """Registers case `name`: `make(engine)` returns a fresh `(builder,
    args, kwargs)`; `refused` maps the engines it cannot run on to (a
    pattern of) the error `build` raises there."""
    if name in CASES:
        raise ValueError(f"case {name!r} is defined twice")
    CASES[name] = make
    if refused:
        REFUSED[name] = refused


def _planned(name, builder_class, settings, *args, refused=None, **kwargs):
    """A case of an in-memory builder: a fresh builder of `settings` per
    call, built on `args` / `kwargs` whatever the engine."""

    def make(engine):
        return builder_class(**settings), args, kwargs

    _case(name, make, refused)


P, S, B = kerasbatch.PaddedBuilder, kerasbatch.SortedBuilder, kerasbatch.BucketBuilder
Padding, ModelInputs = kerasbatch.Padding, kerasbatch.ModelInputs
KERAS_HUB = {"names": {"x": "token_ids"}, "padding_mask": "padding_mask"}

# PaddedBuilder
_planned("padded/labels", P, {"batch_size": 8, "seed": 1}, TOKENS, LABELS)
_planned(
    "padded/x_only_no_shuffle_output_lengths",
    P,
    {"batch_size": 7, "shuffle": False, "output_lengths": True},
    TOKENS,
)
_planned(
    "padded/remainder_drop",
    P,
    {"batch_size": 10, "seed": 2, "remainder": "drop"},
    TOKENS,
    LABELS,
)
_planned(
    "padded/remainder_pad", P, {"batch_size": 10, "remainder": "pad"}, TOKENS, LABELS
)
_planned(
    "padded/remainder_even",
    P,
    {"batch_size": 10, "remainder": "even", "seed": 3},
    TOKENS,
    LABELS,
)
_planned(
    "padded/batch_multiple",
    P,
    {"batch_size": 10, "batch_multiple": 4, "seed": 4},
    TOKENS,
    LABELS,
)
_planned(
    "padded/pad_to_multiple_padding_value",
    P,
    {"batch_size": 8, "pad_to_multiple": 8, "padding": {"value": 7}},
    TOKENS,
    LABELS,
)
_planned(
    "padded/max_length_truncate",
    P,
    {"batch_size": 8, "max_length": 20, "overflow": "truncate"},
    TOKENS,
    TAGS,
)
_planned(
    "padded/max_length_drop_sample_weight_per_example",
    P,
    {"batch_size": 8, "max_length": 25, "overflow": "drop", "seed": 5},
    TOKENS,
    LABELS,
    WEIGHTS,
)
_planned(
    "padded/output_mask_frame_targets",
    P,
    {"batch_size": 8, "output_mask": True},
    TOKENS,
    TAGS,
)
_planned(
    "padded/sample_weight_per_frame_output_mask",
    P,
    {"batch_size": 10, "output_mask": True, "remainder": "pad"},
    TOKENS,
    TAGS,
    FRAME_WEIGHTS,
)
_planned(
    "padded/dict_x_output_lengths",
    P,
    {"batch_size": 8, "output_lengths": True, "seed": 7},
    _dict_x(),
    TAGS,
)
_planned(
    "padded/padding_per_component",
    P,
    {
        "batch_size": 8,
        "padding": {
            "tokens": Padding(value=-1),
            "chars": Padding(value=99, length=32),
            "y": {"value": -1, "length": 48},
        },
    },
    _dict_x(),
    TAGS,
)
_planned(
    "padded/model_inputs_keras_hub",
    P,
    {
        "batch_size": 8,
        "model_inputs": ModelInputs(**KERAS_HUB, constants={"segment_ids": 0}),
    },
    TOKENS,
    LABELS,
)
_planned(
    "padded/model_inputs_shift_targets",
    P,
    {
        "batch_size": 8,
        "seed": 8,
        "model_inputs": ModelInputs(**KERAS_HUB, shift_targets=True),
    },
    TOKENS,
)

# SortedBuilder
_planned("sorted/labels", S, {"batch_size": 8, "seed": 9}, TOKENS, LABELS)
_planned(
    "sorted/no_shuffle_remainder_pad",
    S,
    {"batch_size": 10, "shuffle": False, "remainder": "pad"},
    TOKENS,
    LABELS,
)
_planned(
    "sorted/truncate_output_mask",
    S,
    {"batch_size": 8, "max_length": 24, "overflow": "truncate", "output_mask": True},
    TOKENS,
    TAGS,
    FRAME_WEIGHTS,
)
_planned(
    "sorted/even_batch_multiple",
    S,
    {"batch_size": 10, "remainder": "even", "batch_multiple": 3},
    TOKENS,
    LABELS,
)
_planned(
    "sorted/dict_x_model_inputs",
    S,
    {
        "batch_size": 8,
        "output_lengths": True,
        "model_inputs": ModelInputs(
            names={"tokens": "token_ids"}, padding_mask="mask", mask_of="tokens"
        ),
    },
    {"tokens": TOKENS, "speaker": SPEAKER},
    LABELS,
)

# BucketBuilder
_planned(
    "bucket/list_boundaries",
    B,
    {"boundaries": [10, 20, 30], "batch_size": 6, "seed": 10},
    TOKENS,
    LABELS,
)
_planned(
    "bucket/auto",
    B,
    {"boundaries": "auto", "num_buckets": 4, "batch_size": 6},
    TOKENS,
    LABELS,
)
_planned(
    "bucket/quantile",
    B,
    {"boundaries": "quantile", "num_buckets": 3, "batch_size": 6, "seed": 11},
    TOKENS,
    TAGS,
)
_planned(
    "bucket/max_tokens",
    B,
    {"boundaries": [10, 20, 30], "max_tokens": 160},
    TOKENS,
    LABELS,
)
_planned(
    "bucket/max_tokens_quadratic_length",
    B,
    {
        "boundaries": "uniform",
        "num_buckets": 4,
        "max_tokens": 240,
        "quadratic_length": 16,
        "max_length": 40,
    },
    TOKENS,
    LABELS,
)
_planned(
    "bucket/bucket_batch_sizes",
    B,
    {"boundaries": [10, 20, 30], "bucket_batch_sizes": [12, 8, 6, 4], "seed": 12},
    TOKENS,
    LABELS,
)
_planned(
    "bucket/truncate_no_shuffle",
    B,
    {
        "boundaries": [8, 16, 24, 32],
        "batch_size": 5,
        "truncate": True,
        "shuffle": False,
    },
    TOKENS,
    TAGS,
)
_planned(
    "bucket/pad_to_bucket_remainder_pad",
    B,
    {
        "boundaries": [10, 20, 30],
        "batch_size": 5,
        "pad_to_bucket": True,
        "max_length": 40,
        "remainder": "pad",
    },
    TOKENS,
    LABELS,
)
_planned(
    "bucket/pad_to_bucket_even_pad_to_multiple",
    B,
    {
        "boundaries": "equal_tokens",
        "num_buckets": 3,
        "batch_size": 7,
        "pad_to_bucket": True,
        "remainder": "even",
        "pad_to_multiple": 8,
        "seed": 13,
    },
    TOKENS,
    LABELS,
    WEIGHTS,
)
_planned(
    "bucket/padding_bucket_length_output_mask",
    B,
    {
        "boundaries": [12, 24],
        "batch_size": 6,
        "max_length": 40,
        "output_mask": True,
        "padding": {"y": Padding(value=-1, length="bucket")},
    },
    TOKENS,
    TAGS,
)
_planned(
    "bucket/dict_x_frame_weights",
    B,
    {"boundaries": [15, 30], "batch_size": 6, "output_lengths": True},
    _dict_x(),
    TAGS,
    FRAME_WEIGHTS,
)
_planned(
    "bucket/max_length_drop_remainder_drop",
    B,
    {
        "boundaries": [10, 20],
        "batch_size": 5,
        "max_length": 30,
        "overflow": "drop",
        "drop_remainder": True,
        "seed": 14,
    },
    TOKENS,
    LABELS,
)
_planned(
    "bucket/shift_targets_pad_to_bucket",
    B,
    {
        "boundaries": [16, 32],
        "batch_size": 6,
        "pad_to_bucket": True,
        "model_inputs": ModelInputs(**KERAS_HUB, shift_targets=True),
    },
    TOKENS,
)

# PackedBuilder
_PK = kerasbatch.PackedBuilder
_planned(
    "packed/example_targets_truncate_remainder_drop",
    _PK,
    {
        "sequence_length": 32,
        "batch_size": 4,
        "overflow": "truncate",
        "remainder": "drop",
        "seed": 15,
    },
    TOKENS,
    LABELS,
)
_planned(
    "packed/max_segments_remainder_pad",
    _PK,
    {
        "sequence_length": 48,
        "batch_size": 5,
        "max_segments_per_row": 3,
        "remainder": "pad",
        "padding": {"y": Padding(value=-1)},
    },
    TOKENS,
    LABELS,
    WEIGHTS,
)
_planned(
    "packed/model_inputs_segment_ids",
    _PK,
    {
        "sequence_length": 64,
        "batch_size": 3,
        "segment_ids_name": "segment_ids",
        "positions_name": "position_ids",
        "model_inputs": ModelInputs(**KERAS_HUB, shift_targets=True),
        "seed": 16,
    },
    TOKENS,
)
_planned(
    "packed/even_batch_multiple_no_shuffle",
    _PK,
    {
        "sequence_length": 48,
        "batch_size": 4,
        "remainder": "even",
        "batch_multiple": 3,
        "pad_to_multiple": 8,
        "shuffle": False,
    },
    TOKENS,
    TAGS,
)
_planned(
    "packed/dict_x_frame_targets_normalize",
    _PK,
    {
        "sequence_length": 48,
        "batch_size": 4,
        "normalize_segments": True,
        "padding": {"tokens": Padding(value=-1)},
    },
    {"tokens": TOKENS, "frames": FRAMES, "speaker": SPEAKER},
    TAGS,
    FRAME_WEIGHTS,
)

# ChunkBuilder
_CH = kerasbatch.ChunkBuilder
_planned(
    "chunk/frames", _CH, {"chunk_size": 8, "batch_size": 16, "seed": 17}, FRAMES, TAGS
)
_planned(
    "chunk/step_context_output_mask",
    _CH,
    {
        "chunk_size": 6,
        "chunk_step": 4,
        "context": (2, 3),
        "min_chunk_size": 2,
        "batch_size": 20,
        "output_mask": True,
    },
    FRAMES,
    TAGS,
)
_planned(
    "chunk/keys_dict_x_remainder_pad",
    _CH,
    {
        "chunk_size": 5,
        "context": 1,
        "keys": ["frames", "y"],
        "batch_size": 16,
        "output_lengths": True,
        "remainder": "pad",
    },
    {"frames": FRAMES, "speaker": SPEAKER, "chars": CHARS},
    TAGS,
)
_planned(
    "chunk/padding_even_sample_weight",
    _CH,
    {
        "chunk_size": 7,
        "context": 2,
        "batch_size": 24,
        "remainder": "even",
        "padding": {"x": Padding(value=-1.0)},
        "shuffle": False,
    },
    FRAMES,
    TAGS,
    WEIGHTS,
)


def _for_inference(output_mask):
    def make(engine):
        trained = _CH(8, context=(2, 1), batch_size=16, seed=18)
        if output_mask:
            return trained.for_inference(6, output_mask=True), (FRAMES, TAGS), {}
        return trained.for_inference(batch_size=6), (FRAMES,), {}

    return make


_case("chunk/for_inference", _for_inference(False))
_case("chunk/for_inference_output_mask", _for_inference(True))

# WindowBuilder
_W = kerasbatch.WindowBuilder


def _padded_batch(**config):
    """A `PaddedBatch` reducer as a config dict, by its registered Keras
    name (which does not name the module it lives in)."""
    return {"class_name": "kerasbatch>PaddedBatch", "config": config}


_planned(
    "window/batches",
    _W,
    {"size": 6, "shift": 6, "drop_remainder": False, "seed": 19},
    TOKENS,
    LABELS,
)
_planned(
    "window/sliding_stride_remainder_pad",
    _W,
    {"size": 4, "shift": 3, "stride": 2, "remainder": "pad", "pad_to_multiple": 8},
    TOKENS,
    LABELS,
    WEIGHTS,
)
_planned(
    "window/reducers_dict_x",
    _W,
    {
        "size": 5,
        "shift": 4,
        "reducers": {
            "tokens": _padded_batch(value=-1),
            "chars": _padded_batch(length=32),
            "speaker": "dense",
            "y": "padded",
        },
        "shuffle": False,
    },
    _dict_x(),
    TAGS,
)
_planned(
    "window/count_reducer",
    _W,
    {"size": 3, "shift": 2, "reducers": {"tokens": "count", "speaker": "padded"}},
    {"tokens": TOKENS, "speaker": SPEAKER},
)
_planned(
    "window/truncate_batch_multiple",
    _W,
    {
        "size": 5,
        "shift": 5,
        "drop_remainder": False,
        "max_length": 20,
        "overflow": "truncate",
        "batch_multiple": 4,
    },
    TOKENS,
    TAGS,
)
_TF_ONLY = r"which only the 'tf\.data' engine batches"
_planned(
    "window/user_reducer",
    _W,
    {
        "size": 4,
        "shift": 4,
        "reducers": {
            "y": kerasbatch.Reducer(
                lambda _: 0.0,
                lambda total, label: total + label,
                lambda total: total,
            )
        },
        "seed": 20,
    },
    TOKENS,
    LABELS.astype(np.float32),
    refused={"grain": _TF_ONLY, "python": _TF_ONLY},
)


def _window_sparse(engine):
    import tensorflow as tf

    sparse = [tf.sparse.from_dense(d) for d in _SPARSE_DENSE]
    builder = _W(3, shift=3, drop_remainder=False, seed=21)
    return builder, (sparse, LABELS[: len(sparse)]), {}


_case("window/sparse", _window_sparse, refused={"grain": _TF_ONLY, "python": _TF_ONLY})


# StreamBucketBuilder: a tf.data.Dataset on 'tf.data', a list on the others.
def _stream(elements, signature, settings, with_lengths, lengths=LENGTHS):
    def make(engine):
        builder = kerasbatch.StreamBucketBuilder(**settings)
        kwargs = {"lengths": lengths} if with_lengths else {}
        if engine == "tf.data":
            import tensorflow as tf

            source = tf.data.Dataset.from_generator(
                lambda: iter(elements), output_signature=signature()
            )
            return builder, (source,), kwargs
        return builder, (elements,), kwargs

    return make


def _signature(*specs):
    def signature():
        import tensorflow as tf

        made = [
            {k: tf.TensorSpec(*v) for k, v in spec.items()}
            if isinstance(spec, dict)
            else tf.TensorSpec(*spec)
            for spec in specs
        ]
        return made[0] if len(made) == 1 else tuple(made)

    return signature


_LABELLED = list(zip(TOKENS, LABELS, strict=True))
_LABELLED_SIGNATURE = _signature(([None], "int32"), ([], "int32"))
#: A stream's PyDataset needs its number of batches, which only lengths give.
_NEEDS_LENGTHS = r"on the 'python' engine .* needs its number of batches"
_STREAM = {"boundaries": [10, 20, 30], "batch_size": 6, "buffer_size": 16}
_case(
    "stream/lengths",
    _stream(_LABELLED, _LABELLED_SIGNATURE, {**_STREAM, "seed": 22}, True),
)
_case(
    "stream/no_lengths",
    _stream(_LABELLED, _LABELLED_SIGNATURE, {**_STREAM, "seed": 22}, False),
    refused={"python": _NEEDS_LENGTHS},
)
_case(
    "stream/auto_max_tokens_pad_to_bucket",
    _stream(
        _LABELLED,
        _LABELLED_SIGNATURE,
        {
            "boundaries": "auto",
            "num_buckets": 4,
            "max_tokens": 200,
            "pad_to_bucket": True,
            "max_length": 40,
            "remainder": "pad",
            "buffer_size": 20,
        },
        True,
    ),
)
_case(
    "stream/dict_frames_truncate_output_mask",
    _stream(
        [
            ({"tokens": t, "frames": f}, y, w)
            for t, f, y, w in zip(TOKENS, FRAMES, TAGS, WEIGHTS, strict=True)
        ],
        _signature(
            {"tokens": ([None], "int32"), "frames": ([None, 3], "float32")},
            ([None], "int32"),
            ([], "float32"),
        ),
        {
            "boundaries": [8, 16, 24],
            "batch_size": 5,
            "buffer_size": 12,
            "truncate": True,
            "output_mask": True,
            "output_lengths": True,
            "seed": 23,
        },
        False,
    ),
    refused={"python": _NEEDS_LENGTHS},
)
_case(
    "stream/shift_targets_no_shuffle_drop",
    _stream(
        TOKENS,
        _signature(([None], "int32")),
        {
            "boundaries": [10, 20],
            "bucket_batch_sizes": [8, 6, 4],
            "shuffle": False,
            "max_length": 30,
            "overflow": "drop",
            "pad_to_multiple": 8,
            "remainder": "drop",
            "batch_multiple": 4,
            "model_inputs": ModelInputs(**KERAS_HUB, shift_targets=True),
        },
        True,
    ),
)


def engines_of(name):
    """The engines `name` is recorded on (every engine it does not refuse)."""
    return [engine for engine in ENGINES if engine not in REFUSED.get(name, {})]


def keys():
    """Every recorded `"case/engine"` key."""
    return [f"{name}/{engine}" for name in CASES for engine in engines_of(name)]


def split_key(key):
    """`(case, engine)` of a `"case/engine"` key."""
    name, engine = key.rsplit("/", 1)
    return name, engine


# ---------------------------------------------------------------- hashing
def _leaves(value, path):
    """`(path, numpy array)` of every array of a batch: tuples and lists by
    index, dicts by sorted key, a `tf.SparseTensor` by its indices, values
    and dense shape."""
    if isinstance(value, dict):
        for key in sorted(value):
            yield from _leaves(value[key], f"{path}[{key!r}]")
    elif isinstance(value, tuple | list):
        for index, part in enumerate(value):
            yield from _leaves(part, f"{path}[{index}]")
    elif type(value).__name__ == "SparseTensor":
        for part in ("indices", "values", "dense_shape"):
            yield from _leaves(getattr(value, part), f"{path}.{part}")
    else:
        yield path, np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def _update(digest, batch, index):
    for path, array in _leaves(batch, f"batch{index}"):
        digest.update(f"|{path}|{array.dtype.str}|{array.shape}|".encode())
        if array.dtype.kind in "OSU":  # strings: their values, not pointers
            digest.update(repr(array.tolist()).encode())
        else:
            digest.update(np.ascontiguousarray(array).tobytes())


def _length(dataset):
    try:
        return str(len(dataset))
    except TypeError:  # a stream of unknown cardinality
        return "unknown"


def build(name, engine):
    """`(builder, dataset)` of case `name` built by `engine`."""
    builder, args, kwargs = CASES[name](engine)
    with warnings.catch_warnings():
        # The numpy engines warn that Keras on TensorFlow cannot fit on
        # batches of varying length; iterating them is not affected.
        warnings.filterwarnings("ignore", "On the TensorFlow backend, Keras reads")
        return builder, builder.build(*args, engine=engine, **kwargs)


def digests(name, engine):
    """The sha256 hex digest of every epoch of case `name` on `engine`."""
    builder, dataset = build(name, engine)
    length = _length(dataset)
    result = []
    for epoch in range(EPOCHS):
        digest = hashlib.sha256(f"len={length}".encode())
        count = 0
        for count, batch in enumerate(dataset, 1):
            _update(digest, batch, count - 1)
        digest.update(f"|batches={count}".encode())
        started = builder.last_started_epoch
        if started != epoch:
            raise AssertionError(
                f"{name}/{engine}: iteration {epoch} ran epoch {started}, not {epoch}"
            )
        result.append(digest.hexdigest())
    return result


def record(names=None):
    """`{"case/engine": [epoch digests]}` of every case (or of `names`)."""
    return {
        key: digests(*split_key(key))
        for key in keys()
        if names is None or split_key(key)[0] in names
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write", action="store_true", help=f"write the digests to {DIGESTS}"
    )
    parser.add_argument("--case", action="append", help="only these cases")
    arguments = parser.parse_args(argv)
    start = time.perf_counter()
    recorded = record(arguments.case)
    seconds = time.perf_counter() - start
    if arguments.write:
        if arguments.case:
            parser.error("--write records every case: leave out --case")
        DIGESTS.parent.mkdir(parents=True, exist_ok=True)
        DIGESTS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(recorded)} digests to {DIGESTS} in {seconds:.1f} s")
    else:
        print(json.dumps(recorded, indent=1, sort_keys=True))
        print(f"{len(recorded)} digests in {seconds:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
