"""Which built datasets a callback reports on: the one `model.fit` trains on,
and the one it validates on."""

from kerasbatch.builders.datasets import builder_of
from kerasbatch.builders.settings import Settings
from kerasbatch.engines.derived import DerivedDatasetError
from kerasbatch.engines.served import built_dataset


def checked_builder(builder, caller):
    """`builder`, or a TypeError naming `caller` if it is not a kerasbatch
    builder."""
    if not isinstance(builder, Settings):
        raise TypeError(
            f"{caller} needs the kerasbatch builder whose dataset model.fit "
            f"trains on, got {type(builder).__name__}."
        )
    return builder


def fit_sources(builder, dataset, validation_data, caller):
    """The builders that describe `model.fit`'s training and validation data.

    Every built dataset is served by a copy of its builder frozen at its
    `build` call (`kerasbatch.builders.builder_of`), whose `statistics()` and
    `running_positions()` describe exactly its batches. A dataset made from
    a built one by per-batch transformations (`map`, `prefetch`, ...; see
    `kerasbatch.engines.derived`) is described by the same copy.

    Args:
        builder: the builder given to the callback.
        dataset: the dataset `model.fit` trains on (built by `builder`, or
            made from a built one by `distribute`,
            `distribute_with_service` or per-batch transformations), or
            None: the one dataset `builder` built that is still in use
            (other than the one `validation_data` is, or is made from), or
            `builder` itself when it built none.
        validation_data: the validation dataset (returned by any builder's
            `build`, or made from one by per-batch transformations), or
            None.
        caller: the callback's name, for error messages.

    Returns:
        `(training, validation)`: builders whose `statistics()` and
        `running_positions()` answer for each; `validation` is None without
        validation data.

    Raises:
        ValueError: `dataset` was not built by `builder` (or is made from a
            built dataset by a transformation that changes its batches: the
            message names it), or `dataset` is None and `builder` built
            several datasets still in use.
    """
    validation = validated = None
    if validation_data is not None:
        try:
            validated = built_dataset(validation_data)
        except DerivedDatasetError as error:
            raise DerivedDatasetError(f"{caller}: validation_data: {error}") from None
        validation = builder_of(validated)
    if dataset is not None:
        try:
            served = builder._describing(dataset)
        except DerivedDatasetError as error:
            raise DerivedDatasetError(f"{caller}: {error}") from None
        except ValueError:
            served = None
        if served is None or served is builder:
            raise ValueError(
                f"{caller}: the dataset given was not built by {builder!r}. "
                "Pass a dataset this builder's build(), distribute() or "
                "distribute_with_service() returned, or one made from it by "
                "per-batch transformations (map, prefetch, ...)."
            )
        return served, validation
    in_use = [d for d in builder._not_freed() if d is not validated]
    if len(in_use) > 1:  # unless some are freed at the next collection
        in_use = [d for d in builder.built_datasets() if d is not validated]
    if len(in_use) > 1:
        raise ValueError(
            f"{caller} cannot tell which dataset model.fit trains on: "
            f"{type(builder).__name__} built {len(in_use)} datasets that are "
            "still in use (for example training and validation data). Say "
            f"which: {caller}(builder, dataset=train_dataset), and "
            "validation_data=val_dataset for the validation figure (the "
            "datasets model.fit gets, mapped or not)."
        )
    return (builder_of(in_use[0]) if in_use else builder), validation
