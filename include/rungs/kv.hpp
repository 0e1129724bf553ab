// rungs/kv.hpp: everything for paged KV-cache blocks (block pool, eviction and hashing
// policies, prefix caching, the allocators, capacity planning).
#pragma once

#include <rungs/kv/allocator.hpp>
#include <rungs/kv/block_pool.hpp>
#include <rungs/kv/block_table.hpp>
#include <rungs/kv/capacity.hpp>
#include <rungs/kv/eviction.hpp>
#include <rungs/kv/free_stack.hpp>
#include <rungs/kv/hash.hpp>
#include <rungs/kv/hybrid_allocator.hpp>
#include <rungs/kv/lru.hpp>
#include <rungs/kv/metrics.hpp>
#include <rungs/kv/paged_allocator.hpp>
#include <rungs/kv/prefix_cache.hpp>
#include <rungs/kv/priority_lru.hpp>
#include <rungs/kv/result.hpp>
#include <rungs/kv/sha256.hpp>
#include <rungs/kv/types.hpp>
#include <rungs/kv/wyhash.hpp>
