"""Training: turn evaluate run dirs into SFT / DPO files, and build the trainer commands that consume them.

Nothing here imports a trainer: verl, OpenRLHF and TRL run as child processes in their own environments,
because their pinned dependencies cannot share one Python environment.
"""
