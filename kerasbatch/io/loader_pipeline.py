"""A `TFRecordLoader`'s `tf.data` pipeline: its files read, parsed and batched.

A `LoaderPipeline` serves one build: it interleaves (and shuffles) the
files' records (`read_file_records`, damage checked), parses them in batches
(`parse_batches`, bad records named or skipped), cuts the windows of a
sequence loader, constructs each element's secondary features and
processing steps (`FeaturePlan`), and batches the elements as configured.
"""

import dataclasses

import numpy as np
from tensorflow.python.util import deprecation

from kerasbatch.io import windows
from kerasbatch.io.compressed_streams import gzip_stream_size
from kerasbatch.io.dataset_parsing import parse_batches
from kerasbatch.io.features import FeaturePlan, padded_shapes_and_values
from kerasbatch.io.records import read_file_records
from kerasbatch.io.specifiers import manifest_location
from kerasbatch.optional import tensorflow as tf

#: Records parsed per parse op.
_PARSE_BATCH = 256


@dataclasses.dataclass(frozen=True, eq=False)
class LoaderPipeline:
    """The datasets of one build of a loader, over `files` as `plan` says.

    Attributes:
        config: the loader's configuration, completed and validated.
        source: how error messages name the configuration.
        files: the dataset's files.
        plan: the build's `FeaturePlan` (with the dataset's manifest).
        skipped_records, damaged_files, lost_records: the loader's int64
            variables that records left out, damaged files and records lost
            in them are counted in.
    """

    config: dict
    source: str
    files: list
    plan: FeaturePlan
    skipped_records: object
    damaged_files: object
    lost_records: object

    def elements(self, finish=None, shard_files=False):
        """The dataset of unbatched elements: dicts keyed by `to_name`.

        Each element goes through one `map`: the secondary features and
        processing steps, then `finish` (e.g. packing for a model). With
        `shard_files`, see `read`.
        """
        c = self.config
        elements = self.read(shard_files)
        if c["type"] == "independent":
            if c["multi_load"]:
                return elements  # parsed by batch in batch()
            elements = self.parse(elements).unbatch()

        def make_element(element):
            element = self.plan.construct(element)
            return element if finish is None else finish(element)

        # In the consuming thread: handing each element to a parallel map's
        # threads costs more than this small function (on 2 cores, twice
        # the time per element); `num_parallel_parses` parallelises the
        # parsing, which works on batches.
        return elements.map(make_element)

    def parsed_batches(self):
        """An `independent` loader's records, parsed in batches (not unbatched)."""
        return self.parse(self.read())

    def read(self, shard_files=False):
        """The interleaved (and shuffled) records, or windows of a sequence type.

        With `shard_files`, the list of files holds a `shard(SHARD_HINT,
        SHARD_HINT)`: tf.data service workers (`ShardingPolicy.HINT`) each
        read whole files of their own (it cannot be iterated locally).
        """
        c, manifest, files = self.config, self.plan.manifest, self.files
        seeds = np.random.SeedSequence(c["seed"]).generate_state(3)
        for primary in self.plan.primaries:
            spec = manifest.feature(primary.from_name)
            if not spec.var_len and 0 in spec.tensor_shape:
                raise ValueError(
                    f"Feature {spec.name!r} has shape {list(spec.shape)}, which holds "
                    "no values; TensorFlow cannot unbatch such tensors. Leave it out "
                    "of primary_features (a const secondary feature can make it)."
                )
        facts = _file_facts(manifest, files, manifest_location(c["dataset"]))
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
                damaged_files=self.damaged_files,
                lost_records=self.lost_records,
                python_checks=not shard_files,  # tf.data service runs no Python
            )
            if c["type"] == "independent":
                return records
            parsed = self.parse(records)
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

    def parse(self, records, batch_size=_PARSE_BATCH, drop_remainder=False):
        """Batches of `batch_size` parsed records keyed by `to_name`.

        One parse op and one set of checks per batch
        (`kerasbatch.io.parse_batches`). With `on_error="skip"` the bad
        records are left out of their batch and counted, those that
        TensorFlow's parse op fails on (a value of another type, bytes that
        are no Example) included: a batch it fails on is parsed again record
        by record.
        """
        c = self.config
        names = {p.from_name: p.to_name for p in self.plan.primaries}

        def rename(features):
            return {names[k]: v for k, v in features.items()}

        parsed = parse_batches(
            records.batch(batch_size, drop_remainder=drop_remainder),
            self.plan.manifest,
            list(names),
            on_error=c["on_error"],
            counter=self.skipped_records,
            num_parallel_calls=c["num_parallel_parses"],
            deterministic=not c["sloppy_interleave"],
        )
        return parsed.map(rename)

    def counted_batches(self):
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
        path = manifest_location(c["dataset"])
        counts = [self.plan.manifest.records_in(file, path) for file in self.files]
        if any(count is None for count in counts):
            return None
        return self.num_batches(sum(counts) * c["epochs"])

    def num_batches(self, num_elements):
        """The number of batches `num_elements` make."""
        size = self.config["target_batch_size"]
        if self.config["drop_remainder"]:
            return num_elements // size
        return -(-num_elements // size)

    def batch(self, elements):
        """The batches of the elements, padded as configured."""
        c, plan = self.config, self.plan
        drop = c["drop_remainder"] and c["epochs"] is not None
        size = c["target_batch_size"]
        if c["type"] == "independent" and c["multi_load"]:
            if plan.manifest.allow_var_len:
                raise ValueError(
                    "multi_load needs fixed-length records (allow_var_len false "
                    "in the manifest); these records are SequenceExamples."
                )
            return self.parse(elements, size, drop)
        if plan.padding is None:
            varying = {
                name: spec.shape
                for name, spec in elements.element_spec.items()
                if not spec.shape.is_fully_defined()
            }
            if varying:
                raise ValueError(
                    f"{self.source}: padding is false, but tensor(s) vary in shape "
                    f"{ {n: s.as_list() for n, s in varying.items()} }; set padding "
                    "to true or give padding shapes."
                )
            return elements.batch(size, drop_remainder=drop)
        shapes, values = padded_shapes_and_values(
            plan.padding, elements.element_spec, f"{self.source}: padding"
        )
        return elements.padded_batch(
            size, padded_shapes=shapes, padding_values=values, drop_remainder=drop
        )


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
