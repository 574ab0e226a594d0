"""Batch loaders: TFRecord files and a JSON manifest → `model.fit` data."""

import copy
import json

import numpy as np
from tensorflow.python.util import deprecation

from kerasbatch.io import features as features_lib
from kerasbatch.io import length_index, parsing, specifiers, windows
from kerasbatch.io.records import gzip_stream_size, read_file_records
from kerasbatch.io.validation import boolean, check_keys, integer
from kerasbatch.optional import tensorflow as tf

LOADER_TYPES = ("independent", "continuous_sequence", "discrete_sequence")
ON_ERROR = ("raise", "skip")
_COMMON_REQUIRED = (
    "type",
    "dataset",
    "target_batch_size",
    "drop_remainder",
    "epochs",
    "num_read_buffer_bytes",
    "num_prefetch",
    "primary_features",
)
_COMMON_DEFAULTS = {
    "num_parallel_reads": 1,
    "num_parallel_parses": 1,
    "shuffle": False,
    "num_shuffle_buffer_elements": None,
    "num_filenames_shuffle_buffer": None,
    "num_mix_files": None,
    "sloppy_interleave": False,
    "num_interleave_out_buffer_elements": 1,
    "num_interleave_in_buffer_elements": 1,
    "secondary_features": [],
    "processing_steps": [],
    "padding": False,
    "seed": None,
    "on_error": "raise",
}
_TYPE_DEFAULTS = {
    "independent": {"multi_load": False},
    "continuous_sequence": {"min_window": None, "max_window": None, "stride": None},
    "discrete_sequence": {"min_window": None, "max_window": None},
}
#: Records parsed per parse op.
_PARSE_BATCH = 256
_SHUFFLE_REQUIRED = (
    "num_shuffle_buffer_elements",
    "num_filenames_shuffle_buffer",
    "num_mix_files",
)


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
        self.config = _complete(config, self._source)
        self._validate()
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

    # --------------------------------------------------------------- validate
    def _validate(self):
        c, at = self.config, self._where
        if c["type"] not in LOADER_TYPES:
            raise ValueError(
                f"{at('type')} must be one of {LOADER_TYPES}, got {c['type']!r}."
            )
        integer(c["target_batch_size"], at("target_batch_size"), minimum=1)
        boolean(c["drop_remainder"], at("drop_remainder"))
        integer(c["epochs"], at("epochs"), minimum=1, allow_none=True)
        for key in (
            "num_parallel_reads",
            "num_parallel_parses",
            "num_interleave_out_buffer_elements",
            "num_interleave_in_buffer_elements",
        ):
            integer(c[key], at(key), minimum=1)
        integer(c["num_read_buffer_bytes"], at("num_read_buffer_bytes"), minimum=0)
        integer(c["num_prefetch"], at("num_prefetch"), minimum=0)
        boolean(c["sloppy_interleave"], at("sloppy_interleave"))
        if boolean(c["shuffle"], at("shuffle")):
            for key in _SHUFFLE_REQUIRED:
                if c[key] is None:
                    raise ValueError(f"{at(key)} is required when shuffle is true.")
                integer(c[key], at(key), minimum=1)
        integer(c["seed"], at("seed"), allow_none=True)
        if c["on_error"] not in ON_ERROR:
            raise ValueError(
                f"{at('on_error')} must be one of {ON_ERROR}, got {c['on_error']!r}."
            )
        if not (
            c["padding"] is True
            or c["padding"] is False
            or isinstance(c["padding"], list)
        ):
            raise ValueError(
                f"{at('padding')} must be true, false or a list, got {c['padding']!r}."
            )
        if c["type"] == "independent":
            multi_load = boolean(c["multi_load"], at("multi_load"))
            if multi_load and (
                c["secondary_features"]
                or c["processing_steps"]
                or c["padding"]
                or c["on_error"] == "skip"
            ):
                raise ValueError(
                    f"{at('multi_load')} parses whole batches, so it cannot be "
                    "combined with secondary_features, processing_steps, padding "
                    "or on_error='skip'."
                )
            return
        for key in ("min_window", "max_window"):
            if c[key] is None:
                raise ValueError(f"{at(key)} is required for a {c['type']} loader.")
            integer(c[key], at(key), minimum=1)
        if c["min_window"] > c["max_window"]:
            raise ValueError(
                f"{self._source}: min_window={c['min_window']} is greater than "
                f"max_window={c['max_window']}."
            )
        if c["type"] == "continuous_sequence":
            integer(c["stride"], at("stride"), minimum=1, allow_none=True)

    def _where(self, key):
        return f"{self._source}: {key}"

    # ------------------------------------------------------------------ build
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
        input_names, output_names, pack = _model_names(model, inputs, outputs)
        manifest, files, _ = specifiers.resolve(
            self.config["dataset"], self._where("dataset")
        )
        plan = self._plan_features(manifest, input_names, output_names)
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
            return self._build_with(builder, manifest, files, plan, pack, lengths)
        dataset = self._batch(self._elements(manifest, files, plan), plan)
        dataset = dataset.map(pack)
        if lengths is not None:
            num_batches = self._num_batches(len(lengths))
        else:
            num_batches = self._counted_batches(manifest, files)
        if num_batches is not None:
            dataset = dataset.apply(
                tf.data.experimental.assert_cardinality(num_batches)
            )
        if self.config["num_prefetch"]:
            dataset = dataset.prefetch(self.config["num_prefetch"])
        return dataset

    def _build_with(self, builder, manifest, files, plan, pack, lengths):
        """The builder's dataset of this loader's elements.

        Records parsed in batches go to the builder as they are, blocks of
        examples (`build(batched=True)`), when nothing is made per element
        (no secondary features, no processing steps, independent records);
        else the elements one by one.
        """
        if self.config["type"] != "independent" or plan.secondaries or plan.steps:
            elements = self._elements(manifest, files, plan, finish=pack)
            by_file = self._elements(manifest, files, plan, pack, shard_files=True)
            return builder.build(elements, lengths=lengths, shardable=by_file)

        def blocks(shard_files=False):
            records = self._read(manifest, files, plan, shard_files)
            return self._parse(records, plan).map(pack)

        return builder.build(
            blocks(), lengths=lengths, shardable=blocks(shard_files=True), batched=True
        )

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
        input_names, output_names, _ = _model_names(model, inputs, outputs)
        manifest, files, manifest_path = specifiers.resolve(
            self.config["dataset"], self._where("dataset")
        )
        plan = self._plan_features(manifest, input_names, output_names)
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

        def compute():
            if plan.steps:  # slices change lengths: measure the elements
                elements = unshuffled._elements(manifest, files, plan)
                return length_index.element_lengths(elements, verbose=verbose)
            batches = unshuffled._parsed_batches(manifest, files, plan)
            return length_index.batch_lengths(batches, verbose=verbose)

        path = length_index.cache_path(manifest_path, files, settings)
        return length_index.cached_lengths(path, compute, cache=cache)

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
        primaries = features_lib.parse_primaries(
            self.config["primary_features"], manifest, self._where("primary_features")
        )
        names = [p.from_name for p in primaries]
        return parsing.check_dataset(
            manifest,
            files,
            names,
            verbose=verbose,
            manifest_path=_manifest_path(self.config["dataset"]),
        )

    def _plan_features(self, manifest, input_names, output_names):
        c = self.config
        primaries = features_lib.parse_primaries(
            c["primary_features"], manifest, self._where("primary_features")
        )
        primary_names = [p.to_name for p in primaries]
        secondaries = features_lib.parse_secondaries(
            c["secondary_features"], primary_names, self._where("secondary_features")
        )
        names = primary_names + [s.to_name for s in secondaries]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(
                f"{self._source}: to_name {duplicates} is used more than once."
            )
        missing = [n for n in input_names if n not in names]
        if missing:
            raise ValueError(
                f"{self._source}: model input(s) {missing} are satisfied by no primary "
                f"or secondary feature (to_names: {names})."
            )
        unused = [n for n in names if n not in input_names and n not in output_names]
        if unused:
            raise ValueError(
                f"{self._source}: feature(s) {unused} are constructed but the model does "
                f"not use them (inputs {list(input_names)}, outputs {list(output_names)})."
            )
        steps = features_lib.parse_steps(
            c["processing_steps"], set(names), self._where("processing_steps")
        )
        padding = features_lib.parse_padding(
            c["padding"], names, self._where("padding")
        )
        return _FeaturePlan(manifest, primaries, secondaries, steps, padding)

    # -------------------------------------------------------------- pipeline
    def _elements(self, manifest, files, plan, finish=None, shard_files=False):
        """The dataset of unbatched elements: dicts keyed by `to_name`.

        Each element goes through one `map`: the secondary features and
        processing steps, then `finish` (e.g. packing for a model). With
        `shard_files`, see `_read`.
        """
        c = self.config
        elements = self._read(manifest, files, plan, shard_files)
        if c["type"] == "independent":
            if c["multi_load"]:
                return elements  # parsed by batch in _batch
            elements = self._parse(elements, plan).unbatch()

        def make_element(element):
            element = plan.construct(element)
            return element if finish is None else finish(element)

        # In the consuming thread: handing each element to a parallel map's
        # threads costs more than this small function (on 2 cores, twice
        # the time per element); `num_parallel_parses` parallelises the
        # parsing, which works on batches.
        return elements.map(make_element)

    def _parsed_batches(self, manifest, files, plan):
        """An `independent` loader's records, parsed in batches (not unbatched)."""
        return self._parse(self._read(manifest, files, plan), plan)

    def _read(self, manifest, files, plan, shard_files=False):
        """The interleaved (and shuffled) records, or windows of a sequence type.

        With `shard_files`, the list of files holds a `shard(SHARD_HINT,
        SHARD_HINT)`: tf.data service workers (`ShardingPolicy.HINT`) each
        read whole files of their own (it cannot be iterated locally).
        """
        c = self.config
        seeds = np.random.SeedSequence(c["seed"]).generate_state(3)
        for primary in plan.primaries:
            spec = manifest.feature(primary.from_name)
            if not spec.var_len and 0 in spec.tensor_shape:
                raise ValueError(
                    f"Feature {spec.name!r} has shape {list(spec.shape)}, which holds "
                    "no values; TensorFlow cannot unbatch such tensors. Leave it out "
                    "of primary_features (a const secondary feature can make it)."
                )
        facts = _file_facts(manifest, files, _manifest_path(c["dataset"]))
        file_names = tf.data.Dataset.from_tensor_slices((files, *facts))
        if shard_files:
            hint = tf.data.experimental.SHARD_HINT
            file_names = file_names.shard(hint, hint)
        if c["shuffle"]:
            file_names = file_names.shuffle(
                c["num_filenames_shuffle_buffer"], seed=int(seeds[0])
            )
        file_names = file_names.repeat(c["epochs"]).enumerate()

        def read(visit, file_and_facts):
            file, stream_size, num_records = file_and_facts
            records = read_file_records(
                file,
                manifest.compression,
                buffer_size=c["num_read_buffer_bytes"],
                num_records=num_records,
                stream_size=stream_size,
                on_damage=c["on_error"],
                damaged_files=self._damaged,
                lost_records=self._lost,
                python_checks=not shard_files,  # tf.data service runs no Python
            )
            if c["type"] == "independent":
                return records
            parsed = self._parse(records, plan)
            window_seed = tf.stack([tf.constant(int(seeds[2]), tf.int64), visit])
            if c["type"] == "continuous_sequence":
                return windows.continuous_windows(
                    parsed,
                    file,
                    window_seed,
                    c["min_window"],
                    c["max_window"],
                    c["stride"],
                )
            return windows.discrete_windows(
                parsed, file, window_seed, c["min_window"], c["max_window"]
            )

        cycle = c["num_parallel_reads"]
        if c["shuffle"]:
            cycle = max(cycle, c["num_mix_files"])
        with deprecation.silence():  # the configuration's interleave arguments
            elements = file_names.apply(
                tf.data.experimental.parallel_interleave(
                    read,
                    cycle_length=cycle,
                    sloppy=c["sloppy_interleave"],
                    buffer_output_elements=c["num_interleave_out_buffer_elements"],
                    prefetch_input_elements=c["num_interleave_in_buffer_elements"],
                )
            )
        if c["shuffle"]:
            elements = elements.shuffle(
                c["num_shuffle_buffer_elements"], seed=int(seeds[1])
            )
        return elements

    def _parse(self, records, plan, batch_size=_PARSE_BATCH, drop_remainder=False):
        """Batches of `batch_size` parsed records keyed by `to_name`.

        One parse op and one set of checks per batch
        (`kerasbatch.io.parse_batches`). With `on_error="skip"` the bad
        records are left out of their batch and counted, those that
        TensorFlow's parse op fails on (a value of another type, bytes that
        are no Example) included: a batch it fails on is parsed again record
        by record.
        """
        c = self.config
        names = {p.from_name: p.to_name for p in plan.primaries}

        def rename(features):
            return {names[k]: v for k, v in features.items()}

        parsed = parsing.parse_batches(
            records.batch(batch_size, drop_remainder=drop_remainder),
            plan.manifest,
            list(names),
            on_error=c["on_error"],
            counter=self._skipped,
            num_parallel_calls=c["num_parallel_parses"],
            deterministic=not c["sloppy_interleave"],
        )
        return parsed.map(rename)

    def _counted_batches(self, manifest, files):
        """The number of batches from the manifest's `record_counts`, or None
        where it is not known: without counts for every file, for windows
        (sequence loaders), records that may be skipped, endless epochs.

        With `on_error="raise"` a file whose records differ from its count
        fails when read, so the number is exact whenever the data is read
        whole.
        """
        c = self.config
        if (
            c["type"] != "independent"
            or c["on_error"] != "raise"
            or c["epochs"] is None
        ):
            return None
        path = _manifest_path(c["dataset"])
        counts = [manifest.records_in(file, path) for file in files]
        if any(count is None for count in counts):
            return None
        return self._num_batches(sum(counts) * c["epochs"])

    def _num_batches(self, num_elements):
        size = self.config["target_batch_size"]
        if self.config["drop_remainder"]:
            return num_elements // size
        return -(-num_elements // size)

    def _batch(self, elements, plan):
        c = self.config
        drop = c["drop_remainder"] and c["epochs"] is not None
        size = c["target_batch_size"]
        if c["type"] == "independent" and c["multi_load"]:
            if plan.manifest.allow_var_len:
                raise ValueError(
                    "multi_load needs fixed-length records (allow_var_len false "
                    "in the manifest); these records are SequenceExamples."
                )
            return self._parse(elements, plan, size, drop)
        if plan.padding is None:
            varying = {
                name: spec.shape
                for name, spec in elements.element_spec.items()
                if not spec.shape.is_fully_defined()
            }
            if varying:
                raise ValueError(
                    f"{self._where('padding')} is false, but tensor(s) vary in shape "
                    f"{ {n: s.as_list() for n, s in varying.items()} }; set padding "
                    "to true or give padding shapes."
                )
            return elements.batch(size, drop_remainder=drop)
        shapes, values = features_lib.padded_shapes_and_values(
            plan.padding, elements.element_spec, self._where("padding")
        )
        return elements.padded_batch(
            size, padded_shapes=shapes, padding_values=values, drop_remainder=drop
        )


class _FeaturePlan:
    """The resolved features of one build: what to read, construct and process."""

    def __init__(self, manifest, primaries, secondaries, steps, padding):
        self.manifest = manifest
        self.primaries = primaries
        self.secondaries = secondaries
        self.steps = steps
        self.padding = padding

    def construct(self, element):
        element = dict(element)
        for constant in self.secondaries:
            element[constant.to_name] = constant.make(element)
        for i, step in enumerate(self.steps):
            step.apply(element, f"processing_steps[{i}]")
        return element


def _complete(config, source):
    """`config` with the defaults of its type filled in; unknown keys are errors."""
    if "type" not in config:
        raise ValueError(f"{source} is missing the required key(s) ['type'].")
    loader_type = config["type"]
    type_defaults = _TYPE_DEFAULTS.get(loader_type, {})
    allowed = set(_COMMON_REQUIRED) | set(_COMMON_DEFAULTS) | set(type_defaults)
    check_keys(config, _COMMON_REQUIRED, allowed, source)
    return copy.deepcopy({**_COMMON_DEFAULTS, **type_defaults, **config})


def _model_names(model, inputs, outputs):
    """`(input names, output names, pack)`: pack turns an element into `fit` data.

    With a model, inputs and targets take the structure of `model.input` and
    `model.output` (one tensor, a list in order, or a dict by name); with
    names alone, they are dicts.
    """
    if model is None:
        if inputs is None:
            raise ValueError(
                "build() needs a model, or the inputs (and outputs) names."
            )
        input_names, output_names = list(inputs), list(outputs or [])
        return input_names, output_names, _Packer(input_names, output_names, dict, dict)
    if inputs is not None or outputs is not None:
        raise ValueError("Pass a model or inputs/outputs names, not both.")
    if not getattr(model, "inputs", None):
        raise ValueError(
            f"Model {model.name!r} has no known inputs (a subclassed or unbuilt "
            "model): pass inputs=[...] and outputs=[...] names instead."
        )
    input_names = [t.name for t in model.inputs]
    output_names = list(model.output_names)
    return (
        input_names,
        output_names,
        _Packer(input_names, output_names, type(model.input), type(model.output)),
    )


class _Packer:
    """Packs an element (a dict by name) into the structure a model takes."""

    def __init__(self, input_names, output_names, input_kind, output_kind):
        self.input_names = input_names
        self.output_names = output_names
        self.input_kind = input_kind
        self.output_kind = output_kind

    def __call__(self, element):
        inputs = self._pack(element, self.input_names, self.input_kind)
        targets = self._pack(element, self.output_names, self.output_kind)
        return inputs if targets is None else (inputs, targets)

    @staticmethod
    def _pack(element, names, kind):
        present = [n for n in names if n in element]
        if not present:
            return None
        if issubclass(kind, dict):
            return {n: element[n] for n in present}
        if issubclass(kind, list | tuple):
            return tuple(element[n] for n in present)
        return element[present[0]]


def _manifest_path(specifier):
    """The manifest's path (or directory) of a resolved dataset specifier."""
    if specifier["type"] == "dir":
        return specifier["args"]["data_dir"]
    return specifier["args"]["manifest_file"]


def _file_facts(manifest, files, manifest_path):
    """Per file: the uncompressed stream's size in bytes (-1 unknown) and the
    number of records (-1 unknown), what the reads check at each file's end.

    The size is the file's for an uncompressed file, the gzip trailer's for a
    gzip one (one small read per file, here), unknown for zlib.
    """
    sizes, counts = [], []
    for file in files:
        size = -1
        if manifest.compression != "zlib":
            size = tf.io.gfile.stat(file).length
            if manifest.compression == "gzip":
                size = gzip_stream_size(file, size)
        count = manifest.records_in(file, manifest_path)
        sizes.append(size)
        counts.append(-1 if count is None else count)
    return np.array(sizes, np.int64), np.array(counts, np.int64)
