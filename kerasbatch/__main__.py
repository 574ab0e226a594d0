"""Command line: `python -m kerasbatch demo [--sequences N] [--epochs E]`."""

import argparse
import os


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="kerasbatch", description="kerasbatch command line."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="train a small GRU on padded and on bucketed batches of built-in "
        "data and compare padding efficiency and epoch time",
    )
    demo.add_argument("--sequences", type=int, default=3000)
    demo.add_argument("--epochs", type=int, default=3)
    demo.add_argument("--batch-size", type=int, default=64)
    arguments = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from kerasbatch.demo import run_demo

    run_demo(arguments.sequences, arguments.epochs, arguments.batch_size)


if __name__ == "__main__":
    main()
