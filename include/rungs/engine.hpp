// The engine's public API in one include: the engine (scheduler, KV blocks and graph runner,
// one serving loop), its run-time façade any_engine (policies from one engine_config), the
// graph runner alone, the bucket spaces over rungs' ladders and grids,
// the capture policies, the host backend and its CPU reference forward, observers, and the
// KV allocators and ladders they compose with. The CUDA backend is a separate include over
// the CUDA runtime (<rungs/engine/cuda_backend.hpp> in cuda/, target rungs::cuda_runtime).
#pragma once

#include <rungs/engine/any_buckets.hpp>
#include <rungs/engine/any_engine.hpp>
#include <rungs/engine/capture_order.hpp>
#include <rungs/engine/capture_timing.hpp>
#include <rungs/engine/engine.hpp>
#include <rungs/engine/graph_runner.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/ladder_buckets.hpp>
#include <rungs/engine/model.hpp>
#include <rungs/engine/observer.hpp>
#include <rungs/engine/phased_buckets.hpp>
#include <rungs/engine/reference_forward.hpp>
#include <rungs/kv.hpp>
#include <rungs/ladder.hpp>
