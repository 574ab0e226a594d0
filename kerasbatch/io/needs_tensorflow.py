"""Imported first by `kerasbatch.io`'s TFRecord names: their readers and
writers run TensorFlow, so where TensorFlow is missing, the first of those
names read fails at once with
an ImportError that says what needs it and what works without it."""

from kerasbatch import optional

optional.tensorflow.load()
