#!/usr/bin/env bash
export PYTHONPATH=$PWD
python3 -c "import fused_hmc._build as b; b.load_extension()" > /dev/null 2>&1
for dev in cpu cuda; do for e in ops noise philox bindings; do
  python3 -X faulthandler benchmarks/diag/error_path.py $dev $e 2>&1 | grep -E "OK:|Fatal|File \"/work" | head -4
done; done
cuda-gdb -batch -ex run -ex bt --args python3 benchmarks/diag/error_path.py cpu bindings 2>&1 | grep -E "^#|SIG" | head -30
