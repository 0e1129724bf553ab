// Conan test_package: the packaged headers compile and work without CUDA.
#include <rungs/dispatch.hpp>
#include <rungs/version.hpp>

#include <cstdio>

int main() {
  int block = rungs::dispatch<8, 16, 32>("block_size", 16, []<int B>() { return B; });
  std::printf("rungs %s from Conan: block_size %d\n", rungs::version_string, block);
  return block == 16 ? 0 : 1;
}
