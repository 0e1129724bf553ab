// A consumer of the installed rungs::mpi component: one rank (a singleton MPI job, no mpirun)
// agrees with itself.
#include <rungs/mpi/rank_sync.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  // example-begin mpi-rank-sync
  MPI_Init(&argc, &argv);
  rungs::mpi::rank_sync sync;  // MPI_COMM_WORLD, default_timeout (60 s) per agreement
  // runner.sync_with(sync) on every rank, before start(); here the one operation alone:
  std::vector<std::int64_t> v{3, -1, 7};
  sync.max_each(v);  // each value replaced by its maximum over the ranks
  // example-end mpi-rank-sync
  const bool ok = sync.size() == 1 && v == std::vector<std::int64_t>{3, -1, 7} && sync.calls() == 1;
  std::printf("rungs::mpi: %d rank(s), max_each %s\n", sync.size(), ok ? "ok" : "wrong");
  MPI_Finalize();
  return ok ? 0 : 1;
}
