"""Every config group composes through Hydra's compose API against the structured schema."""

import itertools

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from medagentgym.config import ModelConfig, conf_dir, register_configs

register_configs()
CONF = conf_dir()
MODELS = sorted(p.stem for p in (CONF / "model").glob("*.yaml"))
TASKS = sorted(p.stem for p in (CONF / "task").glob("*.yaml"))
LAUNCHERS = sorted(p.stem for p in (CONF / "launcher").glob("*.yaml"))
STAGES = sorted(p.stem for p in (CONF / "stage").glob("*.yaml"))


def compose_cfg(overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=overrides)


def test_the_groups_the_issue_names_exist():
    assert {"gpt_4_1_mini", "gpt_4_1", "gpt_4o", "gpt_4o_mini", "o4_mini", "qwen2_5_7b_instruct",
            "qwen2_5_14b_instruct", "medgemma_4b", "qwen3_8b", "openai_compatible", "oracle"} <= set(MODELS)
    assert {"sequential", "joblib", "ray"} <= set(LAUNCHERS)
    assert "evaluate" in STAGES


@pytest.mark.parametrize("model, task, launcher", list(itertools.product(MODELS, TASKS, LAUNCHERS)))
def test_every_model_task_launcher_composes(model, task, launcher):
    cfg = compose_cfg([f"+model={model}", f"task={task}", f"launcher={launcher}",
                       "model.base_url=http://127.0.0.1:1/v1", "model.name=x"])
    OmegaConf.to_object(cfg.model)  # every field type-checks, no ??? left
    assert cfg.task.name == task and cfg.launcher.name == launcher


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_composes(stage):
    cfg = compose_cfg([f"stage={stage}"])
    assert cfg.stage.name == stage


def test_model_is_required_and_absent_from_defaults():
    cfg = compose_cfg([])
    assert OmegaConf.is_missing(cfg, "model")


def test_gpt_4_1_mini_has_the_seed_values():
    m = OmegaConf.to_object(compose_cfg(["+model=gpt_4_1_mini"]).model)
    assert isinstance(m, ModelConfig) and m.provider == "azure"
    assert (m.temperature, m.max_new_tokens, m.max_input_tokens, m.max_total_tokens, m.log_probs, m.n_retry,
            m.retry_delay) == (0.0, 8192, 8192, 32768, False, 3, 10)


def test_reasoning_model_declares_its_parameters():
    m = compose_cfg(["+model=o4_mini"]).model
    assert m.temperature is None and m.max_tokens_param == "max_completion_tokens"


@pytest.mark.parametrize("override", ["env.num_stepz=3", "model.temprature=0", "run.num_rollouts=many",
                                      "launcher.n_jobs=lots", "stage.bogus=1", "sandbox.timeout=soon"])
def test_typos_and_wrong_types_fail_at_compose_time(override):
    with pytest.raises(ConfigCompositionException):
        compose_cfg(["+model=gpt_4o", override])


def test_no_secret_values_in_model_configs():
    for path in (CONF / "model").glob("*.yaml"):
        text = path.read_text()
        assert "sk-" not in text and "api_key:" not in text, path
