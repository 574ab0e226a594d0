"""Plain-text messages out of the TensorFlow errors of kerasbatch's checks.

A check that fails inside a `tf.data` pipeline raises an error whose text
TensorFlow wraps in its own, with quotes and backslashes escaped.
`error_message` gives kerasbatch's message alone, as written, and puts
TensorFlow's parse errors that name a record (a value of another type than
the manifest says, bytes that are no Example) in the words of the other
checks; `record_problem` gives a record's problem without the file and
record it names.
"""

import re

#: TensorFlow's parse error for a value of another type than the manifest's.
_WRONG_TYPE = re.compile(
    r"(?:Context feature|Feature list): (.+?)(?:, Index: (\d+))?\.  "
    r"Data types don't match\. Expected type: (\w+)"
)
_UNPARSABLE = (
    "Invalid protocol message input: the bytes are no Example (or SequenceExample)"
)


def error_message(error):
    """The message of a kerasbatch check in a TensorFlow error, as plain text.

    A record or file that fails a check inside a `tf.data` pipeline (in
    `model.fit`, or iterating a loader's dataset) raises a
    `tf.errors.InvalidArgumentError` whose text TensorFlow wraps in its own
    (`"Graph execution error: ... assertion failed: [...] [[{{node ...}}]]"`),
    with quotes and backslashes escaped. This returns kerasbatch's message
    alone, one sentence naming the file (and the record), as it was written.
    TensorFlow's parse errors that name a record (a value of another type
    than the manifest says, bytes that are no Example) come in the words of
    the other checks.

    Args:
        error: the exception, or its text.

    Returns:
        The message; for another error, the first line of TensorFlow's own
        message without its node names.

    Example:

    >>> import tempfile
    >>> import tensorflow as tf
    >>> from kerasbatch.io import error_message, read_file_records, write_dataset
    >>> tmp = tempfile.TemporaryDirectory()
    >>> _ = write_dataset(tmp.name, [{"x": 1}, {"x": 2}])
    >>> file = tmp.name + "/part-00000-of-00001.tfrecords"
    >>> with open(file, "r+b") as handle:  # cut the file short
    ...     _ = handle.truncate(30)
    >>> try:
    ...     list(read_file_records(file, None, file_size=30, num_records=2))
    ... except tf.errors.InvalidArgumentError as error:
    ...     print(error_message(error).replace(tmp.name, "/d"))
    TFRecord file /d/part-00000-of-00001.tfrecords is corrupt or truncated at record 1 (1 records read, filling 30 of its 30 bytes; record_counts in the manifest gives it 2): TFRecordLoader(on_error=skip) counts such files and keeps their intact records, and TFRecordLoader.check() lists every problem
    >>> tmp.cleanup()
    """
    text = getattr(error, "message", None)
    if not isinstance(text, str):
        text = str(error)
    lines = [line.strip() for line in text.splitlines()]
    for line in lines:
        match = _ASSERTION.search(line)
        if match:
            return _unescape(match.group(1))
    skipped = ("", "Graph execution error:", "<stack traces unavailable>")
    for line in lines:
        if line in skipped or line.startswith(("Detected at node", "[[")):
            continue
        line = re.sub(r"( \[\[.*\]\])? \[Op:[\w.]+\]( name: .*)?$", "", line)
        line = re.sub(r"^(\{\{function_node [^}]*\}\} )+", "", line)
        line = re.sub(
            r"^Error in user-defined function .*? Iterator::[\w:\[\]]+: ", "", line
        )
        return _parse_op_text(line)
    return text.strip()


#: An Assert's message: its data, here kerasbatch's one string, in brackets.
_ASSERTION = re.compile(r"assertion failed: \[(.*)\]$")
#: The escapes of TensorFlow's `Utf8SafeCEscape`, which Assert applies.
_ESCAPE = re.compile(r"\\(?:([nrt\"'\\])|([0-7]{3}))")
_ESCAPED = {"n": "\n", "r": "\r", "t": "\t"}


def _unescape(text):
    def character(match):
        if match.group(1) is not None:
            return _ESCAPED.get(match.group(1), match.group(1))
        return chr(int(match.group(2), 8))

    return _ESCAPE.sub(character, text)


def _parse_op_text(text):
    """A parse op's error that names its record, as `record N of file F:
    problem` in the words of the other checks; other text unchanged."""
    match = re.fullmatch(r"Invalid protocol message input, example id: (.+)", text)
    if match:
        return f"{match.group(1)}: {_UNPARSABLE}"
    match = re.fullmatch(r"Name: (record \d+ of file .+?), (.+)", text)
    if match:
        name, problem = match.groups()
        wrong_type = _WRONG_TYPE.fullmatch(problem)
        if wrong_type:
            feature, element, expected = wrong_type.groups()
            where = f"feature `{feature}`"
            if element is not None:
                where = f"feature list `{feature}` element {element}"
            problem = (
                f"{where} is stored as another type than the manifest says "
                f"(TensorFlow expected {expected})"
            )
        return f"{name}: {problem}"
    return text


def record_problem(error, file, index):
    """The problem in a TensorFlow error raised while iterating record
    `index` of `file`, without the file and record it names."""
    text = error_message(error)
    return text.removeprefix(f"record {index} of file {file}: ")
