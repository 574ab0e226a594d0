"""Equality, `repr` and `from_config` from a class's `get_config`."""


class Configurable:
    """Mixin for classes described by their constructor arguments.

    A subclass defines `get_config()` (the constructor arguments, JSON
    serialisable); this gives `from_config`, equality of type and config, and
    a `repr` that reads like the constructor call.

    Example:

    >>> from kerasbatch.config import Configurable
    >>> class Window(Configurable):
    ...     def __init__(self, size=2):
    ...         self.size = size
    ...     def get_config(self):
    ...         return {"size": self.size}
    >>> Window(3), Window.from_config({"size": 3}) == Window(3)
    (Window(size=3), True)
    """

    def get_config(self):
        """The constructor arguments, a JSON-serialisable dict: `from_config` makes an equal instance of it."""
        raise NotImplementedError

    @classmethod
    def from_config(cls, config):
        """A new instance from the dict of `get_config()`."""
        return cls(**config)

    def __eq__(self, other):
        return type(self) is type(other) and self.get_config() == other.get_config()

    def __repr__(self):
        arguments = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({arguments})"
