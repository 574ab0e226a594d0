"""Which built datasets a callback reports on: the one `model.fit` trains on,
and the one it validates on."""

from kerasbatch.builders.serving import builder_of
from kerasbatch.builders.shared import SharedSettings


def checked_builder(builder, caller):
    """`builder`, or a TypeError naming `caller` if it is not a kerasbatch
    builder."""
    if not isinstance(builder, SharedSettings):
        raise TypeError(
            f"{caller} needs the kerasbatch builder whose dataset model.fit "
            f"trains on, got {type(builder).__name__}."
        )
    return builder


def fit_sources(builder, dataset, validation_data, caller):
    """The builders that describe `model.fit`'s training and validation data.

    Every built dataset is served by a copy of its builder frozen at its
    `build` call (`kerasbatch.builders.builder_of`), whose `statistics()` and
    `running_positions()` describe exactly its batches.

    Args:
        builder: the builder given to the callback.
        dataset: the dataset `model.fit` trains on (built by `builder`, or
            made from a built one by `distribute` or
            `distribute_with_service`), or None: the one dataset
            `builder` built that is still in use (other than
            `validation_data`), or `builder` itself when it built none.
        validation_data: the validation dataset (returned by any builder's
            `build`), or None.
        caller: the callback's name, for error messages.

    Returns:
        `(training, validation)`: builders whose `statistics()` and
        `running_positions()` answer for each; `validation` is None without
        validation data.

    Raises:
        ValueError: `dataset` was not built by `builder`, or `dataset` is
            None and `builder` built several datasets still in use.
    """
    validation = None if validation_data is None else builder_of(validation_data)
    built = builder.built_datasets()
    if dataset is not None:
        try:
            served = builder._serving(dataset)
        except ValueError:
            served = None
        if served is None or served is builder:
            raise ValueError(
                f"{caller}: the dataset given was not built by {builder!r} "
                "(or is derived from one it built by map, repeat, ...). Pass "
                "a dataset this builder's build(), distribute() or "
                "distribute_with_service() returned."
            )
        return served, validation
    in_use = [d for d in built if d is not validation_data]
    if len(in_use) > 1:
        raise ValueError(
            f"{caller} cannot tell which dataset model.fit trains on: "
            f"{type(builder).__name__} built {len(in_use)} datasets that are "
            "still in use (for example training and validation data). Say "
            f"which: {caller}(builder, dataset=train_dataset), and "
            "validation_data=val_dataset for the validation figure."
        )
    return (builder_of(in_use[0]) if in_use else builder), validation
