#!/usr/bin/env bash
# The cuda-sim step (cmake --workflow --preset cuda-sim's three steps, each timed) from a clean
# build dir, no compiler cache, one job at a time: final.sh <worktree> <tag>
set -u
cd "$1" && rm -rf build/cuda-sim
out=/work/wt/simci/build/meas/final-$2
export CMAKE_BUILD_PARALLEL_LEVEL=1 CTEST_PARALLEL_LEVEL=1
unset CMAKE_CXX_COMPILER_LAUNCHER CMAKE_CUDA_COMPILER_LAUNCHER
t0=$(date +%s)
/usr/bin/time -f "configure %U %S %e" -a -o $out.time cmake --preset cuda-sim > $out.log 2>&1
/usr/bin/time -f "build %U %S %e" -a -o $out.time cmake --build --preset cuda-sim >> $out.log 2>&1
/usr/bin/time -f "test %U %S %e" -a -o $out.time ctest --preset cuda-sim >> $out.log 2>&1
echo "rc=$? wall $(( $(date +%s) - t0 ))" >> $out.time
cp build/cuda-sim/.ninja_log $out.ninja_log
