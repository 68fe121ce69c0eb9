"""`python -m ioobserve`: the command line, with the interpreter that runs it."""

from ioobserve.cli.app import main

main()
