"""The batches of every builder, engine and option set are those recorded
before the refactoring, bit for bit.

`batch_records.CASES` builds every builder with the options that change
its batches, on every engine it runs on; `tests/data/batch_digests.json`
holds the sha256 digest of each epoch's batches (values, dtypes, shapes,
structure and `len()`) as commit a072bf8 made them. A difference means the
batches changed: if that is meant, record again with
`python -m tests.batch_records --write` and say why in the commit.
"""

import json
import re

import batch_records as records
import keras
import pytest


def _recorded():
    if not records.DIGESTS.exists():
        return {}
    return json.loads(records.DIGESTS.read_text())


RECORDED = _recorded()


@pytest.fixture(autouse=True)
def _keras_distribution_restored():
    """No test here sets a global Keras distribution; should a builder
    ever do so, it is undone."""
    distribution = keras.distribution.distribution()
    yield
    keras.distribution.set_distribution(distribution)


def test_the_digests_are_recorded():
    assert records.DIGESTS.exists(), (
        f"{records.DIGESTS} is missing: record it with "
        "`python -m tests.batch_records --write`."
    )
    assert RECORDED, f"{records.DIGESTS} holds no digest."
    for key, epochs in RECORDED.items():
        assert len(epochs) == records.EPOCHS, key
        assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in epochs), key


def test_every_case_is_recorded_on_every_engine_it_runs_on():
    expected = set(records.keys())
    missing = sorted(expected - set(RECORDED))
    unknown = sorted(set(RECORDED) - expected)
    assert not missing, f"cases with no recorded digests: {missing}"
    assert not unknown, f"recorded digests of no case (removed?): {unknown}"
    for name, refused in records.REFUSED.items():
        assert name in records.CASES, name
        assert set(refused) < set(records.ENGINES), (name, refused)
    assert set(records.DIFFERS_BY_ENGINE) <= set(records.CASES)
    # Every builder is covered, on every engine.
    builders = {name.split("/")[0] for name in records.CASES}
    assert builders == {
        "padded",
        "sorted",
        "bucket",
        "packed",
        "chunk",
        "window",
        "stream",
    }
    for builder in builders:
        engines = {
            records.split_key(key)[1]
            for key in RECORDED
            if key.startswith(f"{builder}/")
        }
        assert engines == set(records.ENGINES), (builder, engines)


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_batches_are_unchanged(key):
    name, engine = records.split_key(key)
    if name not in records.CASES:
        pytest.fail(f"{key} is recorded, but no case is named {name!r}")
    actual = records.digests(name, engine)
    for epoch, (want, got) in enumerate(zip(RECORDED[key], actual, strict=True)):
        assert got == want, (
            f"case {name!r} on engine {engine!r}: the batches of epoch {epoch} "
            f"differ from those recorded (digest {got[:12]}, recorded "
            f"{want[:12]})"
        )


REFUSALS = sorted(
    f"{name}/{engine}"
    for name, refused in records.REFUSED.items()
    for engine in refused
)


@pytest.mark.parametrize("key", REFUSALS)
def test_refused_engines_still_say_why(key):
    """The engines a case is not recorded on refuse it with the documented
    error (so that no case drops an engine silently)."""
    name, engine = records.split_key(key)
    with pytest.raises(ValueError, match=records.REFUSED[name][engine]):
        records.build(name, engine)


def test_the_engines_make_the_same_batches():
    """Every engine of a case gives the same digests (recorded above,
    checked live by `test_batches_are_unchanged`), except where they
    differ today (`DIFFERS_BY_ENGINE`, each with the reason)."""
    agree, differ = [], []
    for name in records.CASES:
        engines = records.engines_of(name)
        digests = {e: RECORDED.get(f"{name}/{e}") for e in engines}
        same = len({tuple(d or ()) for d in digests.values()}) == 1
        (agree if same else differ).append(name)
    assert sorted(differ) == sorted(records.DIFFERS_BY_ENGINE), (
        "cases whose engines make different batches: "
        f"{sorted(differ)}; expected: {sorted(records.DIFFERS_BY_ENGINE)}"
    )
    assert len(agree) + len(differ) == len(records.CASES)
