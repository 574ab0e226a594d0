"""The structure `model.fit` takes: a model's input and output names, and the
packing of a loader's elements into its inputs and targets.

A loader's element is a dict of tensors by name; `model_names` finds the
names a model (or the caller) wants and a `Packer` that turns each element
into `(inputs, targets)` of the model's structure: one tensor, a tuple in
order, or a dict by name.
"""


def model_names(model, inputs, outputs):
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
        return input_names, output_names, Packer(input_names, output_names, dict, dict)
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
        Packer(input_names, output_names, type(model.input), type(model.output)),
    )


class Packer:
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
