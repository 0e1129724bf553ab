// serve_demo_dp: the serving demo on data-parallel ranks, one process each:
//
//   mpirun -np 2 serve_demo_dp [serve_demo's flags]
//
// Built only when rungs::mpi is found (Open MPI, MPICH). Each rank has its own scheduler, KV
// pool and engine on the host backend. Conversations are split round-robin in trace order
// (the k-th conversation or standalone request to rank k mod N: planning::route_round_robin,
// the split of rungs-plan simulate --dp). Every step every rank runs the bucket agreed through
// rungs::mpi::rank_sync (the largest batch of any rank; a rank with nothing to run runs a
// dummy batch of it, all padding), and the loop agrees when to step, idle and stop through the
// same rank_sync (rungs::serving::driver, run_setup::ranks). A rank that exits or stalls stops
// the others within rank_sync's timeout.
//
// Serving time is the virtual clock's (--clock wall is refused): the ranks' wall clocks
// differ, and what reads time (arrivals, idle captures) must be the same on every rank.
//
// Rank 0 prints the configuration, its own status lines, then one line per rank and the
// total, from what every rank sends it: a JSON document (nlohmann/json) of its figures and
// turns. The total's token digest is over every request in trace order, so it equals
// serve_demo's on the same flags: padding to other ranks' buckets and dummy batches change
// no token. --verify N recomputes the first N chats of every rank with the plain loop.
//
// Exit status as serve_demo's: 0 served and verified, 1 a failure or a mismatch on any rank,
// 2 a bad flag.
#include <rungs/mpi/rank_sync.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "json_line.hpp"
#include "options.hpp"
#include "report.hpp"
#include "run.hpp"

namespace demo {
namespace {

using rungs::cli::json;

// Every rank's text, on rank 0 (empty elsewhere).
std::vector<std::string> gather(const std::string& mine, int rank, int ranks) {
  const int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(ranks)), offsets(static_cast<std::size_t>(ranks));
  MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (rank == 0) {
    for (int r = 1; r < ranks; ++r) offsets[static_cast<std::size_t>(r)] = offsets[static_cast<std::size_t>(r - 1)] + counts[static_cast<std::size_t>(r - 1)];
    all.resize(static_cast<std::size_t>(offsets.back() + counts.back()));
  }
  MPI_Gatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> out;
  if (rank == 0)
    for (int r = 0; r < ranks; ++r)
      out.push_back(all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                               static_cast<std::size_t>(counts[static_cast<std::size_t>(r)])));
  return out;
}

// What a rank sends rank 0: its figures for the report line, its plain-loop check, and what the
// total's report reads of each turn (by its index in the whole run) and of each token gap.
json rank_json(const serve_result& result, const rank_share& mine, bool ok, const std::string& checked) {
  const report rep = make_report(result);
  const eng::engine_stats& e = result.engine;
  json turns = json::array();
  for (std::size_t k = 0; k < result.requests.size(); ++k) {
    const request_record& t = result.requests[k];
    turns.push_back({{"index", mine.global[k]}, {"conversation", t.conversation}, {"turn", t.turn},
                     {"new_prompt_tokens", t.new_prompt_tokens}, {"prompt_tokens", t.prompt_tokens},
                     {"submitted", t.submitted}, {"first_token", t.first_token}, {"output", t.output}});
  }
  return {{"requests", result.requests.size()}, {"steps", e.steps}, {"dummy_steps", result.dummy_steps},
          {"replays", e.replays}, {"eager_steps", e.eager_steps()}, {"real_tokens", e.real_tokens},
          {"padded_tokens", e.padded_tokens}, {"preemptions", result.scheduler.preemptions}, {"verified", ok},
          {"ttft_p99", rep.ttft.p99}, {"itl_p99", rep.itl.p99}, {"serving_seconds", result.end_seconds},
          {"idle_seconds", result.idle_seconds}, {"checked", checked}, {"itl_samples", result.itl_samples},
          {"turns", std::move(turns)}};
}

struct discard : std::streambuf {
  int overflow(int c) override { return c; }
};

int serve(const demo_options& o, int rank, int ranks) {
  if (o.backend == backend_kind::cuda) throw usage_error("--backend cuda: serve_demo_dp serves on the host backend");
  if (!o.plot.empty() || !o.json.empty()) throw usage_error("--json and --plot: serve_demo_dp prints its report only");
  const backend_info info = host_backend_info(o.seed);
  const run_setup all = resolve(o, backend_kind::host, info);
  discard nothing;
  std::ostream quiet(&nothing);
  std::ostream& log = rank == 0 ? std::cout : quiet;
  print_setup(log, all, info);

  rank_share mine = share_of(all, rank, ranks);
  log << "Data parallel: " << ranks << " ranks (MPI), each with its own scheduler, KV pool (" << all.kv.num_blocks
      << " blocks) and graphs; conversations split round-robin in trace order; every step every rank runs the bucket "
         "agreed through rungs::mpi::rank_sync (a rank with nothing to run: a dummy batch of it)\n";

  rungs::mpi::rank_sync sync;
  mine.setup.ranks = sync;
  const serve_result result = serve_host(mine.setup, log, false);
  std::ostringstream checked;
  const std::int32_t n = o.verify.value_or(2);
  const bool ok = n <= 0 || verify(mine.setup, result, n, checked);

  std::vector<std::string> from = gather(rank_json(result, mine, ok, checked.str()).dump(), rank, ranks);
  int failed = ok ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank != 0) return failed ? 1 : 0;

  serve_result total;
  total.requests.resize(all.requests.size());
  log << "\nReport, per rank and in total (serving time is every rank's: they step together)\n"
      << "  rank  requests  steps  dummy  replays  eager  padded tokens  preemptions  TTFT p99   ITL p99\n";
  static constexpr const char* summed[] = {"requests", "steps", "dummy_steps", "replays", "eager_steps",
                                           "real_tokens", "padded_tokens", "preemptions"};
  std::int64_t sums[8] = {};
  std::string verified;
  for (int r = 0; r < ranks; ++r) {
    const json in = json::parse(from[static_cast<std::size_t>(r)]);
    std::int64_t v[8];
    for (int k = 0; k < 8; ++k) sums[k] += v[k] = in.at(summed[k]).get<std::int64_t>();
    total.end_seconds = in.at("serving_seconds").get<double>();
    total.idle_seconds = in.at("idle_seconds").get<double>();
    std::istringstream lines(in.at("checked").get<std::string>());
    for (std::string line; std::getline(lines, line);)
      verified += "  rank " + std::to_string(r) + ": " + line.substr(line.find_first_not_of(' ')) + "\n";
    const std::int64_t tokens = v[5] + v[6];
    log << std::right << std::setw(6) << r << std::setw(10) << v[0] << std::setw(7) << v[1] << std::setw(7) << v[2]
        << std::setw(9) << v[3] << std::setw(7) << v[4] << std::setw(8) << v[6] << std::setw(7)
        << percent(tokens ? static_cast<double>(v[6]) / static_cast<double>(tokens) : 0.0) << std::setw(13) << v[7]
        << std::setw(10) << ms(in.at("ttft_p99").get<double>()) << std::setw(10) << ms(in.at("itl_p99").get<double>())
        << "\n";
    for (const double gap : in.at("itl_samples")) total.itl_samples.push_back(gap);
    for (const json& turn : in.at("turns")) {
      const auto i = turn.at("index").get<std::size_t>();
      request_record& t = total.requests.at(i);
      t.trace_index = i;
      t.conversation = turn.at("conversation").get<serving::session_id>();
      t.turn = turn.at("turn").get<std::int32_t>();
      t.new_prompt_tokens = turn.at("new_prompt_tokens").get<std::int32_t>();
      t.prompt_tokens = turn.at("prompt_tokens").get<std::int32_t>();
      t.submitted = turn.at("submitted").get<double>();
      t.first_token = turn.at("first_token").get<double>();
      t.output = turn.at("output").get<std::vector<token_id>>();
      t.output_tokens = static_cast<std::int32_t>(t.output.size());
    }
  }
  const report sum = make_report(total);
  const std::int64_t tokens = sums[5] + sums[6];
  log << std::setw(6) << "total" << std::setw(10) << sums[0] << std::setw(7) << sums[1] << std::setw(7) << sums[2]
      << std::setw(9) << sums[3] << std::setw(7) << sums[4] << std::setw(8) << sums[6] << std::setw(7)
      << percent(tokens ? static_cast<double>(sums[6]) / static_cast<double>(tokens) : 0.0) << std::setw(13) << sums[7]
      << std::setw(10) << ms(sum.ttft.p99) << std::setw(10) << ms(sum.itl.p99) << "\n";
  log << "  steps are rank-steps (each rank runs every step); dummy: steps a rank ran on padding only; padded tokens: "
         "rows of replayed buckets that were padding\n";
  log << "  served       " << sum.requests << " requests, " << sum.output_tokens << " output tokens in "
      << std::fixed << std::setprecision(2) << total.end_seconds << " s of serving time (" << total.idle_seconds
      << " s idle)\n";
  log << "  tokens out   digest " << std::hex << std::setw(16) << std::setfill('0') << sum.digest << std::dec
      << std::setfill(' ') << " (every request in trace order: serve_demo's on the same flags)\n";
  log << verified;
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace demo

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  int status = 0;
  try {
    demo::demo_options o = demo::parse_options(args);
    if (o.help) {
      if (rank == 0) {
        std::cout << "serve_demo_dp: serve_demo on data-parallel ranks, one process each (docs/demo.md, \"Data-parallel\n"
                     "ranks under mpirun\"): mpirun -np N serve_demo_dp [OPTIONS]. The options are serve_demo's, but\n"
                     "serving time is always the virtual clock (--clock wall is refused), and --backend cuda, --json\n"
                     "and --plot are refused.\n\n";
        demo::print_usage(std::cout, "serve_demo_dp");
      }
    } else {
      // Every decision that reads serving time (arrivals, idle captures) must be the same on
      // every rank, and the ranks' wall clocks differ: the virtual clock, always.
      const bool clock_given =
          std::any_of(args.begin(), args.end(), [](std::string_view a) { return a.starts_with("--clock"); });
      if (o.clock == demo::clock_kind::wall && clock_given)
        throw demo::usage_error(
            "--clock wall: serve_demo_dp runs on the virtual clock (every rank must see the same serving time)");
      o.clock = demo::clock_kind::virtual_time;
      status = demo::serve(o, rank, ranks);
    }
  } catch (const demo::usage_error& e) {  // the same on every rank: the flags are
    if (rank == 0) std::cerr << "serve_demo_dp: error: " << e.what() << "\n";
    status = 2;
  } catch (const std::exception& e) {
    // A failure on one rank: the others are, or will be, waiting in an agreement; end them all.
    std::cerr << "serve_demo_dp: rank " << rank << " failed: " << e.what() << "\n";
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
