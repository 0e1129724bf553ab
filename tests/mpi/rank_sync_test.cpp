// rungs::mpi::rank_sync with ranks as processes (mpirun -np 2 and -np 4): the values agreed,
// diverging engines caught on every rank, and the engine scenario of rank_scenario.hpp (a
// capture failing on rank 1 only) giving every rank the same captures and runs as the
// threads of simulated_ranks do.
#include <rungs/engine/rank_sync.hpp>
#include <rungs/mpi/rank_sync.hpp>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "rank_scenario.hpp"

using namespace rungs_test;

namespace {
int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Rank 0's lines, on every rank.
std::vector<std::string> from_rank0(const std::vector<std::string>& mine) {
  std::string joined;
  for (const auto& l : mine) joined += l + '\n';
  long long n = static_cast<long long>(joined.size());
  MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  joined.resize(static_cast<std::size_t>(n));
  MPI_Bcast(joined.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (std::size_t at = 0, nl; (nl = joined.find('\n', at)) != std::string::npos; at = nl + 1)
    out.push_back(joined.substr(at, nl - at));
  return out;
}
}  // namespace

TEST_CASE("max_each over MPI: the elementwise maximum on every rank") {
  rungs::mpi::rank_sync sync;
  const int n = sync.size(), r = sync.rank();
  REQUIRE(n == world_size());
  REQUIRE(r == world_rank());
  std::vector<std::int64_t> v{r, -r, 100 - r, r == 1 ? INT64_MAX : INT64_MIN};
  sync.max_each(v);
  CHECK(v == std::vector<std::int64_t>{n - 1, 0, 100, n > 1 ? INT64_MAX : INT64_MIN});
  std::vector<std::int64_t> none;
  sync.max_each(none);  // an empty agreement is still a collective
  CHECK(sync.calls() == 2);
  std::vector<std::int64_t> many(rungs::mpi::rank_sync::capacity + 1);
  CHECK_THROWS_WITH(sync.max_each(many), "rungs::mpi::rank_sync: max_each of 17 values; at most 16 fit one collective");
  CHECK(sync.calls() == 2);
  CHECK_THROWS_WITH(rungs::mpi::rank_sync(MPI_COMM_WORLD, std::chrono::milliseconds(0)),
                    "rungs::mpi::rank_sync: timeout = 0 ms must be positive");
}

TEST_CASE("max_each over MPI: ranks calling with different counts all throw, none hangs") {
  rungs::mpi::rank_sync sync;
  std::vector<std::int64_t> v(sync.rank() == 0 ? 2 : 3, 1);
  CHECK_THROWS_WITH(sync.max_each(v), "rungs::mpi::rank_sync: ranks called max_each #1 with 2 to 3 values; their "
                                      "engines diverged");
  // The next collective still lines up.
  std::vector<std::int64_t> w{sync.rank()};
  sync.max_each(w);
  CHECK(w[0] == sync.size() - 1);
}

TEST_CASE("engines on MPI ranks on the dispatch key: a uniform-decode rank and mixed ranks agree on mixed") {
  rungs::mpi::rank_sync sync;
  const rank_trace t = run_dispatch_rank(sync, sync.rank());
  CHECK(t.wrong_rows == 0);
  // Step 2: the widest rank decodes n sequences: decode graph (2, 2) for 2 ranks, (4, 2) for 4.
  const std::string decode = sync.size() <= 2 ? "decode(2, 2):replay" : "decode(4, 2):replay";
  CHECK(t.runs == std::vector<std::string>{"prompt16:replay", decode});
  CHECK(t.runs == from_rank0(t.runs));
}

TEST_CASE("engines on MPI ranks: one failed capture fails everywhere, every rank pads and captures alike") {
  rungs::mpi::rank_sync sync;
  const int n = sync.size();
  REQUIRE((n == 2 || n == 4));
  const rank_trace t = run_rank(sync, sync.rank());
  CHECK(t.wrong_rows == 0);
  CHECK(t.captures == from_rank0(t.captures));
  CHECK(t.runs == from_rank0(t.runs));
  CHECK(t.stats.capture_failures == 1);  // rung 4 failed on rank 1 only

  // The same scenario over threads gives the same decisions.
  const rank_trace sim = run_simulated(n)[0];
  CHECK(t.captures == sim.captures);
  CHECK(t.runs == sim.runs);
  CHECK(t.stats.budget_left == sim.stats.budget_left);

  // By hand (the rules in rank_sync_test.cpp): rung 4 fails at step 0 on rank 1, so on all;
  // each graph is charged base (the largest rank's: n MiB) + 1 MiB per token.
  constexpr std::int64_t MiB = 1 << 20;
  if (n == 2) {
    // Agreed batches 3 5 2 1 20 4. 8: 10 MiB, 2: 4, 1: 3 (17 used); at step 4 (above the
    // top) 16 is estimated at 17/11 x 16 = 24.7 MiB, past the 23 left: refused.
    CHECK(t.captures == std::vector<std::string>{"step0:4:failed", "step1:8", "step2:2", "step3:1", "step4:16:refused"});
    CHECK(t.runs == std::vector<std::string>{"4:eager", "8:replay", "2:replay", "1:replay", "-:eager", "4:eager"});
    CHECK(t.stats.budget_left == 23 * MiB);
  } else {
    // Agreed batches 3 5 2 9 20 4. 8: 12 MiB, 2: 6 (18 used); at step 3, 16 is estimated at
    // 18/10 x 16 = 28.8 MiB, past the 22 left: refused, and 1 is captured instead (5 MiB).
    CHECK(t.captures == std::vector<std::string>{"step0:4:failed", "step1:8", "step2:2", "step3:16:refused", "step3:1"});
    CHECK(t.runs == std::vector<std::string>{"4:eager", "8:replay", "2:replay", "16:eager", "-:eager", "4:eager"});
    CHECK(t.stats.budget_left == 17 * MiB);
  }
}
