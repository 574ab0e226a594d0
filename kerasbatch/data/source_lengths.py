"""The lengths of a random-access source: given, the source's own, or one
indexing pass over its elements, cached next to the source's files.

A plan needs every element's lengths, and nothing else. A source may say
them (`lengths=` to `build`, or a `lengths` attribute, as a
`kerasbatch.io.TokenFile` has from its index); otherwise one pass reads
every element once, with a progress bar, and keeps the lengths in a
`__lengths__` folder next to the files the source names (`paths`, `path`, a
Hugging Face `Dataset`'s `cache_files`), keyed by their paths, sizes and
modification times, so that the next build reads nothing. Every batch then
checks the elements it reads against these lengths.
"""

import hashlib
import json
import os

import keras
import numpy as np

#: Where the lengths of a source's files are cached, next to them.
CACHE_DIRECTORY = "__lengths__"
#: A lengths pass names at most this many of the elements it cannot read.
NAMED_FAILURES = 5


def given_lengths(source, lengths, names, count, where):
    """`{sequence field name: int64 lengths}` given (or the source's own
    `lengths`), checked; None if there are none."""
    if lengths is None:
        lengths = getattr(source, "lengths", None)
        if lengths is None or callable(lengths):
            return None
    if not isinstance(lengths, dict):
        lengths = dict.fromkeys(names, lengths)
    unknown = sorted(set(lengths) - set(names))
    missing = [name for name in names if name not in lengths]
    if unknown or missing:
        raise ValueError(
            f"lengths names the components {sorted(lengths)}, but {where}'s "
            f"sequences are {names}: give one 1-D array (every sequence), or "
            "a dict with exactly those keys."
        )
    checked = {}
    for name, values in lengths.items():
        values = np.asarray(values)
        label = "lengths" if len(names) == 1 else f"lengths[{name!r}]"
        if values.ndim != 1 or not np.issubdtype(values.dtype, np.integer):
            raise ValueError(
                f"{label} must be a 1-D int array, got shape {values.shape} "
                f"and dtype {values.dtype}."
            )
        if len(values) != count:
            raise ValueError(
                f"{label} has {len(values)} entries, but {where} has {count} "
                "elements: give one length per element."
            )
        if (values < 0).any():
            first = int(np.flatnonzero(values < 0)[0])
            raise ValueError(f"{label}[{first}] is negative ({values[first]}).")
        # int32 lengths stay int32 (half the memory of a large corpus).
        dtype = np.int32 if values.dtype == np.int32 else np.int64
        checked[name] = values.astype(dtype, copy=False)
    return checked


def lengths_pass(reader, names, count, verbose):
    """Every element's lengths, read once (cached next to the source's
    files, where it has some): `{sequence field name: int64 lengths}`."""
    path = cache_path(reader.source, reader.fields, count)
    if path is not None and os.path.exists(path):
        with np.load(path) as cached:
            return {name: cached[name] for name in names}
    lengths = {name: np.zeros(count, np.int64) for name in names}
    show = verbose is True or (verbose == "auto" and count > 10_000)
    progress = keras.utils.Progbar(count, unit_name="element") if show else None
    failures = []
    step = max(reader.threads, 1) * 64
    for start in range(0, count, step):
        indices = np.arange(start, min(start + step, count))
        try:
            parts = reader.read(indices)
        except Exception:  # noqa: BLE001 (one by one: count and name them)
            parts = {name: [] for name in names}
            kept = []
            for index in indices:
                try:
                    element = reader.read([index])
                except Exception as error:  # noqa: BLE001 (named below)
                    failures.append((int(index), error))
                    continue
                kept.append(index)
                for name in names:
                    parts[name].append(element[name][0])
            indices = np.array(kept, np.int64)
        for name in names:
            lengths[name][indices] = np.fromiter(map(len, parts[name]), np.int64)
        if progress is not None:
            progress.update(min(start + step, count))
    if failures:
        named = "; ".join(
            str(error)[:1].lower() + str(error)[1:]
            for _, error in failures[:NAMED_FAILURES]
        )
        more = len(failures) - NAMED_FAILURES
        raise ValueError(
            f"{len(failures)} of the {count} elements of {reader.where} could "
            f"not be read or do not match element 0 ({named}"
            f"{f'; and {more} more' if more > 0 else ''}). Nothing was built: "
            "fix or leave out those elements."
        )
    if path is not None:
        _save(path, lengths)
    return lengths


def files_of(source):
    """The files a source reads, where it says (`paths`, `path`, a Hugging
    Face `Dataset`'s `cache_files`, or those of the one parent of a mapped
    Grain dataset), else None."""
    parents = getattr(source, "parents", None)
    if getattr(source, "paths", None) is None and isinstance(parents, list | tuple):
        return files_of(parents[0]) if len(parents) == 1 else None
    paths = getattr(source, "paths", None)
    if paths is None and isinstance(getattr(source, "path", None), str | os.PathLike):
        paths = [source.path]
    if paths is None:
        cache_files = getattr(source, "cache_files", None)
        if cache_files:
            paths = [entry["filename"] for entry in cache_files]
    if not paths or not all(isinstance(p, str | os.PathLike) for p in paths):
        return None
    return [os.fspath(path) for path in paths]


def cache_path(source, fields, count):
    """Where the lengths of `source` are cached (keyed by its files' paths,
    sizes and modification times, its fields and length), or None for a
    source with no files."""
    files = files_of(source)
    if not files or not all(os.path.exists(file) for file in files):
        return None
    stamp = [count, [(f.name, f.dtype.str, f.trailing_shape) for f in fields]]
    for file in files:
        status = os.stat(file)
        stamp.append([os.path.abspath(file), status.st_size, status.st_mtime_ns])
    key = hashlib.sha256(json.dumps(stamp).encode()).hexdigest()[:20]
    folder = os.path.join(os.path.dirname(os.path.abspath(files[0])), CACHE_DIRECTORY)
    return os.path.join(folder, f"{key}.npz")


def _save(path, lengths):
    """Writes the cache at `path`, atomically; a folder that cannot be
    written leaves no cache (the next build reads the lengths again)."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        partial = f"{path}.{os.getpid()}.partial.npz"
        np.savez(partial, **lengths)
        os.replace(partial, path)
    except OSError:
        pass
