// What rank agreement costs per engine step, side by side in one run (benchmarks/RESULTS.md):
//   mpirun -np N mpi_rank_sync_bench [iterations]
//
//   max_each          rungs::mpi::rank_sync::max_each of 9 values (one step's batch key): one
//                     MPI_Iallreduce(MAX) of 18 int64, polled against the deadline
//   MPI_Allreduce     the same 18 int64 through a blocking MPI_Allreduce (what the polling costs)
//   step, 1 rank      a graph_runner step on the host backend with a no-op forward, 61 decode
//                     sequences padded to 64, no rank sync (the host step without agreement)
//   step, N ranks     the same step agreeing its batch key through rank_sync
//
// Each figure is the median over `iterations` (default 20000) of one call's wall time on rank
// 0, after as many warm-up calls; calls are separated by a barrier so every rank starts
// together (the barrier is outside the timed region).
#include <rungs/engine/graph_runner.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/ladder_buckets.hpp>
#include <rungs/ladder.hpp>
#include <rungs/mpi/rank_sync.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {
namespace eng = rungs::engine;

template <class F>
double median_us(int iterations, F call) {
  std::vector<double> t(static_cast<std::size_t>(iterations));
  for (int i = -iterations; i < iterations; ++i) {  // the first half warms up
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    call();
    const double dt = MPI_Wtime() - t0;
    if (i >= 0) t[static_cast<std::size_t>(i)] = dt;
  }
  std::nth_element(t.begin(), t.begin() + iterations / 2, t.end());
  return t[static_cast<std::size_t>(iterations / 2)] * 1e6;
}

constexpr eng::model_shape model{.dtype = rungs::dtype::bf16, .num_qo_heads = 32, .num_kv_heads = 8, .head_dim = 128,
                                 .block_size = 16, .num_layers = 32};
using buckets = eng::ladder_buckets<rungs::ladder>;
using runner = eng::graph_runner<buckets, eng::largest_first, eng::startup, eng::host_backend>;

// 61 decode sequences of ~500 tokens (each with its own 64-block table), padded to rung 64.
struct decode_batch {
  std::vector<std::int32_t> token{42};
  std::vector<std::vector<std::int32_t>> tables;
  std::vector<eng::sequence> seqs;
  decode_batch() {
    for (std::int64_t i = 0; i < 61; ++i) {
      std::vector<std::int32_t> t(64);
      for (std::size_t b = 0; b < t.size(); ++b) t[b] = static_cast<std::int32_t>(i * 64 + static_cast<std::int64_t>(b));
      tables.push_back(std::move(t));
    }
    for (std::int64_t i = 0; i < 61; ++i) seqs.push_back({token, 500 + i % 7, tables[static_cast<std::size_t>(i)]});
  }
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 20000;
  if (iterations < 1) {
    std::fprintf(stderr, "mpi_rank_sync_bench: iterations = %s must be a positive integer\n", argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  rungs::mpi::rank_sync sync;
  std::array<std::int64_t, 9> key{};
  const double max_each = median_us(iterations, [&] {
    key.fill(sync.rank());
    sync.max_each(key);
  });
  std::array<std::int64_t, 18> raw{};
  const double allreduce = median_us(iterations, [&] {
    raw.fill(sync.rank());
    MPI_Allreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(raw.size()), MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  });
  decode_batch batch;
  runner alone(buckets(rungs::ladder{rungs::CaptureSizes::vllm(512)}), eng::host_backend([](const eng::host_step&) {}),
               {.max_model_len = 1024, .shape = eng::run_shape::of(model, 61 * 64)});
  alone.start();
  const double step_alone = median_us(iterations, [&] { alone.step(batch.seqs); });
  runner ranked(buckets(rungs::ladder{rungs::CaptureSizes::vllm(512)}), eng::host_backend([](const eng::host_step&) {}),
                {.max_model_len = 1024, .shape = eng::run_shape::of(model, 61 * 64)});
  ranked.sync_with(sync);
  ranked.start();  // 67 startup captures, each agreed (3 values)
  const double step_ranked = median_us(iterations, [&] { ranked.step(batch.seqs); });
  if (sync.rank() == 0) {
    std::printf("ranks %d, %d iterations (median of one call, rank 0)\n", sync.size(), iterations);
    std::printf("  max_each (9 values, Iallreduce + polling)  %8.2f us\n", max_each);
    std::printf("  MPI_Allreduce (18 int64, blocking)         %8.2f us\n", allreduce);
    std::printf("  step, no agreement                         %8.2f us\n", step_alone);
    std::printf("  step, batch key agreed over %d ranks        %8.2f us\n", sync.size(), step_ranked);
  }
  MPI_Finalize();
  return 0;
}
