"""The TensorFlow-free tests' own settings (`run.sh` runs them)."""


def pytest_configure(config):
    # pytest-xdist registers this mark where it is loaded (`run.sh` runs
    # with --dist loadgroup); registered here too, a run without xdist
    # (`-p no:xdist`) takes it without a warning.
    config.addinivalue_line(
        "markers", "xdist_group(name): the tests of a group run on one worker"
    )
