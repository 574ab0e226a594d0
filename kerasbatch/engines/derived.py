"""Datasets made from a built dataset by per-batch transformations.

Users map a built dataset all the time: to rename inputs, add a mask, cast.
A transformation that turns every batch into exactly one batch, in order,
keeps the built dataset's epochs: the plan, statistics and batch order of
the dataset `build` returned describe the derived dataset too. Those are
followed to the built dataset (by `kerasbatch.builders.builder_of`, the
callbacks and `WarmUp`):

- `tf.data`: `map` (parallel too), `prefetch`, `with_options`,
  `tf.data.experimental.assert_cardinality`, and `apply` of those;
- Grain `IterDataset`: `map`, `random_map`, `map_with_index`, `seed`,
  `grain.experimental.WithOptionsIterDataset` and
  `grain.experimental.ThreadPrefetchIterDataset`.

Every other transformation changes which batches an epoch holds (`filter`,
`batch`, `unbatch`, `rebatch`, `repeat`, `take`, `skip`, `shuffle`,
`cache`, `zip`, ...) or runs the dataset in other processes (Grain's
`mp_prefetch`, whose workers would not see `set_epoch`): a dataset made
with one is an error that names it (`DerivedDatasetError`).

A `keras.utils.PyDataset` (`engine="python"`) has no transformations:
change its batches in the model (or in a `keras.layers.Layer` at its
input) instead.

Example:

>>> import numpy as np
>>> import kerasbatch
>>> builder = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
>>> train = builder.build([np.ones(n, "int32") for n in (1, 2, 3)])
>>> mapped = train.map(lambda x: {"token_ids": x, "padding_mask": x != 0})
>>> kerasbatch.builders.builder_of(mapped).statistics().padding_efficiency
0.8571428571428571
>>> try:
...     kerasbatch.builders.builder_of(mapped.unbatch())
... except ValueError as error:
...     print(str(error)[:62])
This dataset (_UnbatchDataset) is made by unbatch() from a dat
"""

import re

import numpy as np

from kerasbatch import optional
from kerasbatch.engines.tf_data import replay as replay_lib

#: tf.data dataset classes that make one batch of each batch, in order
#: (TensorFlow 2.16 to 2.21), and the method that makes each.
TF_PER_BATCH = {
    "_MapDataset": "map",
    "_ParallelMapDataset": "map",
    "_PrefetchDataset": "prefetch",
    "_OptionsDataset": "with_options",
    "_AssertCardinalityDataset": "assert_cardinality",
}

#: The same for Grain `IterDataset`s (Grain 0.2).
GRAIN_PER_BATCH = {
    "MapIterDataset": "map",
    "RandomMapIterDataset": "random_map",
    "MapWithIndexIterDataset": "map_with_index",
    "_WithSeedIterDataset": "seed",
    "WithOptionsIterDataset": "WithOptionsIterDataset",
    "ThreadPrefetchIterDataset": "ThreadPrefetchIterDataset",
}

#: Grain classes that run a function on every batch.
_GRAIN_MAPS = {"MapIterDataset", "RandomMapIterDataset", "MapWithIndexIterDataset"}

#: Grain classes that run the pipeline in worker processes.
_GRAIN_PROCESSES = {"ProcessPrefetchIterDataset", "_MpContextIterDataset"}

_ALLOWED = (
    "tf.data: map, prefetch, with_options, assert_cardinality; Grain: map, "
    "random_map, map_with_index, seed, with options, thread prefetch"
)


class DerivedDatasetError(ValueError):
    """A dataset made from a built dataset by a transformation that changes
    which batches an epoch holds."""


def trace(dataset, is_built):
    """The built dataset that `dataset` is made from, and how.

    Args:
        dataset: any dataset.
        is_built: tells whether a dataset is one a builder returned.

    Returns:
        `(built, chain)`: the built dataset, and the per-batch
        transformations from `dataset` down to it (`dataset` first; empty
        when `dataset` is the built one); None where no built dataset is
        under `dataset`.

    Raises:
        DerivedDatasetError: a transformation between `dataset` and a built
            dataset is not per-batch; the message names it.
    """
    chain = []
    node = dataset
    while True:
        if is_built(node):
            return node, chain
        parents = _parents(node)
        if _per_batch_name(node) is None or len(parents) != 1:
            below = _below(parents, is_built)
            if below is not None:
                raise DerivedDatasetError(_refusal(node, below))
            return None
        chain.append(node)
        node = parents[0]


def replay(chain, batches, element_spec):
    """`batches` of the built dataset, as the derived dataset of `chain` (as
    `trace` returns it) yields them, and its `element_spec` (None for Grain).

    Per-batch transformations that leave values alone (prefetch, options)
    are skipped; maps run on the batches: in a `tf.data` pipeline of the
    batches (as `map` runs them), or as Python on Grain's numpy batches.

    Args:
        chain: the transformations, the derived dataset first.
        batches: batches of the built dataset.
        element_spec: the built dataset's `element_spec` (None for Grain).
    """
    if not chain:
        return list(batches), element_spec
    if element_spec is None:
        return _replay_grain(chain, list(batches)), None
    return replay_lib.replay_maps(chain, list(batches), element_spec)


def _parents(node):
    """The datasets `node` reads (tf.data or Grain), else ()."""
    tf = optional.imported("tensorflow")
    if tf is not None and isinstance(node, tf.data.Dataset):
        try:
            return list(node._inputs())
        except Exception:  # a dataset class without inputs
            return []
    grain = optional.imported("grain")
    if grain is not None and isinstance(node, grain.IterDataset | grain.MapDataset):
        parents = list(getattr(node, "parents", ()) or ())
        # An interleave (as mp_prefetch makes) keeps its datasets apart.
        return parents or [
            d
            for d in getattr(node, "_datasets", None) or ()
            if isinstance(d, grain.IterDataset | grain.MapDataset)
        ]
    return []


def _per_batch_name(node):
    """The method that made `node`, if it keeps one batch per batch."""
    name = type(node).__name__
    tf = optional.imported("tensorflow")
    if tf is not None and isinstance(node, tf.data.Dataset):
        return TF_PER_BATCH.get(name)
    grain = optional.imported("grain")
    if grain is not None and isinstance(node, grain.IterDataset):
        return GRAIN_PER_BATCH.get(name)
    return None


def _below(parents, is_built):
    """Every dataset among `parents` and below them, if a built dataset is
    among them; else None."""
    to_visit, seen, found = list(parents), {}, False
    while to_visit:
        node = to_visit.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        if is_built(node):
            found = True
            continue
        to_visit.extend(_parents(node))
    return list(seen.values()) if found else None


def transformation_name(node):
    """What the user called to make `node`: `_RepeatDataset` -> `repeat`,
    `BatchIterDataset` -> `batch`."""
    name = type(node).__name__
    if name in _GRAIN_PROCESSES:
        return "mp_prefetch"
    name = re.sub(r"(IterDataset|MapDataset|Dataset)$", "", name.lstrip("_"))
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() or type(node).__name__


def _refusal(node, below):
    name = transformation_name(node)
    processes = [n for n in below if type(n).__name__ in _GRAIN_PROCESSES]
    if processes or type(node).__name__ in _GRAIN_PROCESSES:
        name = "mp_prefetch"
        why = (
            "runs the dataset in worker processes, which its epoch (set_epoch, "
            "EpochReshuffle) and statistics do not reach"
        )
    else:
        why = (
            "changes which batches an epoch holds, so the builder's plan and "
            "statistics no longer describe them"
        )
    return (
        f"This dataset ({type(node).__name__}) is made by {name}() from a "
        f"dataset a kerasbatch builder built, and {name} {why}. Only per-batch "
        f"transformations are followed ({_ALLOWED}): pass model.fit, the "
        "callbacks and builder_of the dataset build() returned, or one made "
        "from it by those (change the data before build, or the batches in "
        "a map)."
    )


def _replay_grain(chain, batches):
    for node in reversed(chain):
        kind = type(node).__name__
        function = getattr(node, "_map_fn", None)
        if function is None and kind in _GRAIN_MAPS:
            raise ValueError(
                "Cannot read the function of a Grain map in this Grain "
                "version: pass the dataset build() returned."
            )
        if kind == "MapIterDataset":
            batches = [function(batch) for batch in batches]
        elif kind == "MapWithIndexIterDataset":
            batches = [function(k, batch) for k, batch in enumerate(batches)]
        elif kind == "RandomMapIterDataset":
            rng = np.random.default_rng(getattr(node, "_seed", None))
            batches = [function(batch, rng) for batch in batches]
    return batches
