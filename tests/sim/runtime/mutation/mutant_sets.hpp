// The instance sets the mutation drivers check, and the launches each mutant compiles against its
// mutated copy of kernels/ (*_launch.cu). A driver (*_driver.cpp: the check's harness, the host
// reference and Catch2) is compiled once and linked to every mutant of its kind; only the
// launches, the kernels and their host stubs are compiled per mutant.
#pragma once

#include <rungs/attention/dispatch.hpp>
#include <rungs/attention/plan.hpp>

#include "paged_problem.hpp"  // rungs_test::all_score_mods

namespace rungs_mutation {

namespace ra = rungs::attention;

// The SIMT decode: f16, head dim 128 (16-lane groups), group 4. It has no tensor-core instance,
// so the planner, which would pick tensor cores for group 4, is told the SIMT kernel.
using decode_set = ra::instantiation_set<ra::dtypes<ra::dtype::fp16>, ra::values<128>,
                                         ra::values<ra::dynamic_block_size>, ra::values<4>>;
void simt_decode(const ra::decode_plan& plan, const ra::decode_args& args);

// The tensor-core decode: f16, head dim 128, group 4.
using tensor_core_decode_set =
    ra::instantiation_set<ra::dtypes<ra::dtype::fp16>, ra::values<128>, ra::values<ra::dynamic_block_size>,
                          ra::values<4>, ra::no_fp8_kv,
                          ra::tensor_core_decode_instances<ra::dtypes<ra::dtype::fp16>, ra::values<128>, ra::values<4>>>;
void tensor_core_decode(const ra::decode_plan& plan, const ra::decode_args& args);

// The tensor-core prefill: bf16, head dim 128 (the group is a run-time value), without score
// transforms and with every one (window, soft-cap and sinks).
using tensor_core_prefill_set =
    ra::instantiation_set<ra::dtypes<ra::dtype::bf16>, ra::values<128>, ra::values<ra::dynamic_block_size>,
                          ra::values<1>, ra::no_fp8_kv, ra::no_tensor_core_decode,
                          ra::tensor_core_prefill_instances<ra::dtypes<ra::dtype::bf16>, ra::values<128>>>;
void tensor_core_prefill(const ra::prefill_plan& plan, const ra::prefill_args& args);
void tensor_core_prefill_all_mods(const ra::prefill_plan& plan, const ra::prefill_args& args);

}  // namespace rungs_mutation
