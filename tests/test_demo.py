"""The demo that the README's first command runs."""

import pytest

from kerasbatch.__main__ import main
from kerasbatch.tools import demo
from kerasbatch.tools.demo import format_results


def test_demo_command_line_compares_padded_and_bucketed_batches(capsys, monkeypatch):
    # One run of the command serves every check: each run trains (and, on
    # TensorFlow, traces) a recurrent model on each kind of batches. The
    # command's `run_demo` is wrapped to keep what it returns.
    runs = []
    original = demo.run_demo

    def run_demo(*args, **kwargs):
        runs.append((args, original(*args, **kwargs)))
        return runs[-1][1]

    monkeypatch.setattr(demo, "run_demo", run_demo)
    main(["demo", "--sequences", "300", "--epochs", "1"])
    ((args, results),) = runs
    assert args == (300, 1, 64)  # --sequences, --epochs, the default batch size
    assert set(results) == {"padded", "bucketed"}
    assert (
        results["bucketed"]["padding_efficiency"]
        > results["padded"]["padding_efficiency"]
    )
    table = format_results(results)
    assert "bucketed epochs are" in table and "padded" in table
    out = capsys.readouterr().out
    assert "padding eff." in out and table in out  # the table is printed


def test_unknown_command_is_an_error(capsys):
    with pytest.raises(SystemExit):
        main(["train"])
    assert "invalid choice: 'train'" in capsys.readouterr().err
