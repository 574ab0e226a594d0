"""Batch loaders: TFRecord files and a JSON manifest → `model.fit` data.

`TFRecordLoader` holds a loader configuration (`kerasbatch.io.loader_config`)
and builds its datasets: the features resolved for a model
(`kerasbatch.io.features`), read, parsed and batched by a
`kerasbatch.io.loader_pipeline.LoaderPipeline`, and packed into the
structure the model takes (`kerasbatch.io.model_structure`).
"""

import copy
import json

from kerasbatch.engines.tf_data.as_written import traced_as_written
from kerasbatch.io import length_index, loader_config, specifiers
from kerasbatch.io.dataset_check import check_dataset
from kerasbatch.io.features import parse_primaries, plan_features
from kerasbatch.io.loader_pipeline import LoaderPipeline
from kerasbatch.io.model_structure import model_names
from kerasbatch.optional import tensorflow as tf


class TFRecordLoader:
    """A `tf.data` pipeline over TFRecord files described by a JSON manifest.

    The loader configuration is one JSON object:
    `type` (`"independent"`, `"continuous_sequence"`, `"discrete_sequence"`),
    `dataset` (a `dir` or `list` specifier), the batch, read, shuffle and
    interleave arguments, `primary_features`, `secondary_features`,
    `processing_steps`, `padding`, and the type's own arguments (`multi_load`;
    `min_window`, `max_window`, `stride`). Two keys are kerasbatch's own:
    `seed` (int, or null for unseeded shuffles and windows) and `on_error`
    (`"raise"`, or `"skip"`: records that do not match the manifest are left
    out and counted in `skipped_records`).

    `build(model)` returns a dataset of `(inputs, targets)` dicts keyed by the
    model's input and output names, ready for `model.fit`. With `builder=` a
    `kerasbatch.StreamBucketBuilder` batches instead of the configuration's
    `target_batch_size` and `padding`: length buckets, token budgets,
    truncation and `pad_to_bucket` on TFRecord data.

    Args:
        **config: the loader configuration (see above). Required:
            `type`, `dataset`, `target_batch_size`, `drop_remainder`, `epochs`,
            `num_read_buffer_bytes`, `num_prefetch`, `primary_features`; with
            `shuffle`, also `num_shuffle_buffer_elements`,
            `num_filenames_shuffle_buffer` and `num_mix_files`; with a sequence
            type, `min_window` and `max_window`.

    Example:

    >>> import tempfile
    >>> import numpy as np
    >>> import kerasbatch
    >>> data_dir = tempfile.mkdtemp()
    >>> records = [{"tokens": np.arange(n), "label": np.int64(n % 2)}
    ...            for n in (3, 5, 2, 4)]
    >>> _ = kerasbatch.io.write_dataset(data_dir, records)
    >>> loader = kerasbatch.io.TFRecordLoader(
    ...     type="independent",
    ...     dataset={"type": "dir", "args": {"data_dir": data_dir}},
    ...     target_batch_size=2, drop_remainder=False, epochs=1,
    ...     num_read_buffer_bytes=0, num_prefetch=1, padding=True,
    ...     primary_features=[{"from_name": "tokens", "to_name": "x"},
    ...                       {"from_name": "label", "to_name": "y"}])
    >>> dataset = loader.build(inputs=["x"], outputs=["y"])
    >>> [(x["x"].shape.as_list(), y["y"].numpy().tolist()) for x, y in dataset]
    [([2, 5], [1, 1]), ([2, 4], [0, 0])]
    """

    def __init__(self, **config):
        self._source = config.pop("_source", "loader config")
        self.config = loader_config.complete(config, self._source)
        loader_config.validate(self.config, self._source)
        with tf.device("/CPU:0"):
            self._skipped = tf.Variable(0, dtype=tf.int64, trainable=False)
            self._damaged = tf.Variable(0, dtype=tf.int64, trainable=False)
            self._lost = tf.Variable(0, dtype=tf.int64, trainable=False)

    # ----------------------------------------------------------------- config
    def get_config(self):
        """The full configuration (defaults filled in), JSON-serialisable."""
        return copy.deepcopy(self.config)

    @classmethod
    def from_config(cls, config):
        """A new loader from the dict of `get_config()`."""
        return cls(**config)

    @classmethod
    def from_json(cls, path):
        """Reads the configuration from a JSON file (errors name the file)."""
        try:
            with open(path) as file:
                config = json.load(file)
        except FileNotFoundError as error:
            raise ValueError(f"Loader config file {path} does not exist.") from error
        except json.JSONDecodeError as error:
            raise ValueError(
                f"Loader config file {path} is not valid JSON: {error.msg} at line "
                f"{error.lineno}, column {error.colno}."
            ) from error
        if not isinstance(config, dict):
            raise ValueError(f"Loader config file {path} must hold one JSON object.")
        return cls(_source=f"loader config {path}", **config)

    def __eq__(self, other):
        return type(self) is type(other) and self.config == other.config

    def __repr__(self):
        return f"TFRecordLoader(type={self.config['type']!r}, ...)"

    @property
    def skipped_records(self):
        """Records left out with `on_error="skip"` since the loader was made."""
        return int(self._skipped.numpy())

    @property
    def damaged_files(self):
        """Corrupt or truncated files read with `on_error="skip"` (each time read).

        Found by counting each file's bytes and, with the manifest's
        `record_counts`, its records (see `kerasbatch.io.read_file_records`);
        an uncompressed file is read on past the damage, a compressed one up
        to it. Each comes with a warning naming the file.
        """
        return int(self._damaged.numpy())

    @property
    def lost_records(self):
        """Records lost in damaged files with `on_error="skip"`.

        Exact when the manifest has `record_counts` (`write_dataset` writes
        them); else the number of damaged stretches, at least 1 per damaged
        file: a lower bound, since how many records a damaged stretch held
        cannot be known without the counts (the warning then says "the rest
        of the file from record N" instead of a number). Records that were
        read but do not match the manifest are `skipped_records` instead.
        """
        return int(self._lost.numpy())

    # ---------------------------------------------------------------- helpers
    def _where(self, key):
        return f"{self._source}: {key}"

    def _plan(self, manifest, input_names, output_names):
        """The features of one build, for a model's input and output names."""
        return plan_features(
            self.config, manifest, input_names, output_names, self._source
        )

    def _pipeline(self, files, plan):
        """The `LoaderPipeline` of one build, counting in this loader's variables."""
        return LoaderPipeline(
            self.config,
            self._source,
            files,
            plan,
            self._skipped,
            self._damaged,
            self._lost,
        )

    # ------------------------------------------------------------------ build
    @traced_as_written
    def build(
        self, model=None, *, inputs=None, outputs=None, builder=None, lengths=None
    ):
        """Returns the `tf.data.Dataset` of `(inputs, targets)` batches.

        Args:
            model: a Keras model whose input and output names the features
                must satisfy (seed rules: every input has a feature, every
                `to_name` is unique and used).
            inputs, outputs: the model's input and output names, instead of
                a model (e.g. for a subclassed model).
            builder: a `kerasbatch.StreamBucketBuilder` that batches the
                elements (buckets, token budgets, truncation) instead of the
                configuration's `target_batch_size` and `padding`. The dataset is then
                the builder's (its `prefetch` replaces `num_prefetch`), so
                its statistics and the callbacks know it, and one builder
                can serve a training and a validation loader.
            lengths: every element's length, from `lengths()` (the length-index
                pass): the dataset's exact cardinality (with `epochs` 1), and a
                builder's "auto" boundaries. Without it, the loader's own
                batches (no builder) of an `independent` loader with
                `on_error="raise"` and `epochs` set still have their exact
                number, from the manifest's `record_counts` (`write_dataset`
                writes them, `kerasbatch.io.add_record_counts` adds them);
                otherwise (a builder, a sequence loader, skipped records, no
                counts) the cardinality is unknown and Keras warns "Your input
                ran out of data" at the end of each epoch: pass `lengths`.

        Returns:
            A dataset of `(inputs, targets)` batches, or of `inputs` alone
            when no feature feeds an output. With a model, each takes the
            structure of `model.input` / `model.output` (a tensor, a tuple in
            order, or a dict by name); with names, dicts by name.
        """
        input_names, output_names, pack = model_names(model, inputs, outputs)
        manifest, files, _ = specifiers.resolve(
            self.config["dataset"], self._where("dataset")
        )
        pipeline = self._pipeline(
            files, self._plan(manifest, input_names, output_names)
        )
        if lengths is not None and self.config["epochs"] != 1:
            raise ValueError(
                f"{self._where('epochs')}: lengths describe one pass over the data, "
                f"but epochs is {self.config['epochs']}. Set epochs to 1 (model.fit's "
                "epochs repeat it)."
            )
        if builder is not None and self.config.get("multi_load"):
            raise ValueError(
                f"{self._where('multi_load')}: multi_load parses whole batches, but "
                "a builder batches elements itself; set multi_load to false."
            )
        if builder is not None and self.config["padding"] is not False:
            raise ValueError(
                f"{self._where('padding')}: with a builder, padding is the builder's "
                "(kerasbatch.Padding); set padding to false."
            )
        if builder is not None:
            return self._build_with(builder, pipeline, pack, lengths)
        dataset = pipeline.batch(pipeline.elements())
        dataset = dataset.map(pack)
        if lengths is not None:
            num_batches = pipeline.num_batches(len(lengths))
        else:
            num_batches = pipeline.counted_batches()
        if num_batches is not None:
            dataset = dataset.apply(
                tf.data.experimental.assert_cardinality(num_batches)
            )
        if self.config["num_prefetch"]:
            dataset = dataset.prefetch(self.config["num_prefetch"])
        return dataset

    def _build_with(self, builder, pipeline, pack, lengths):
        """The builder's dataset of this loader's elements.

        Records parsed in batches go to the builder as they are, blocks of
        examples (`build(batched=True)`), when nothing is made per element
        (no secondary features, no processing steps, independent records);
        else the elements one by one.
        """
        plan = pipeline.plan
        if self.config["type"] != "independent" or plan.secondaries or plan.steps:
            elements = pipeline.elements(finish=pack)
            by_file = pipeline.elements(pack, shard_files=True)
            return builder.build(elements, lengths=lengths, shardable=by_file)

        def blocks(shard_files=False):
            records = pipeline.read(shard_files)
            return pipeline.parse(records).map(pack)

        return builder.build(
            blocks(), lengths=lengths, shardable=blocks(shard_files=True), batched=True
        )

    @traced_as_written
    def lengths(self, model=None, *, inputs=None, outputs=None, cache=True, verbose=1):
        """The length-index pass: every element's length, in one read.

        Reads the data once (the features the model uses, unshuffled) with a
        progress bar and caches the lengths in `__lengths__/` next to the
        manifest, keyed by the files and these settings; later calls read the
        cache. Pass the result to `build(..., lengths=...)` for a builder's
        "auto" boundaries and exact cardinality.

        Args:
            model, inputs, outputs: as for `build`.
            cache: read and write the cache.
            verbose: 0 for no progress bar.

        Returns:
            int64 array of element lengths (longest variable-length tensor).
        """
        if self.config["type"] != "independent":
            raise ValueError(
                f"{self._where('type')}: a {self.config['type']} loader draws new "
                "random windows every pass, so it has no fixed lengths to index; "
                "give the builder a list of boundaries instead."
            )
        input_names, output_names, _ = model_names(model, inputs, outputs)
        manifest, files, manifest_path = specifiers.resolve(
            self.config["dataset"], self._where("dataset")
        )
        plan = self._plan(manifest, input_names, output_names)
        settings = {
            key: self.config[key]
            for key in (
                "primary_features",
                "secondary_features",
                "processing_steps",
                "on_error",
            )
        }
        settings["names"] = [input_names, output_names]
        unshuffled = type(self)(  # one pass, in order
            **dict(
                self.config,
                shuffle=False,
                epochs=1,
                multi_load=False,
                sloppy_interleave=False,
            )
        )
        pipeline = unshuffled._pipeline(files, plan)

        def compute():
            if plan.steps:  # slices change lengths: measure the elements
                elements = pipeline.elements()
                return length_index.element_lengths(elements, verbose=verbose)
            batches = pipeline.parsed_batches()
            return length_index.batch_lengths(batches, verbose=verbose)

        path = length_index.cache_path(manifest_path, files, settings)
        return length_index.cached_lengths(path, compute, cache=cache)

    @traced_as_written
    def check(self, verbose=1):
        """Reads every record of the dataset and reports what is wrong, and where.

        A Python pass (`kerasbatch.io.check_dataset`) over the loader's files
        and primary features. Unlike errors inside the pipeline, it names the
        file and record of every problem, corrupt and truncated files and
        values of the wrong type included.

        Returns:
            A `kerasbatch.io.DatasetCheck`.
        """
        manifest, files, _ = specifiers.resolve(
            self.config["dataset"], self._where("dataset")
        )
        primaries = parse_primaries(
            self.config["primary_features"], manifest, self._where("primary_features")
        )
        names = [p.from_name for p in primaries]
        return check_dataset(
            manifest,
            files,
            names,
            verbose=verbose,
            manifest_path=specifiers.manifest_location(self.config["dataset"]),
        )
