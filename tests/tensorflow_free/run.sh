#!/bin/sh
# The TensorFlow-free check, as a user of Keras on JAX without TensorFlow has
# it: a fresh virtual environment with `pip install kerasbatch[grain]` (no
# TensorFlow: `import tensorflow` must fail there), then every test in this
# folder on KERAS_BACKEND=jax: every builder on the grain and python engines
# in a real model.fit, the callbacks, resume after a kill, and the tuner
# (on every core, as the main suite; --dist loadscope gives each module to
# one worker, so that the processes of test_multi_host's and test_resume's
# module fixtures start once. --dist loadgroup would group by xdist_group
# marks, but with pytest 9.2 it silently stops grouping and both workers ran
# those fixtures: pytest-dev/pytest-xdist#1386).
set -eu
cd "$(dirname "$0")/../.."
venv="${TMPDIR:-/tmp}/kerasbatch-without-tensorflow"
rm -rf "$venv"
install() {
  if python3 -m uv --version >/dev/null 2>&1; then
    # uv (in the dev extra) installs the same packages from the same index as
    # pip, in a fraction of the time: about 35 s against 150-270 s here. It
    # compiles their bytecode at install, as pip does: where Python may not
    # write it (PYTHONDONTWRITEBYTECODE), every process would otherwise
    # compile JAX and Keras again (14 s against 6 s for `import keras, jax`).
    python3 -m uv venv --quiet --python python3 "$venv"
    python3 -m uv pip install --quiet --compile-bytecode --python "$venv/bin/python" "$@"
  else
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet "$@"
  fi
}
install -e ".[grain]" "jax[cpu]" pytest pytest-xdist hypothesis nbclient nbformat ipykernel
if "$venv/bin/python" -c "import tensorflow" 2>/dev/null; then
  echo "TensorFlow is installed in $venv: this check needs an environment without it" >&2
  exit 1
fi
KERAS_BACKEND=jax "$venv/bin/python" -m pytest -q -n auto --dist loadscope -p no:cacheprovider \
  tests/tensorflow_free "$@"
