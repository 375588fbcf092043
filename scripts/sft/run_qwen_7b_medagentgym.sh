#!/usr/bin/env bash
# Multi-turn SFT of Qwen2.5-7B-Instruct on MedAgentGym trajectories with verl (stage=sft).
# Usage: run_qwen_7b_medagentgym.sh NPROC SAVE_PATH [overrides...]
#   NPROC      GPUs on this node (torchrun --nproc_per_node)
#   SAVE_PATH  checkpoint directory (verl trainer.default_local_dir)
#   overrides  stage.* / hydra.* go to medagentgym (e.g. stage.train_files=DIR stage.env=.venvs/verl
#              stage.dry_run=true); anything else (e.g. trainer.save_freq=100) is passed on to verl.
set -euo pipefail
if [ "$#" -lt 2 ]; then
    echo "usage: $0 NPROC SAVE_PATH [stage.train_files=DIR] [stage.*=... | verl.key=...]" >&2
    exit 2
fi
nproc="$1"
save_path="$2"
shift 2
ours=()
verl=()
for arg in "$@"; do
    case "$arg" in
        stage.*|hydra.*|+*|~*) ours+=("$arg") ;;
        *) verl+=("'${arg//\'/\\\'}'") ;;
    esac
done
extra="[$(IFS=,; echo "${verl[*]-}")]"
exec "${PYTHON:-python}" -m medagentgym stage=sft "stage.nproc_per_node=$nproc" "stage.save_path=$save_path" \
    "stage.extra_overrides=$extra" "${ours[@]}"
