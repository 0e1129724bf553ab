// rungs-plan: plan bucket ladders, KV-cache capacity and graph capture from the command line.
#include <iostream>
#include <string_view>
#include <vector>

#include "command.hpp"

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  return rungs::plan::run(args, std::cout, std::cerr);
}
