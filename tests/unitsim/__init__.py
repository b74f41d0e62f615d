"""Runs a process under a systemd unit's sandboxing without systemd (see `run`)."""
