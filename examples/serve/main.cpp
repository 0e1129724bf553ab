// rungs' serving demo (the README's first command): chat sessions served with continuous
// batching through rungs' public API. docs/demo.md explains the output line by line and how
// each piece maps to an engine of one's own.
//
//   serve_demo                      the defaults: 16 chats of 6 turns on the host backend
//   serve_demo --ladder vllm --capture-timing lazy      vLLM's capture sizes, chunked prefill
//   serve_demo --json run.json --plot run.png
//
// Exit status: 0 served (and verified), 1 a failure while serving or a verification mismatch,
// 2 a bad flag (one line on stderr naming it).
#include <rungs/engine/observer.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "compose.hpp"
#include "options.hpp"
#include "report.hpp"
#include "run.hpp"

namespace demo {
namespace {

/// A Python with matplotlib: python3 on PATH, else Debian's (python3-matplotlib installs there,
/// and a PATH python from pyenv or a venv does not see it). Empty when there is none.
std::string python_with_matplotlib() {
  for (const char* python : {"python3", "/usr/bin/python3"})
    if (std::system((std::string(python) + " -c 'import matplotlib' >/dev/null 2>&1").c_str()) == 0) return python;
  return {};
}

int serve(const demo_options& o) {
  backend_kind backend = o.backend;
#ifdef RUNGS_DEMO_CUDA
  if (backend == backend_kind::automatic) backend = cuda_device_present() ? backend_kind::cuda : backend_kind::host;
  if (backend == backend_kind::cuda && !cuda_device_present())
    throw usage_error("--backend cuda: no CUDA device is visible");
#else
  if (backend == backend_kind::cuda)
    throw usage_error("--backend cuda: this build has no CUDA backend (build with the cuda or gpu preset, where nvcc is found)");
  backend = backend_kind::host;
#endif
  const std::string python = o.plot.empty() ? std::string() : python_with_matplotlib();
  if (!o.plot.empty() && python.empty())
    throw usage_error("--plot needs python3 with matplotlib (Debian: apt-get install python3-matplotlib)");
#ifdef RUNGS_DEMO_CUDA
  const backend_info info = backend == backend_kind::host ? host_backend_info(o.seed) : cuda_backend_info(o.seed, o.layers ? o.layers->layers : 0);
#else
  const backend_info info = host_backend_info(o.seed);
#endif
  const run_setup s = resolve(o, backend, info);

  std::ostream& log = std::cout;
  const bool terminal = rungs::engine::log_observer::is_terminal(stdout);
  print_setup(log, s, info);
  const serve_result result =
#ifdef RUNGS_DEMO_CUDA
      backend == backend_kind::cuda ? serve_cuda(s, log, terminal) :
#endif
                                    serve_host(s, log, terminal);

  const report rep = make_report(result);
  print_report(log, result, rep,
               backend == backend_kind::host ? " (host backend: prepared steps share one workspace, no graph memory)" : "");
  bool ok = true;
  const std::int32_t n = o.verify.value_or(backend == backend_kind::host ? 2 : 0);
#ifdef RUNGS_DEMO_CUDA
  if (n > 0 && backend == backend_kind::cuda) ok = verify_cuda(s, result, n, log);
  else
#endif
  if (n > 0) ok = verify(s, result, n, log);

  std::string json_path = o.json;
  if (json_path.empty() && !o.plot.empty()) {
    char tmpl[] = "/tmp/serve_demo_XXXXXX";
    const int fd = ::mkstemp(tmpl);
    if (fd < 0) throw std::runtime_error("cannot create a temporary file for --plot");
    ::close(fd);
    json_path = tmpl;
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    if (!out) throw std::runtime_error("cannot write " + json_path);
    write_json(out, config_json(s, info), result, rep);
    if (!o.json.empty()) log << "  json         " << o.json << "\n";
  }
  if (!o.plot.empty()) {
    const std::string cmd = python + " '" RUNGS_DEMO_PLOT_SCRIPT "' '" + json_path + "' '" + o.plot + "'";
    const int rc = std::system(cmd.c_str());
    if (o.json.empty()) std::remove(json_path.c_str());
    if (rc != 0) throw std::runtime_error("the plot script failed: " + cmd);
    log << "  plot         " << o.plot << "\n";
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace demo

int main(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  demo::demo_options o;
  try {
    o = demo::parse_options(args);
    if (o.help) {
      demo::print_usage(std::cout, "serve_demo");
      return 0;
    }
    return demo::serve(o);
  } catch (const demo::usage_error& e) {
    std::cerr << "serve_demo: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "serve_demo: failed: " << e.what() << "\n";
    return 1;
  }
}
