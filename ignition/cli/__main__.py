"""``python -m ignition.cli``: the same ``ignition`` command."""

from ignition.cli.app import main

if __name__ == "__main__":
    main()
