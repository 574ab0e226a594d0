"""The demo that the README's first command runs."""

import pytest

from kerasbatch.__main__ import main
from kerasbatch.tools.demo import format_results, run_demo


def test_demo_compares_padded_and_bucketed_batches():
    results = run_demo(num_sequences=300, epochs=2, verbose=0)
    assert set(results) == {"padded", "bucketed"}
    assert (
        results["bucketed"]["padding_efficiency"]
        > results["padded"]["padding_efficiency"]
    )
    table = format_results(results)
    assert "bucketed epochs are" in table and "padded" in table


def test_demo_command_line(capsys):
    main(["demo", "--sequences", "200", "--epochs", "1"])
    assert "padding eff." in capsys.readouterr().out


def test_unknown_command_is_an_error(capsys):
    with pytest.raises(SystemExit):
        main(["train"])
    assert "invalid choice: 'train'" in capsys.readouterr().err
