#!/usr/bin/env bash
# Creates the trainer environments the training stages and tests use, with exact pins:
#   .venvs/verl  verl 0.9.1 + its light dependencies (transformers < 5.11, as verl pins)   -> stage=sft
#   .venvs/trl   TRL 1.16.0, plus OpenRLHF 0.11.2 and DeepSpeed 0.19.6 (transformers 5.15.0, as OpenRLHF pins)
#                -> stage=sft/dpo stage.backend=trl, and stage=dpo (OpenRLHF)
# verl and OpenRLHF pin different transformers releases, and TRL 1.x breaks verl's trainer import, hence two.
# torch is installed first and everything else without a torch upgrade, so no CUDA build is pulled in; on a GPU
# machine pass TORCH_SPEC (e.g. TORCH_SPEC="torch==2.13.0" with a CUDA index configured) and add flash-attn.
# Usage: scripts/setup_training_envs.sh [verl|trl|all]   (VENVS_DIR overrides the .venvs location)
set -euo pipefail

which_envs="${1:-all}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venvs="${VENVS_DIR:-$root/.venvs}"
python="${PYTHON:-python3}"
torch_spec="${TORCH_SPEC:-torch==2.13.0}"

make_env() {
    local name="$1"; shift
    local dir="$venvs/$name" start=$SECONDS
    rm -rf "$dir"
    "$python" -m venv "$dir"
    local pip=("$dir/bin/python" -m pip install -q --disable-pip-version-check)
    "${pip[@]}" "$torch_spec"
    "$@" "$dir"
    echo "[setup] $name ready in $((SECONDS - start)) s: $dir"
}

verl_env() {
    local pip=("$1/bin/python" -m pip install -q --disable-pip-version-check)
    # verl's own requirements include wandb, tensorboard and ray[default]; the trainer's import needs only these.
    "${pip[@]}" --no-deps verl==0.9.1
    "${pip[@]}" "transformers==5.10.4" "tensordict==0.10.0" "torchdata==0.11.0" "hydra-core==1.3.8" \
        "datasets==4.7.0" "accelerate==1.15.0" "peft==0.21.2" "ray==2.60.0" "numpy>=2,<3" "pandas>=2.1" \
        "pyarrow>=19" codetiming dill pybind11 pylatexenc pillow uvicorn fastapi "$torch_spec"
}

trl_env() {
    local pip=("$1/bin/python" -m pip install -q --disable-pip-version-check)
    # OpenRLHF without its requirements: flash-attn cannot build without CUDA, vllm/bitsandbytes are not needed.
    "${pip[@]}" --no-deps openrlhf==0.11.2
    "${pip[@]}" "trl==1.16.0" "transformers==5.15.0" "datasets==5.2.0" "accelerate==1.15.0" "peft==0.21.2" \
        "torchdata==0.11.0" jsonlines einops hjson msgpack ninja py-cpuinfo "pydantic>=2" nvidia-ml-py pylatexenc "$torch_spec"
    # DeepSpeed ships as a source archive: build it against the torch already here, compiling no kernels.
    DS_BUILD_OPS=0 "${pip[@]}" --no-deps --no-build-isolation deepspeed==0.19.6
}

mkdir -p "$venvs"
case "$which_envs" in
    verl) make_env verl verl_env ;;
    trl) make_env trl trl_env ;;
    all)  # the two builds overlap: most of the time goes to unpacking wheels and waiting on I/O
        make_env verl verl_env & verl_pid=$!
        make_env trl trl_env & trl_pid=$!
        rc=0
        wait "$verl_pid" || rc=$?
        wait "$trl_pid" || rc=$?
        exit "$rc" ;;
    *) echo "usage: $0 [verl|trl|all]" >&2; exit 2 ;;
esac
