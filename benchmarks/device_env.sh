# Sourced by every device-call script: the build's environment. fused_hmc/_build.py hashes
# TORCH_CUDA_ARCH_LIST and the ptxas flag into the library's name, so a process started without
# these would build the extension again (minutes) instead of loading the one already built.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0
export FUSED_HMC_PTXAS_VERBOSE=1
if [[ -z "${FUSED_HMC_WHEELS_DONE:-}" ]] && compgen -G ".whl/*.whl" > /dev/null; then
  # Wheels carried in .whl/ (BlackJAX and what it needs) go to /tmp/site.
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
  export FUSED_HMC_WHEELS_DONE=1
fi
