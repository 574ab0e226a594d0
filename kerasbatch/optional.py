"""The optional packages behind kerasbatch's engines, imported on first use.

kerasbatch plans in NumPy and imports without TensorFlow or Grain. The
`tf.data` engine (and `kerasbatch.io`, `PadSequences` inside a graph) needs
TensorFlow; the `grain` engine needs Grain; the `python` engine needs
neither. Each optional package is a `LazyModule`: the import happens at the
first attribute read, and where the package is missing the error names it,
what needs it and the engine to use instead.

Example:

>>> from kerasbatch import optional
>>> optional.tensorflow.__name__  # imports TensorFlow here
'tensorflow'
>>> optional.imported("tensorflow").__name__
'tensorflow'
"""

import importlib
import sys


class LazyModule:
    """A module imported at its first attribute read.

    Args:
        name: the module's import name.
        pip_name: what `pip install` takes to get it.
        needed_for: what needs it, for the error message.
        instead: what works without it, for the error message.
    """

    def __init__(self, name, pip_name, needed_for, instead):
        self._name = name
        self._pip_name = pip_name
        self._needed_for = needed_for
        self._instead = instead
        self._module = None

    def load(self):
        """The module; an ImportError that says what needs it if missing."""
        if self._module is None:
            try:
                self._module = importlib.import_module(self._name)
            except ImportError as error:
                raise ImportError(
                    f"{self._needed_for} needs {self._pip_name}, which could not "
                    f"be imported ({error}): pip install {self._pip_name}, or "
                    f"{self._instead}."
                ) from error
        return self._module

    @property
    def available(self):
        """Whether the module imports (importing it if it does)."""
        try:
            self.load()
        except ImportError:
            return False
        return True

    def __getattr__(self, attribute):
        return getattr(self.load(), attribute)


def imported(name):
    """The module `name` if something already imported it, else None.

    A value can only be a TensorFlow tensor (or a Grain dataset) where its
    package is imported: checks of a value's type use this, so that they
    never import a package, and work where it is not installed.
    """
    return sys.modules.get(name)


tensorflow = LazyModule(
    "tensorflow",
    "tensorflow",
    "kerasbatch's tf.data engine (and kerasbatch.io, PadSequences in a graph)",
    "build with engine='grain' or engine='python', which need no TensorFlow",
)
grain = LazyModule(
    "grain",
    "grain",
    "The grain engine",
    "build with engine='python' (a keras.utils.PyDataset, no Grain needed)",
)
