#!/usr/bin/env bash
# DPO of a MedAgentGym policy with OpenRLHF (stage=dpo).
# Usage: dpo_training.sh [slurm] [overrides...]
#   slurm      write job.sbatch into the run dir and submit it with sbatch, instead of running here
#   overrides  stage.* / hydra.* settings, e.g. stage.dataset=DIR stage.model_path=SFT_RUN_DIR
#              stage.gpus=[0,1,2,3] stage.env=.venvs/trl stage.dry_run=true
set -euo pipefail
mode=()
if [ "${1-}" = "slurm" ]; then
    mode=(stage.slurm.enabled=true stage.slurm.submit=true)
    shift
fi
exec "${PYTHON:-python}" -m medagentgym stage=dpo "${mode[@]}" "$@"
