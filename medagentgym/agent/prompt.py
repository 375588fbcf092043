"""The conversation's fixed parts: system prompt, first user message, observation messages."""

from __future__ import annotations

from medagentgym.agent.actions import describe_actions
from medagentgym.types import Observation, TaskInstance

REPLY_RULES = (
    "Reply with exactly one JSON object per turn, of the form "
    '{"action": "<name>", "params": {...}}, using one of the actions below with exactly the params shown. '
    "You may think before the JSON, but the JSON object must come last. Code goes inside the JSON string."
)


def system_prompt(instruction: str, actions: list[str]) -> str:
    return f"{instruction.strip()}\n\n{REPLY_RULES}\n\nActions:\n{describe_actions(actions)}"


def goal_message(inst: TaskInstance) -> str:
    return inst.goal


def truncate(text: str, limit: int) -> str:
    """Keep the head and tail of long output, saying how much was cut."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n... [{cut} characters cut] ...\n{text[-tail:]}"


def observation_message(obs: Observation, reveal_verdict: bool) -> str:
    text = obs.text
    if reveal_verdict and obs.verdict is not None and obs.verdict.status == "graded":
        if obs.verdict.correct:
            text += "\n\nVerdict: your answer is correct."
        else:
            # The grader's reason stays in the record (it may quote the gold); feedback is agent-safe.
            feedback = f" {obs.verdict.feedback}" if obs.verdict.feedback else ""
            text += f"\n\nVerdict: your answer is not correct.{feedback} Revise your solution and submit again."
    return text
