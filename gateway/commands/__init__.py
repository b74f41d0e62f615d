"""The ``familiar`` subcommands, one module per job; ``gateway.cli`` registers them."""
