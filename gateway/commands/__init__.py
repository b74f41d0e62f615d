"""The ``familiar`` subcommands, one module per job; ``gateway.cli`` registers them lazily.

A command's one-line help is in ``gateway.cli.COMMANDS`` (``familiar --help`` lists it
without importing the command); the command's docstring holds the rest of its help.
"""
