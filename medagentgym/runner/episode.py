"""One episode: the agent <-> environment loop, classified into exactly one outcome status.

Infrastructure failures (the LLM endpoint, the sandbox, the grader) end the episode with an infra status
so the run can exclude and retry it; they are never turned into a wrong answer.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from typing import Any

from medagentgym import types as T
from medagentgym.agent.parser import ParseError, parse_action
from medagentgym.agent.prompt import goal_message, observation_message, system_prompt
from medagentgym.config import EnvConfig, SandboxConfig
from medagentgym.env.actions import Environment
from medagentgym.llm.client import LLMError
from medagentgym.runner.records import EpisodeRecord, StepRecord
from medagentgym.sandbox import create_sandbox

log = logging.getLogger(__name__)


@dataclass
class EpisodeSettings:
    env: EnvConfig
    sandbox: SandboxConfig
    model_name: str
    max_input_tokens: int
    base_temperature: float | None
    rollout_temperature: float
    config_hash: str
    run_name: str

    def temperature(self, rollout: int) -> float | None:
        if self.base_temperature is None:  # the model takes no temperature
            return None
        return self.base_temperature if rollout == 0 else self.rollout_temperature


def estimate_tokens(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages) // 4 + 4 * len(messages)


def fit_context(messages: list[dict[str, str]], budget: int) -> list[dict[str, str]]:
    """Drop the oldest assistant/observation pairs (never the system prompt or the goal) to fit the budget.

    Messages keep alternating: the note about what was dropped is appended to the goal message.
    """
    if estimate_tokens(messages) <= budget or len(messages) <= 3:
        return messages
    head, rest = messages[:2], messages[2:]
    dropped = 0
    while len(rest) > 2 and estimate_tokens(head + rest) > budget:
        rest = rest[2:]
        dropped += 2
    if not dropped:
        return messages
    note = f"\n\n[{dropped} earlier messages omitted to fit the context budget]"
    return [head[0], {"role": head[1]["role"], "content": head[1]["content"] + note}] + rest


def run_episode(task: Any, inst: T.TaskInstance, rollout: int, model: Any, debugger: Any,
                s: EpisodeSettings) -> EpisodeRecord:
    started = time.time()
    t0 = time.monotonic()
    deadline = t0 + s.env.max_episode_seconds
    messages = [
        {"role": "system", "content": system_prompt(task.instruction(), task.actions)},
        {"role": "user", "content": goal_message(inst)},
    ]
    steps: list[StepRecord] = []
    usage, llm_calls = T.Usage(), 0
    llm_s = action_s = 0.0
    status, reason, score = None, "", 0.0
    last_verdict: T.Verdict | None = None
    parsed_any = False
    temperature = s.temperature(rollout)
    try:
        sandbox = create_sandbox(s.sandbox, task.sandbox_spec(inst))
    except Exception as exc:  # no sandbox, no episode: infrastructure
        sandbox = None
        status, reason = T.SANDBOX_ERROR, f"sandbox could not start: {exc}"
    try:
        if sandbox is not None:
            task.setup_episode(inst, sandbox)
            env = Environment(task, inst, sandbox, debugger, s.env.max_observation_chars, deadline,
                              s.sandbox.timeout)
        for step in range(s.env.num_steps if status is None else 0):
            if time.monotonic() > deadline:
                status, reason = T.TIMEOUT, f"episode exceeded {s.env.max_episode_seconds:.0f} s"
                break
            try:
                completion = model.complete(fit_context(messages, s.max_input_tokens),
                                            temperature=temperature, context=inst)
            except LLMError as exc:
                status, reason = T.LLM_ERROR, str(exc)
                break
            llm_calls += 1
            llm_s += completion.latency_s
            usage.add(completion.usage)
            reply = completion.text
            messages.append({"role": "assistant", "content": reply})
            rec = StepRecord(step=step, reply=reply, action=None, params=None, observation="",
                             llm_s=completion.latency_s)
            steps.append(rec)
            try:
                action = parse_action(reply, task.actions)
            except ParseError as exc:
                rec.observation = f"Your reply could not be used: {exc}"
                messages.append({"role": "user", "content": rec.observation})
                continue
            parsed_any = True
            rec.action, rec.params = action.name, action.params
            ta = time.monotonic()
            obs = env.step(action)
            rec.action_s = time.monotonic() - ta
            action_s += rec.action_s
            rec.observation = observation_message(obs, s.env.reveal_verdict)
            if obs.exec is not None:
                rec.exec_status, rec.answer = obs.exec.status, obs.exec.answer
            if obs.infra_error:
                status, reason = T.SANDBOX_ERROR, obs.infra_error
                break
            verdict = obs.verdict
            if verdict is not None:
                rec.verdict = asdict(verdict)
                if verdict.status in (T.GRADER_ERROR, T.INVALID_TASK):
                    status, reason = verdict.status, verdict.reason
                    break
                last_verdict = verdict
                if verdict.correct:
                    status, reason, score = T.SUCCESS, verdict.reason, verdict.score
                    break
            messages.append({"role": "user", "content": rec.observation})
    except Exception as exc:  # a bug or crash outside the agent's control: infrastructure, retried on resume
        log.exception("episode %s/%s rollout %s crashed", inst.task, inst.index, rollout)
        status, reason = T.SANDBOX_ERROR, f"harness error: {type(exc).__name__}: {exc}"
    finally:
        if sandbox is not None:
            sandbox.close()
    if status is None:
        if last_verdict is not None:
            status, reason, score = T.WRONG_ANSWER, last_verdict.reason, last_verdict.score
        elif steps and not parsed_any:
            status, reason = T.PARSE_FAILURE, "no reply could be parsed as an action"
        else:
            status, reason = T.STEP_BUDGET, f"no answer submitted within {s.env.num_steps} steps"
    return EpisodeRecord(
        task=inst.task, split=inst.split, index=inst.index, rollout=rollout, task_id=inst.task_id,
        model=s.model_name, temperature=temperature,
        messages=messages,
        steps=[asdict(r) for r in steps],
        outcome={"status": status, "score": float(score), "reason": reason},
        loop=is_loop(steps, s.env.loop_threshold),
        usage={"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
               "cost": usage.cost, "llm_calls": llm_calls},
        timings={"started_at": started, "wall_s": time.monotonic() - t0, "llm_s": llm_s, "action_s": action_s},
        config_hash=s.config_hash, run=s.run_name,
    )


def is_loop(steps: list[StepRecord], threshold: int) -> bool:
    """True when the same action with the same params occurs `threshold` times in a row."""
    run, prev = 0, None
    for st in steps:
        key = (st.action, tuple(sorted((st.params or {}).items()))) if st.action else ("<unparsed>", st.reply)
        run = run + 1 if key == prev else 1
        prev = key
        if threshold > 1 and run >= threshold:
            return True
    return False

