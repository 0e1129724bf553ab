// One rank fails mid-run; the others must stop with a clear error instead of hanging.
//   mpi_rank_failure MODE      (under mpirun; run_failure.cmake checks the outcome)
// Every rank agrees on [rank + 1, step] for six steps through rungs::mpi::rank_sync (2 s
// timeout). At its 4th agreement the last rank: finalize (MPI_Finalize, exit 0: a clean exit
// the others learn of only by their deadline), stall (sleeps for an hour), crash (exits 3
// without MPI_Finalize: mpirun ends the job), or none (takes part to the end).
#include <rungs/mpi/rank_sync.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "finalize" && mode != "stall" && mode != "crash" && mode != "none") {
    std::fprintf(stderr, "mpi_rank_failure: MODE '%s' is not finalize, stall, crash or none\n", mode.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  rungs::mpi::rank_sync sync(MPI_COMM_WORLD, std::chrono::milliseconds(2000));
  const bool victim = sync.rank() == sync.size() - 1;
  std::array<std::int64_t, 2> v{};
  for (std::int64_t step = 1; step <= 6; ++step) {
    if (victim && step == 4) {
      if (mode == "finalize") {
        std::printf("rank %d finalizes\n", sync.rank());
        std::fflush(stdout);
        MPI_Finalize();
        return 0;
      }
      if (mode == "stall") std::this_thread::sleep_for(std::chrono::hours(1));
      if (mode == "crash") {
        std::printf("rank %d crashes\n", sync.rank());
        std::fflush(stdout);
        std::_Exit(3);
      }
    }
    v = {sync.rank() + 1, step};
    sync.max_each(v);
  }
  if (sync.rank() == 0) std::printf("rank 0: %lld agreements, last [%lld, %lld]\n", static_cast<long long>(sync.calls()),
                                    static_cast<long long>(v[0]), static_cast<long long>(v[1]));
  MPI_Finalize();
  return 0;
}
