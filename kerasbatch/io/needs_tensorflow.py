"""Imported first by `kerasbatch.io`: its readers and writers run TensorFlow,
so where TensorFlow is missing, importing `kerasbatch.io` fails at once with
an ImportError that says what needs it and what works without it."""

from kerasbatch import optional

optional.tensorflow.load()
