// rungs::nccl::rank_sync with one rank on GPU 0 (exits 77, skipped, without a GPU). Never run
// so far: no machine rungs is tested on has had a GPU for it.
#include <rungs/nccl/rank_sync.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {
int failures = 0;
void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}
}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("nccl_rank_sync_test: no GPU, skipped\n");
    return 77;
  }
  ncclComm_t comm = nullptr;
  const int dev = 0;
  if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess) {
    std::fprintf(stderr, "ncclCommInitAll failed\n");
    return 1;
  }
  cudaStream_t stream = nullptr;
  RUNGS_CUDA_CHECK(cudaStreamCreate(&stream));
  {
    rungs::nccl::rank_sync sync(comm, stream, std::chrono::milliseconds(10000));
    expect(sync.size() == 1 && sync.rank() == 0, "one rank, rank 0");
    std::vector<std::int64_t> v{3, -1, 7};
    sync.max_each(v);
    expect(v == std::vector<std::int64_t>{3, -1, 7} && sync.calls() == 1, "max_each over one rank keeps the values");
    std::vector<std::int64_t> many(rungs::nccl::rank_sync::capacity + 1);
    bool threw = false;
    try {
      sync.max_each(many);
    } catch (const std::invalid_argument&) {
      threw = true;
    }
    expect(threw && sync.calls() == 1, "17 values are refused before any communication");

    // enqueue_max inside a captured graph, replayed twice.
    std::int64_t* d = nullptr;
    RUNGS_CUDA_CHECK(cudaMalloc(&d, 4 * sizeof(std::int64_t)));
    const std::int64_t in[4] = {5, 0, -2, 9};
    RUNGS_CUDA_CHECK(cudaMemcpy(d, in, sizeof in, cudaMemcpyHostToDevice));
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    RUNGS_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    sync.enqueue_max(d, 4);
    RUNGS_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    RUNGS_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 2; ++i) RUNGS_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    RUNGS_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::int64_t out[4] = {};
    RUNGS_CUDA_CHECK(cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost));
    expect(out[0] == 5 && out[1] == 0 && out[2] == -2 && out[3] == 9, "a captured all-reduce replays");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaFree(d);
  }
  cudaStreamDestroy(stream);
  ncclCommDestroy(comm);
  std::printf("nccl_rank_sync_test: %d failure(s)\n", failures);
  return failures ? 1 : 0;
}
