// Everything of rungs' ladders and bucket grids (issue 3): include this, or the one header
// you need from rungs/ladder/.
#pragma once

#include <rungs/ladder/bucket_file.hpp>
#include <rungs/ladder/capture_sizes.hpp>
#include <rungs/ladder/concepts.hpp>
#include <rungs/ladder/explicit.hpp>
#include <rungs/ladder/exponential.hpp>
#include <rungs/ladder/gaudi_buckets.hpp>
#include <rungs/ladder/gaudi_config.hpp>
#include <rungs/ladder/grid.hpp>
#include <rungs/ladder/ladder.hpp>
#include <rungs/ladder/linear.hpp>
#include <rungs/ladder/lookup_table.hpp>
#include <rungs/ladder/padding.hpp>
#include <rungs/ladder/pow2.hpp>
#include <rungs/ladder/rung.hpp>
#include <rungs/ladder/static_ladder.hpp>
#include <rungs/ladder/transforms.hpp>
#include <rungs/ladder/vllm_capture_sizes.hpp>
