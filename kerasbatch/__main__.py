"""Command line: `python -m kerasbatch` (or the `kerasbatch` script).

- `kerasbatch analyze LENGTHS`: what each way of batching costs on your
  lengths, and which builder to use (`kerasbatch.analyze`).
- `kerasbatch demo`: a small GRU trained on padded and on bucketed batches.
- `kerasbatch --help`, `kerasbatch --version`.

`--help`, `--version` and `analyze` import neither Keras nor TensorFlow
(the package defers them when it runs as this command; planning is NumPy),
so they answer at once and need neither installed. Where Keras and
TensorFlow are needed (`demo`, and `analyze` of a TFRecord dataset), they
are imported under `TF_CPP_MIN_LOG_LEVEL=3` (unless it is set), holding
back the log lines TensorFlow's native code writes to stderr while it is
imported, before its logging reads that setting.
"""

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile

import kerasbatch
from kerasbatch.planning import costs
from kerasbatch.tools import analysis, lengths

#: A native (absl / TensorFlow C++) log line: severity, date, time, thread,
#: file:line].
_NATIVE_LOG = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [^\]]*\] ")
_ABSL_BANNER = "WARNING: All log messages before absl::InitializeLog() is called"
_SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}


def main(argv=None):
    """Runs the command line with `argv` (default: `sys.argv[1:]`)."""
    parser, analyze_parser = _make_parsers()
    arguments = parser.parse_args(argv)
    if arguments.command == "demo":
        with quiet_native_logs():
            import keras  # noqa: F401  (before TensorFlow, for torch)

            from kerasbatch.tools.demo import run_demo
        run_demo(arguments.sequences, arguments.epochs, arguments.batch_size)
    elif arguments.command == "analyze":
        _analyze(arguments, analyze_parser)


def _make_parsers():
    """The command's parser and its `analyze` subparser."""
    parser = argparse.ArgumentParser(
        prog="kerasbatch",
        description="Variable-length sequence batching for Keras: see what "
        "batching costs on your lengths before training (analyze), or compare "
        "padded and bucketed training (demo).",
    )
    parser.add_argument(
        "--version", action="version", version=f"kerasbatch {kerasbatch.__version__}"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="train a small GRU on padded and on bucketed batches of built-in "
        "data and compare padding efficiency and epoch time",
    )
    demo.add_argument("--sequences", type=int, default=3000)
    demo.add_argument("--epochs", type=int, default=3)
    demo.add_argument("--batch-size", type=int, default=64)
    analyze = commands.add_parser(
        "analyze",
        help="show the length histogram, what each batching strategy costs "
        "(padding, shapes, steps, compiles) and which builder to use",
        description="Plans every candidate builder's epochs on the lengths "
        "alone (exact, no training; imports neither Keras nor TensorFlow) and "
        "recommends the one of least estimated run time with a Keras backend "
        "on a CPU or a GPU, with the line to paste.",
    )
    analyze.add_argument(
        "lengths",
        help="a .npy file (1-D int lengths), a .txt file (one length per "
        "line), a text file with --tokens (a sequence per non-blank line) or "
        "a TFRecord dataset's directory (manifest and records; needs "
        "TensorFlow)",
    )
    analyze.add_argument(
        "--tokens",
        choices=lengths.TOKENS,
        default=None,
        help="read LENGTHS as text, a sequence per non-blank line, counting "
        "its words (whitespace-separated), chars (without the line ending) or "
        "UTF-8 bytes",
    )
    analyze.add_argument("--batch-size", type=int, default=32)
    analyze.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="token budget of the budget and packed rows (default: batch size "
        "x the 90th percentile length)",
    )
    analyze.add_argument(
        "--sequence-length",
        default=None,
        help="packed row lengths, comma-separated (default: rows of about 1, "
        "2, 4 and 8 sequences of the 90th percentile length, at least the "
        "longest, in multiples of 64, within the token budget)",
    )
    analyze.add_argument("--epochs", type=int, default=10)
    analyze.add_argument(
        "--backend",
        choices=tuple(sorted(costs.BACKEND_COSTS)),
        default=None,
        help="the Keras backend to recommend for (default: KERAS_BACKEND, "
        "else the backend of Keras' keras.json, else tensorflow)",
    )
    analyze.add_argument(
        "--device",
        choices=costs.DEVICES,
        default=None,
        help="the hardware whose measured costs the estimate uses (default: "
        "gpu where this machine shows an NVIDIA GPU, else cpu)",
    )
    analyze.add_argument(
        "--compile-seconds-per-shape",
        type=float,
        default=None,
        help="seconds to compile one batch shape, instead of the backend's "
        "on the device (0: no compiles; measure yours with "
        "kerasbatch.tuner.CompileCost.measure)",
    )
    analyze.add_argument(
        "--buckets",
        default="4,8,16,32,64",
        help="bucket counts of the bucket rows, comma-separated (one bucket, "
        "a fixed length, is always a row)",
    )
    analyze.add_argument("--seed", type=int, default=0)
    analyze.add_argument(
        "--feature",
        action="append",
        default=None,
        help="a TFRecord feature that makes an element's length (repeat for "
        "several; default: every variable-length feature)",
    )
    analyze.add_argument("--plot", metavar="PATH", help="also write a PNG here")
    analyze.add_argument(
        "--json", action="store_true", help="print every figure as JSON"
    )
    analyze.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    return parser, analyze


def _analyze(arguments, parser):
    num_buckets = _ints(arguments.buckets, "--buckets", parser)
    sequence_lengths = None
    if arguments.sequence_length is not None:
        sequence_lengths = _ints(arguments.sequence_length, "--sequence-length", parser)
    try:
        if arguments.plot:
            analysis.check_plot_path(arguments.plot)
        if _is_tfrecord_dataset(arguments.lengths):
            _import_tensorflow_quietly()
        result = analysis.analyze(
            arguments.lengths,
            batch_size=arguments.batch_size,
            max_tokens=arguments.max_tokens,
            sequence_length=sequence_lengths,
            epochs=arguments.epochs,
            backend=arguments.backend,
            device=arguments.device,
            compile_seconds_per_shape=arguments.compile_seconds_per_shape,
            num_buckets=num_buckets,
            seed=arguments.seed,
            features=arguments.feature,
            tokens=arguments.tokens,
            verbose=0 if arguments.quiet or arguments.json else 1,
        )
        if arguments.json:
            print(json.dumps(result.to_dict(), indent=2))
        else:
            _print(str(result))
        if arguments.plot:
            result.plot(arguments.plot)
            if not arguments.json:
                print(f"\nWrote {arguments.plot}")
    except (ImportError, OSError, TypeError, ValueError) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")


def _ints(text, option, parser):
    """The comma-separated ints of an option's `text`."""
    try:
        return tuple(int(value) for value in text.split(",") if value.strip())
    except ValueError:
        parser.error(f"{option} must be comma-separated ints, got {text!r}.")


def _is_tfrecord_dataset(path):
    """Whether `path` names a TFRecord dataset (a directory or its manifest)."""
    return os.path.isdir(path) or os.path.basename(path) == "__manifest__.json"


def _import_tensorflow_quietly():
    """Imports Keras and `kerasbatch.io` (TensorFlow, for a TFRecord
    dataset) without their native log lines; where they are missing,
    `analyze` says so."""
    with quiet_native_logs():
        try:
            import keras  # noqa: F401  (before TensorFlow, for torch)

            import kerasbatch.io  # noqa: F401
        except ImportError:
            pass


def _print(text):
    """Prints `text`, with `#` for the bar blocks a terminal cannot show."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        text = text.replace("█", "#").replace("▏", "|")
    print(text)


@contextlib.contextmanager
def quiet_native_logs():
    """Imports under it write no native log lines below `TF_CPP_MIN_LOG_LEVEL`.

    Sets `TF_CPP_MIN_LOG_LEVEL` to 3 unless it is set. TensorFlow's native
    code logs to stderr while it is imported, before its logging reads that
    setting ("All log messages before absl::InitializeLog() ..."), so the
    process's stderr is held in a file meanwhile; afterwards, every held line
    is written out but the native log lines below the level (and, if the
    imports fail, everything, to explain the failure). Does nothing once
    TensorFlow is imported.
    """
    level = os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        level = int(level)
    except ValueError:
        level = 0
    if level < 1 or "tensorflow" in sys.modules:
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (e.g. a captured one)
        yield
        return
    failed = True
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
            failed = False
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            text = held.read().decode(errors="replace")
            if not failed:
                text = _without_native_logs(text, level)
            if text:
                sys.stderr.write(text)
                sys.stderr.flush()


def _without_native_logs(text, level):
    """`text` less the native log lines below `level` (with the lines that
    continue them) and absl's banner."""
    kept, dropping = [], False
    for line in text.splitlines(keepends=True):
        record = _NATIVE_LOG.match(line)
        if record:
            dropping = _SEVERITY[record.group(1)] < level
        elif line.startswith(_ABSL_BANNER):
            dropping = True
        elif not line.strip() or re.match(r"^\S+:\d+: \w+", line):
            dropping = False  # a blank line or a Python warning ends a record
        if not dropping:
            kept.append(line)
    return "".join(kept)


if __name__ == "__main__":
    main()
