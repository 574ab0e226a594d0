"""The lengths `kerasbatch.analyze` plans from, read and validated.

`read_lengths` takes a `.npy` file of lengths, a `.txt` file of one length
per line, any text file whose lines it counts in words, characters or
UTF-8 bytes (`tokens`) or with your tokenizer, a TFRecord dataset's
directory (its length index; needs TensorFlow), an array or list of
lengths, or the sequences themselves. Errors are one sentence that names
the file and line, or the element. Imports neither Keras nor TensorFlow
(only for a TFRecord dataset, or sequences as builders take them).
"""

import numbers
import os

import numpy as np

from kerasbatch.planning import batching
from kerasbatch.planning import boundaries as boundaries_lib

__all__ = ["TOKENS", "read_lengths"]

#: What `tokens=` counts in a line of text.
TOKENS = ("words", "chars", "bytes")


def read_lengths(source, *, features=None, tokens=None, tokenizer=None, verbose=1):
    """The lengths of `source`, as `analyze` takes them, validated.

    Args:
        source: a `.npy` or `.txt` path, a text file with `tokens` or
            `tokenizer`, a TFRecord dataset's directory (or its
            `__manifest__.json`), a 1-D array or list of lengths, a list of
            str with `tokens` or `tokenizer`, or sequences as builders take
            them (see `analyze`).
        features: for a TFRecord dataset, the variable-length features that
            make an element's length (default: all).
        tokens: for text, `"words"`, `"chars"` or `"bytes"` (see `analyze`).
        tokenizer: for text, a function from a str to its tokens.
        verbose: 1 shows the TFRecord length-index pass's progress bar.

    Returns:
        A 1-D int64 array with at least one length, each in `[0,
        kerasbatch.planning.batching.MAX_LENGTH]`.

    Example:

    >>> from kerasbatch.tools.lengths import read_lengths
    >>> read_lengths([4, 2]).tolist()
    [4, 2]
    >>> read_lengths(["Apache License", "Version 2.0, January 2004"],
    ...              tokens="words").tolist()
    [2, 4]
    >>> read_lengths(["naïve"], tokens="bytes").tolist()
    [6]
    """
    count = _counter(tokens, tokenizer)
    if isinstance(source, str | os.PathLike):
        path = os.fspath(source)
        return _in_range(_read_file(path, features, count, verbose), f"{path}: ")
    if features is not None:
        raise ValueError("features applies to a TFRecord dataset's directory only.")
    if count is not None:
        return _in_range(_text_lengths(source, count), "")
    if (
        isinstance(source, list | tuple)
        and source
        and all(isinstance(value, str) for value in source)
    ):
        raise ValueError(
            "lengths is a list of str: give tokens='words', 'chars' or 'bytes', "
            "or a tokenizer, to count each text's tokens."
        )
    if isinstance(source, np.ndarray) and source.dtype != object:
        return _in_range(boundaries_lib.as_lengths(source), "")
    if isinstance(source, list | tuple) and all(
        isinstance(value, numbers.Integral) and not isinstance(value, bool)
        for value in source
    ):
        if not source:
            raise ValueError("lengths is empty; need at least one length.")
        return _in_range(boundaries_lib.as_lengths(np.asarray(source)), "")
    from kerasbatch.data import sources  # sequences as builders take them: Keras

    return _in_range(sources.from_inputs(source).element_lengths(), "")


def _counter(tokens, tokenizer):
    """`line -> length` for text, or None."""
    if tokens is not None and tokenizer is not None:
        raise ValueError("Give tokens or tokenizer, not both.")
    if tokenizer is not None:
        if not callable(tokenizer):
            raise TypeError(
                f"tokenizer must be a function of a str, got {type(tokenizer).__name__}."
            )

        def tokenized(line):
            pieces = tokenizer(line)
            try:
                return len(pieces)
            except TypeError:
                raise TypeError(
                    "tokenizer must return a line's tokens (anything with a len()), "
                    f"got {type(pieces).__name__}."
                ) from None

        return tokenized
    if tokens is None:
        return None
    if tokens == "words":
        return lambda line: len(line.split())
    if tokens == "chars":
        return len
    if tokens == "bytes":
        return lambda line: len(line.encode("utf-8"))
    raise ValueError(f"tokens must be one of {TOKENS}, got {tokens!r}.")


def _text_lengths(texts, count, where=None):
    """`count` of every non-blank text of `texts` (`(line number, text)`
    pairs with `where`, a file's path, else str values)."""
    lengths = []
    numbered = texts if where is not None else enumerate(texts)
    for number, text in numbered:
        if not isinstance(text, str):
            raise TypeError(
                f"texts[{number}] is a {type(text).__name__}, not a str: tokens "
                "and tokenizer count the tokens of text."
            )
        if text.strip():
            lengths.append(count(text))
    if not lengths:
        raise ValueError(
            f"{where} holds no text (every line is blank)."
            if where is not None
            else "texts holds no text (every one is blank)."
        )
    return np.asarray(lengths, dtype=np.int64)


def _read_file(path, features, count, verbose):
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{path} does not exist: give a .npy or .txt file of lengths, a "
            "text file with tokens, or a TFRecord dataset's directory."
        )
    if os.path.isdir(path) or os.path.basename(path) == "__manifest__.json":
        if count is not None:
            raise ValueError(
                f"{path} is a TFRecord dataset: tokens and tokenizer count the "
                "tokens of a text file."
            )
        return _tfrecord_lengths(path, features, verbose)
    if features is not None:
        raise ValueError("features applies to a TFRecord dataset's directory only.")
    extension = os.path.splitext(path)[1].lower()
    if count is not None:
        if extension == ".npy":
            raise ValueError(
                f"{path} is a .npy file of lengths: tokens and tokenizer count "
                "the tokens of a text file."
            )
        return _text_lengths(_numbered_lines(path), count, where=path)
    if extension == ".npy":
        try:
            lengths = np.load(path, allow_pickle=False)
        except ValueError as error:
            raise ValueError(
                f"{path} is not a .npy file of int lengths ({error})."
            ) from error
    elif extension == ".txt":
        lengths = _read_numbers(path)
    else:
        raise ValueError(
            f"{path}: give a .npy or .txt file of lengths, or count the tokens "
            f"of a text file with tokens; {extension or 'no extension'!r} is "
            "neither."
        )
    try:
        return boundaries_lib.as_lengths(lengths)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{path}: {error}") from error


def _numbered_lines(path):
    """`(line number, line without its ending)` of a UTF-8 text file."""
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().split("\n")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{path} is not UTF-8 text (byte {error.start} is {error.object[error.start]:#04x})."
        ) from None
    return ((number, line) for number, line in enumerate(lines, 1))


def _read_numbers(path):
    """One int per line (blank lines skipped); errors name the line."""
    values = []
    for number, line in _numbered_lines(path):
        text = line.strip()
        if not text:
            continue
        try:
            values.append(int(text))
        except ValueError:
            raise ValueError(
                f"{path}, line {number}: {text[:40]!r} is not an integer length; "
                "to count the tokens of lines of text, give tokens='words', "
                "'chars' or 'bytes' (--tokens)."
            ) from None
    return np.asarray(values, dtype=np.int64)


def _in_range(lengths, where):
    """`lengths` as int64, each within what the builders plan."""
    lengths = np.asarray(lengths, dtype=np.int64)
    too_long = np.flatnonzero(lengths > batching.MAX_LENGTH)
    if len(too_long):
        first = int(too_long[0])
        raise ValueError(
            f"{where}lengths[{first}] = {lengths[first]} is beyond the longest "
            f"length kerasbatch plans ({batching.MAX_LENGTH})."
        )
    return lengths


def _tfrecord_lengths(path, features, verbose):
    directory = path if os.path.isdir(path) else os.path.dirname(path) or "."
    manifest_path = os.path.join(directory, "__manifest__.json")
    if not os.path.isfile(manifest_path):
        raise FileNotFoundError(
            f"{directory} has no __manifest__.json, so it is no TFRecord dataset "
            "(kerasbatch.io.write_dataset writes one): give a dataset's "
            "directory, or a .npy or .txt file of lengths."
        )
    try:
        import keras  # noqa: F401  (before TensorFlow, for torch)

        from kerasbatch.io import TFRecordLoader, load_manifest
    except ImportError as error:
        raise ImportError(
            f"Reading the TFRecord dataset in {directory} needs TensorFlow and "
            f"Keras, which could not be imported ({error}): install them, or "
            "give a .npy or .txt file of lengths."
        ) from error
    manifest = load_manifest(manifest_path)
    sequences = [spec.name for spec in manifest.features if spec.var_len]
    if features is None:
        features = sequences
        if not features:
            raise ValueError(
                f"The dataset in {directory} has no variable-length feature "
                "(var_len in its manifest): every element has the same length."
            )
    else:
        features = [features] if isinstance(features, str) else list(features)
        for name in features:
            if name not in manifest.names:
                raise ValueError(
                    f"The dataset in {directory} has no feature {name!r}; its "
                    f"features are {list(manifest.names)}."
                )
            if name not in sequences:
                raise ValueError(
                    f"Feature {name!r} of the dataset in {directory} is not "
                    "variable-length (var_len), so it has no length."
                )
    loader = TFRecordLoader(
        type="independent",
        dataset={"type": "dir", "args": {"data_dir": directory}},
        target_batch_size=1,
        drop_remainder=False,
        epochs=1,
        num_read_buffer_bytes=0,
        num_prefetch=1,
        primary_features=[{"from_name": n, "to_name": n} for n in features],
    )
    lengths = loader.lengths(inputs=list(features), verbose=verbose)
    if not len(lengths):
        raise ValueError(f"The dataset in {directory} holds no record.")
    return boundaries_lib.as_lengths(lengths)
