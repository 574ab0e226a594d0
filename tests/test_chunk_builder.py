"""ChunkBuilder: chunks with context, shuffling, inference, reassembly, fit."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import kerasbatch
from kerasbatch import Padding
from kerasbatch.callbacks import EpochReshuffle, PaddingEfficiency
from kerasbatch.losses import MaskedMeanSquaredError


def frame_ids(lengths, features=1):
    """Frame t of sequence i holds `1000 i + t + 1`: values name their frame."""
    return [
        np.repeat((1000 * i + np.arange(n) + 1.0)[:, None], features, axis=1).astype(
            "float32"
        )
        for i, n in enumerate(lengths)
    ]


def window(sequence, offset, length, left, right, size):
    """Frames `offset - left .. offset + length + right`, zeros outside, to
    `left + size + right` frames."""
    out = np.zeros((left + size + right, *sequence.shape[1:]), sequence.dtype)
    for t in range(left + length + right):
        frame = offset - left + t
        if 0 <= frame < len(sequence):
            out[t] = sequence[frame]
    return out


def collect(dataset):
    """Per batch: the tuple of its parts (x alone, or x, y[, weights]) as numpy."""
    return [
        tuple(np.asarray(t) for t in element)
        if isinstance(element, tuple)
        else (np.asarray(element),)
        for element in dataset
    ]


LENGTHS = [23, 1, 9, 40, 17]


# --------------------------------------------------------------- contents
def test_chunks_hold_their_frames_with_context_and_targets_without():
    x = frame_ids(LENGTHS, features=2)
    y = [s[:, 0] * 2 for s in x]
    builder = kerasbatch.ChunkBuilder(
        6, chunk_step=4, context=(2, 3), batch_size=5, seed=3, output_mask=True
    )
    dataset = builder.build(x, y)
    assert dataset.element_spec[0].shape.as_list() == [None, 11, 2]
    assert dataset.element_spec[1].shape.as_list() == [None, 6]
    chunks = builder.chunks()
    row = 0
    for bx, by, mask in collect(dataset):
        for cx, cy, cmask in zip(bx, by, mask, strict=True):
            sequence = chunks.sequence[row]
            offset, length = chunks.offset[row], chunks.length[row]
            np.testing.assert_array_equal(
                cx, window(x[sequence], offset, length, 2, 3, 6)
            )
            np.testing.assert_array_equal(
                cy, window(y[sequence], offset, length, 0, 0, 6)
            )
            np.testing.assert_array_equal(cmask, np.arange(6) < length)
            row += 1
    assert row == len(chunks) == len(builder.chunk_table)


def test_keys_left_whole_and_per_example_components_follow_their_sequence():
    frames = frame_ids([7, 3, 5])
    x = {
        "frames": frames,
        "transcript": [np.arange(1, n + 1) for n in (2, 4, 1)],
        "speaker": np.array([10, 11, 12]),
    }
    y = [f[:, 0] for f in frames]
    builder = kerasbatch.ChunkBuilder(
        3, context=1, keys=["frames", "y"], batch_size=8, shuffle=False
    )
    bx, by = next(iter(builder.build(x, y)))
    chunks = builder.chunks()
    np.testing.assert_array_equal(bx["speaker"], 10 + chunks.sequence)
    assert bx["transcript"].shape == (len(chunks), 4)  # whole, padded per batch
    for row, sequence in enumerate(chunks.sequence):
        n = len(x["transcript"][sequence])
        np.testing.assert_array_equal(
            bx["transcript"][row, :n], x["transcript"][sequence]
        )
    assert bx["frames"].shape == (len(chunks), 5, 1)
    assert by.shape == (len(chunks), 3)


def test_padding_value_fills_short_chunks_and_the_context_beyond_borders():
    x = [np.ones(3, "float32")]
    builder = kerasbatch.ChunkBuilder(
        4, context=2, shuffle=False, padding={"x": Padding(value=-1.0)}
    )
    ((batch,),) = collect(builder.build(x))
    np.testing.assert_array_equal(batch, [[-1, -1, 1, 1, 1, -1, -1, -1]])


def test_chunked_sample_weights_and_output_lengths():
    x = frame_ids([5, 2])
    y = [s[:, 0] for s in x]
    weights = [np.full(n, i + 2.0) for i, n in enumerate([5, 2])]
    builder = kerasbatch.ChunkBuilder(
        3, context=(1, 0), shuffle=False, output_lengths=True, output_mask=True
    )
    bx, _, mask = next(iter(builder.build(x, y, weights)))
    np.testing.assert_array_equal(bx["x_length"], [4, 3, 3])  # frames + context
    np.testing.assert_array_equal(mask, [[2, 2, 2], [2, 2, 0], [3, 3, 0]])


# ------------------------------------------------------- short last chunks
def test_min_chunk_size_drops_short_last_chunks_and_counts_them():
    x = frame_ids([10, 2, 9])  # last chunks of 2, 2 and 1 frames
    builder = kerasbatch.ChunkBuilder(4, min_chunk_size=2, shuffle=False)
    ((batch,),) = collect(builder.build(x))
    assert len(batch) == len(builder.chunks()) == 6
    assert builder.statistics().dropped == 1
    assert builder.chunks().length.min() == 2
    restored = builder.reassemble(batch)
    np.testing.assert_array_equal(restored[0], x[0])
    np.testing.assert_array_equal(np.isnan(restored[2][:, 0]), np.arange(9) == 8)


def test_statistics_count_the_padding_of_short_chunks_exactly():
    x = frame_ids([10, 3])  # chunks of 4, 4, 2 and 3 frames
    builder = kerasbatch.ChunkBuilder(4, context=1, batch_size=3, shuffle=False)
    builder.build(x, [s[:, 0] for s in x])
    statistics = builder.statistics()
    real_x = (4 + 2) + (4 + 2) + (2 + 2) + (3 + 2)
    real_y = 4 + 4 + 2 + 3
    assert statistics.component_efficiency == pytest.approx(
        {"x": real_x / (4 * 6), "y": real_y / (4 * 4)}
    )
    assert statistics.padding_efficiency == pytest.approx(
        (real_x + real_y) / (4 * 6 + 4 * 4)
    )
    assert statistics.num_batches == 2 and statistics.num_elements == 4
    assert statistics.distinct_shapes == 2  # batch sizes 3 and 1


# ------------------------------------------------------------ exactly once
@settings(max_examples=15, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 25), min_size=1, max_size=8).filter(any),
    size=st.integers(1, 7),
    batch_size=st.integers(1, 6),
    seed=st.integers(0, 3),
    epoch=st.integers(0, 2),
    data=st.data(),
)
def test_every_frame_is_fed_as_often_as_chunks_cover_it(
    lengths, size, batch_size, seed, epoch, data
):
    step = data.draw(st.integers(1, size))
    x = frame_ids(lengths)
    builder = kerasbatch.ChunkBuilder(
        size, chunk_step=step, batch_size=batch_size, seed=seed, output_mask=True
    )
    dataset = builder.build(x, [s[:, 0] for s in x])
    builder.set_epoch(epoch)
    seen = []
    for _, by, mask in collect(dataset):
        seen.extend(by[mask > 0].astype(int).tolist())
    counts = dict(zip(*np.unique(seen, return_counts=True), strict=True))
    coverage = builder.chunk_table.coverage(lengths)
    for i, covered in enumerate(coverage):
        for t, count in enumerate(covered):
            assert counts.pop(1000 * i + t + 1) == count
            if step == size:
                assert count == 1
    assert not counts  # nothing else was fed
    assert builder.statistics(epoch).dropped == 0


def test_chunks_of_different_sequences_are_shuffled_together():
    builder = kerasbatch.ChunkBuilder(4, batch_size=8, seed=0)
    builder.build(frame_ids(LENGTHS))
    sequences = builder.chunks(0).sequence
    assert not np.array_equal(sequences, np.sort(sequences))
    assert len(set(sequences[:8].tolist())) > 1


# ------------------------------------------------------------- determinism
def test_chunk_order_is_a_pure_function_of_seed_and_epoch():
    x = frame_ids(LENGTHS)
    first = kerasbatch.ChunkBuilder(5, chunk_step=3, batch_size=4, seed=7)
    second = kerasbatch.ChunkBuilder.from_config(first.get_config())
    dataset = first.build(x, [s[:, 0] for s in x])
    second.build(x, [s[:, 0] for s in x])
    for epoch in (0, 1, 4):
        np.testing.assert_array_equal(
            first.plan(epoch).indices, second.plan(epoch).indices
        )
    assert not np.array_equal(first.plan(0).indices, first.plan(1).indices)
    other = kerasbatch.ChunkBuilder(5, chunk_step=3, batch_size=4, seed=8)
    other.build(x)
    assert not np.array_equal(first.plan(0).indices, other.plan(0).indices)
    for epoch in range(2):  # each iteration is the next epoch
        fed = np.concatenate([by[:, 0] for _, by in collect(dataset)])
        chunks = first.chunks(epoch)
        np.testing.assert_array_equal(fed, 1000 * chunks.sequence + chunks.offset + 1)
    first.set_epoch(4)
    fed = np.concatenate([by[:, 0] for _, by in collect(dataset)])
    chunks = first.chunks(4)
    np.testing.assert_array_equal(fed, 1000 * chunks.sequence + chunks.offset + 1)
    assert dataset.cardinality() == first.statistics().num_batches == len(list(dataset))


# --------------------------------------------------- inference, reassembly
def predict_whole(model, dataset):
    """`model.predict` of whole sequences, whose batches differ in length.

    TensorFlow's `predict` joins such batches into a `tf.RaggedTensor`; JAX's
    joins batches of one length only, so there each batch is predicted on its
    own and the outputs padded to the longest (`reassemble` reads only each
    sequence's frames).
    """
    if keras.backend.backend() == "tensorflow":
        return model.predict(dataset, verbose=0)
    batches = dataset.as_numpy_iterator()
    outputs = [np.asarray(model.predict_on_batch(batch)) for batch in batches]
    longest = max(output.shape[1] for output in outputs)
    return np.concatenate(
        [
            np.pad(
                output,
                [(0, 0), (0, longest - output.shape[1])] + [(0, 0)] * (output.ndim - 2),
            )
            for output in outputs
        ]
    )


def identity_model(features):
    return keras.Sequential([keras.Input((None, features)), keras.layers.Identity()])


@pytest.mark.parametrize(("size", "step", "context"), [(8, 8, 0), (8, 3, (2, 5))])
def test_identity_model_outputs_reassemble_to_the_input(size, step, context):
    x = frame_ids(LENGTHS, features=2)
    builder = kerasbatch.ChunkBuilder(size, chunk_step=step, context=context, seed=1)
    predictions = identity_model(2).predict(builder.build(x), verbose=0)
    restored = builder.reassemble(predictions, cut_context=True)
    for original, back in zip(x, restored, strict=True):
        np.testing.assert_array_equal(back, original)
    # The outputs of the epoch that ran: another epoch's order is wrong.
    wrong = builder.reassemble(predictions, epoch=1, cut_context=True)
    assert not all(np.array_equal(a, b) for a, b in zip(x, wrong, strict=True))


def test_whole_sequence_inference_pads_by_the_context_and_trims_outputs():
    x = frame_ids(LENGTHS)
    builder = kerasbatch.ChunkBuilder(8, context=(2, 1), batch_size=16)
    whole = builder.for_inference(batch_size=2)
    assert (whole.chunk_size, whole.shuffle, whole.context) == (None, False, (2, 1))
    dataset = whole.build(x)
    batches = collect(dataset)
    assert [b.shape[1] for (b,) in batches] == [23 + 3, 40 + 3, 17 + 3]
    np.testing.assert_array_equal(batches[0][0][0, :, 0], [0, 0, *x[0][:, 0], 0])
    predictions = predict_whole(identity_model(1), dataset)  # ragged
    restored = whole.reassemble(predictions, cut_context=True)
    for original, back in zip(x, restored, strict=True):
        np.testing.assert_array_equal(back, original)


def test_empty_sequences_are_not_fed_but_get_an_empty_output():
    x = frame_ids([4, 0, 3])
    whole = kerasbatch.ChunkBuilder(4, context=1).for_inference()
    predictions = identity_model(1).predict(whole.build(x), verbose=0)
    assert len(predictions) == 2 and whole.statistics().dropped == 1
    restored = whole.reassemble(predictions, cut_context=True)
    assert [len(r) for r in restored] == [4, 0, 3]
    np.testing.assert_array_equal(restored[2], x[2])


def test_element_batch_repeats_one_chunk_as_the_pipeline_cuts_it():
    x = frame_ids([9])
    builder = kerasbatch.ChunkBuilder(4, context=(1, 2), output_mask=True)
    builder.build(x, [s[:, 0] for s in x])
    batch_x, batch_y, mask = builder.element_batch(2, 3)  # the last, 1 frame
    assert batch_x.shape == (3, 7, 1)
    np.testing.assert_array_equal(batch_x[:, :, 0], [[8, 9, 0, 0, 0, 0, 0]] * 3)
    np.testing.assert_array_equal(mask, [[1, 0, 0, 0]] * 3)


def test_valid_convolutions_give_the_same_outputs_on_chunks_and_whole_sequences():
    x = [s / 1000 for s in frame_ids(LENGTHS, features=3)]
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((None, 3)),
            keras.layers.Conv1D(4, 3, padding="valid", activation="tanh"),
            keras.layers.Conv1D(2, 4, padding="valid"),
        ]
    )  # shrinks time by 2 + 3 frames: context (2, 3)
    builder = kerasbatch.ChunkBuilder(7, chunk_step=5, context=(2, 3), batch_size=4)
    from_chunks = builder.reassemble(model.predict(builder.build(x), verbose=0))
    whole = builder.for_inference()
    from_whole = whole.reassemble(predict_whole(model, whole.build(x)))
    for a, b, sequence in zip(from_chunks, from_whole, x, strict=True):
        assert a.shape == (len(sequence), 2)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_outputs_that_keep_the_context_need_cut_context():
    builder = kerasbatch.ChunkBuilder(4, context=1, shuffle=False)
    builder.build(frame_ids([9]))
    outputs = np.zeros((3, 6, 1))
    with pytest.raises(
        ValueError,
        match=r"Chunk outputs have 6 frames, but chunks of chunk_size=4 need 4\. "
        r"They keep the context frames: pass cut_context=True",
    ):
        builder.reassemble(outputs)
    with pytest.raises(
        ValueError, match=r"have 4 frames, .* need 6 \(context included\)"
    ):
        builder.reassemble(np.zeros((3, 4)), cut_context=True)


def test_adapt_plans_chunks_from_lengths_alone():
    builder = kerasbatch.ChunkBuilder(4, chunk_step=2, batch_size=2, keys=["feats"])
    builder.adapt(np.array([10, 3]))
    assert len(builder.chunk_table) == 5
    assert builder.statistics().num_batches == 3


# --------------------------------------------------------------- training
class RecordingDenoiser(keras.Model):
    """A valid convolution whose train_step records each chunk's first frame."""

    def __init__(self, context):
        super().__init__()
        self.conv = keras.layers.Conv1D(1, sum(context) + 1, padding="valid")
        self.left_context = context[0]
        self.recorded = []

    def call(self, x):
        return self.conv(x)

    # The data is the last argument on every backend (JAX passes the state
    # first); run_eagerly makes it concrete.
    def train_step(self, *arguments):
        first_frame = np.asarray(arguments[-1][0])[:, self.left_context, 0]
        self.recorded.append(first_frame.astype(int).tolist())
        return super().train_step(*arguments)


@pytest.mark.backend
def test_fit_on_chunks_with_epoch_reshuffle_and_padding_efficiency():
    x = frame_ids(LENGTHS)
    y = [np.sin(s[:, 0]) for s in x]
    builder = kerasbatch.ChunkBuilder(
        8, chunk_step=6, context=(1, 2), batch_size=6, seed=4, output_mask=True
    )
    dataset = builder.build(x, y)
    model = RecordingDenoiser(context=(1, 2))  # shrinks time by 1 + 2 frames
    model.compile(optimizer="adam", loss=MaskedMeanSquaredError(), run_eagerly=True)
    history = model.fit(
        dataset,
        epochs=3,
        initial_epoch=1,
        verbose=0,
        shuffle=False,
        callbacks=[EpochReshuffle(builder), PaddingEfficiency(builder)],
    )
    batches = builder.statistics().num_batches
    for index, epoch in enumerate((1, 2)):
        chunks = builder.chunks(epoch)
        fed = sum(model.recorded[index * batches : (index + 1) * batches], [])
        assert fed == (1000 * chunks.sequence + chunks.offset + 1).tolist()
    assert history.history["padding_efficiency"] == [
        builder.statistics(1).padding_efficiency,
        builder.statistics(2).padding_efficiency,
    ]
    lengths = builder.chunk_table.length
    real = (lengths + 3).sum() + lengths.sum()
    assert history.history["padding_efficiency"][0] == pytest.approx(
        real / (len(lengths) * (11 + 8))
    )
    assert np.isfinite(history.history["loss"]).all()


# ------------------------------------------------------------------ config
CONFIGURED = [
    kerasbatch.ChunkBuilder(16),
    kerasbatch.ChunkBuilder(
        20,
        chunk_step=5,
        context=(3, 1),
        min_chunk_size=4,
        keys="features",
        batch_size=8,
        shuffle=False,
        seed=9,
        drop_remainder=True,
        padding={"features": Padding(value=-1.0)},
        output_lengths=True,
        output_mask=True,
        prefetch=2,
    ),
    kerasbatch.ChunkBuilder(None, context=2, keys=["x", "y"]),
]


@pytest.mark.parametrize("builder", CONFIGURED)
def test_config_round_trip(builder):
    config = builder.get_config()
    rebuilt = kerasbatch.ChunkBuilder.from_config(json.loads(json.dumps(config)))
    assert rebuilt == builder
    assert rebuilt.get_config() == config
    assert repr(rebuilt) == repr(builder)
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(builder)
    )
    assert restored == builder


def test_for_inference_keeps_keys_context_padding_and_lengths():
    trained = CONFIGURED[1]
    config = trained.for_inference().get_config()
    assert config["chunk_size"] is None and config["chunk_step"] is None
    assert config["keys"] == ["features"] and config["context"] == [3, 1]
    assert config["padding"] == trained.get_config()["padding"]
    assert config["output_lengths"] and not config["output_mask"]
    assert trained.for_inference(output_mask=True).output_mask


def test_whole_sequences_evaluate_with_masked_targets():
    x = frame_ids([6, 2])
    builder = kerasbatch.ChunkBuilder(4, context=1, output_mask=True)
    whole = builder.for_inference(output_mask=True)
    batch_x, batch_y, mask = next(iter(whole.build(x, [s[:, 0] for s in x])))
    assert batch_x.shape == (2, 8, 1) and batch_y.shape == (2, 6)
    np.testing.assert_array_equal(mask, [[1] * 6, [1, 1, 0, 0, 0, 0]])


# --------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("make", "match"),
    [
        (
            lambda: kerasbatch.ChunkBuilder(0),
            r"chunk_size must be a positive int, got 0",
        ),
        (lambda: kerasbatch.ChunkBuilder(-3), r"chunk_size must be a positive int"),
        (
            lambda: kerasbatch.ChunkBuilder(4, chunk_step=0),
            r"chunk_step must be a positive int, got 0",
        ),
        (
            lambda: kerasbatch.ChunkBuilder(4, chunk_step=5),
            r"chunk_step=5 is larger than chunk_size=4: frames between chunks",
        ),
        (
            lambda: kerasbatch.ChunkBuilder(None, chunk_step=2),
            r"chunk_step needs a chunk_size",
        ),
        (
            lambda: kerasbatch.ChunkBuilder(4, context=-1),
            r"context must be a non-negative int or a \(left, right\) pair",
        ),
        (
            lambda: kerasbatch.ChunkBuilder(4, context=(1, 2, 3)),
            r"context must be a non-negative int",
        ),
        (
            lambda: kerasbatch.ChunkBuilder(4, context=(1, 5)),
            r"context \(1, 5\) is larger than chunk_size=4 on a side",
        ),
        (
            lambda: kerasbatch.ChunkBuilder(4, min_chunk_size=0),
            r"min_chunk_size must be a positive int, got 0",
        ),
        (
            lambda: kerasbatch.ChunkBuilder(4, min_chunk_size=5),
            r"min_chunk_size must be from 1 to chunk_size=4, got 5",
        ),
        (
            lambda: kerasbatch.ChunkBuilder(4, keys=[]),
            r"keys must be None or a non-empty",
        ),
        (
            lambda: kerasbatch.ChunkBuilder(4, keys=["x", "x"]),
            r"non-empty list of distinct names",
        ),
        (
            lambda: kerasbatch.ChunkBuilder(4, max_length=8),
            r"unexpected keyword argument 'max_length'",
        ),
    ],
)
def test_bad_options_are_clear_errors(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def test_keys_that_name_no_component_are_an_error():
    with pytest.raises(
        ValueError, match=r"keys names \['labels'\], but the components are \['x'\]"
    ):
        kerasbatch.ChunkBuilder(4, keys=["x", "labels"]).build(frame_ids([5]))


def test_keys_that_name_a_per_example_component_are_an_error():
    with pytest.raises(
        ValueError,
        match=r"keys names 'y', but y has one value per sequence, not frames",
    ):
        kerasbatch.ChunkBuilder(4, keys=["x", "y"]).build(frame_ids([5]), np.zeros(1))


def test_chunked_components_that_are_not_frame_aligned_are_an_error():
    x = {
        "frames": frame_ids([5, 6]),
        "transcript": [np.arange(3), np.arange(6)],
    }
    with pytest.raises(
        ValueError,
        match=r"x\['transcript'\] element 0 has length 3 but x\['frames'\] element 0 "
        r"has length 5; chunked components must be frame-aligned: leave "
        r"'transcript' out of keys",
    ):
        kerasbatch.ChunkBuilder(4).build(x)
    builder = kerasbatch.ChunkBuilder(4, keys="frames")
    assert builder.build(x).cardinality() == 1  # kept whole instead


def test_a_padding_length_for_a_chunked_component_is_an_error():
    with pytest.raises(
        ValueError,
        match=r"padding of the chunked component 'x' gives the length 50, but "
        r"chunks fix it to 6 \(chunk_size 4 \+ context 1 \+ 1\)",
    ):
        kerasbatch.ChunkBuilder(4, context=1, padding=Padding(length=50)).build(
            frame_ids([5])
        )


def test_no_chunk_long_enough_is_an_error():
    with pytest.raises(
        ValueError, match=r"No chunk can be cut: every chunk is shorter"
    ):
        kerasbatch.ChunkBuilder(4, min_chunk_size=3).build(frame_ids([2, 1]))


def test_reading_chunks_before_build_is_an_error():
    with pytest.raises(RuntimeError, match=r"call build\(x, \.\.\.\) first"):
        _ = kerasbatch.ChunkBuilder(4).chunk_table


def test_chunk_batches_of_tf_ragged_inputs():
    ragged = tf.ragged.constant([[1.0, 2.0, 3.0], [4.0]])
    builder = kerasbatch.ChunkBuilder(2, context=1, shuffle=False)
    ((batch,),) = collect(builder.build(ragged))
    np.testing.assert_array_equal(batch, [[0, 1, 2, 3], [2, 3, 0, 0], [0, 4, 0, 0]])
