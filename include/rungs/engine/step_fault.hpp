// What the engine reports when a step fails on its device (docs/engine.md, "Device faults").
// The engine takes a failed step back (engine::step): the scheduler requeues the step's
// requests by recompute, so host state is that of a step that never ran. A backend that
// answers recover() with true (its device can go on: the error was not sticky) makes it a
// failed step, retried by the next; otherwise the fault is fatal and engine_fault is thrown.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <rungs/serving/scheduler.hpp>

namespace rungs::engine {

/// A step that failed on the device.
struct step_fault {
  std::int64_t step = 0;                          ///< the failed step's index (steps committed before it)
  std::vector<serving::request_id> requests{};    ///< its requests: requeued, to be recomputed
  std::string error{};                            ///< what the backend threw
  bool fatal = false;                             ///< the device cannot go on (a sticky fault)
};

/// "engine: step 12 failed on the device (<error>); fatal: the device cannot continue;
/// requests in flight, requeued: 3 5 7".
inline std::string describe(const step_fault& f) {
  // Appended piece by piece: g++ 12 warns falsely (-Wrestrict) on a literal + temporary string.
  std::string s = "engine: step ";
  s += std::to_string(f.step);
  s += " failed on the device (";
  s += f.error;
  s += "); ";
  s += f.fatal ? "fatal: the device cannot continue" : "retried";
  s += "; requests in flight, requeued:";
  for (serving::request_id id : f.requests) {
    s += ' ';
    s += std::to_string(id);
  }
  return s;
}

/// Thrown by engine::step for a fatal device fault, and by every later step().
class engine_fault : public std::runtime_error {
 public:
  explicit engine_fault(step_fault f) : std::runtime_error(describe(f)), fault_(std::move(f)) {}
  const step_fault& fault() const noexcept { return fault_; }

 private:
  step_fault fault_;
};

}  // namespace rungs::engine
