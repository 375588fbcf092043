"""medagentgym: LLM agents on biomedical coding tasks, graded, with trajectories for training.

Public API (everything else is private to its module):
- ``medagentgym.tasks.base.Task`` and ``medagentgym.sandbox.base.Sandbox``: the two extension points;
- ``medagentgym.runner.records.EpisodeRecord``: what a run writes, and what training stages read;
- ``python -m medagentgym``: the Hydra entry point (``medagentgym.cli``).
"""

__version__ = "0.1.0"
