// A consumer of the installed rungs package: host headers only.
#include <rungs/dispatch.hpp>
#include <rungs/version.hpp>

#include <cstdio>

// Some machines (this project's CI among them) link CUDA headers into /usr/local/include,
// so "reachable" is not the test; "never included by rungs" is.
#if defined(RUNGS_CONSUMER_EXPECT_NO_CUDA) && (defined(CUDART_VERSION) || defined(__CUDA_RUNTIME_H__))
#error "a rungs host header pulled in CUDA"
#endif

int main() {
  int head_dim = 128;
  int got = rungs::dispatch<64, 128>("head_dim", head_dim, []<int D>() { return D; });
  std::printf("rungs %s: dispatched head_dim %d\n", rungs::version_string, got);
  return got == 128 ? 0 : 1;
}
