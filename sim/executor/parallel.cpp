// Blocks in parallel (schedule::threads; docs/sim.md, "Blocks in parallel").
//
// A block's schedule comes from the launch's seed and the block's index alone (run_cta), so a
// block that does not communicate with the others does the same whichever thread runs it, and
// whatever runs beside it. Blocks of one launch communicate only through global memory, so a
// launch runs its blocks on several workers (each an executor of its own: warps, shared memory,
// shadow) and watches which block wrote each 4-byte word (the footprint) and which ranges each
// block read (a log per worker):
//  - a block writing a word another block wrote is a conflict: its worker stops before the write,
//    the others at their next scheduling round; a block reading a word another block wrote is one
//    too, found at the read where the page is at hand, else from the logs when the workers are
//    done. Then every global write of the launch is undone (each worker logs the old bytes before
//    it writes), and the blocks run again one at a time in the seed's order, which gives the
//    results and the findings (the missing-fence check among them) that a launch always gives;
//  - a finding in a worker is handled the same way, so the finding reported is the one of that
//    order, the same on any number of threads.
// Whether blocks conflict does not depend on how the workers interleave: until the first access
// that touches another block's written word, every block runs as it would alone, and the two
// accesses conflict whichever of the two blocks gets there first. (A read that races with another
// block's write reads whatever it reads, through a relaxed atomic load (load_global): the launch
// is undone anyway, and every global access stays checked against the live allocations, so
// nothing it does reaches memory outside them.) Words only read by several blocks (a kernel's
// inputs) are no conflict. Kernels whose code lets blocks communicate otherwise (global atomics,
// strong global accesses, fences of gpu or sys scope, clock reads) never run in parallel.
#include "machine.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <system_error>
#include <thread>

namespace rungs::sim::detail {

std::uint32_t* footprint::page(std::uint64_t page) {
  const std::lock_guard<std::mutex> hold(lock_);
  std::uint32_t& slot = index_[page];
  if (slot == 0) {
    std::unique_ptr<std::uint32_t[], release> cells(static_cast<std::uint32_t*>(std::calloc(kPageWords, sizeof(std::uint32_t))));
    if (cells == nullptr) throw std::bad_alloc();
    pages_.push_back(std::move(cells));
    slot = static_cast<std::uint32_t>(pages_.size());
  }
  return pages_[slot - 1].get();
}

const std::uint32_t* footprint::find(std::uint64_t page) const {
  const std::uint32_t* slot = index_.find(page);
  return slot == nullptr ? nullptr : pages_[*slot - 1].get();
}

bool executor::blocks_may_run_in_parallel() const {
  for (const instr& in : f_.code) {
    switch (in.code) {
      case op::atom:
      case op::red:
        if (in.where != space::shared) return false;
        break;
      case op::ld:
      case op::st:
        if (in.order != mem_order::weak && in.where != space::shared && in.where != space::local && in.where != space::param) {
          return false;
        }
        break;
      case op::fence:
        if (in.publishes) return false;
        break;
      case op::clock: return false;  // the launch's progress, which depends on every block
      default: break;
    }
  }
  return true;
}

// A written word's cell, out of line (executor::parallel_write has the common case inline): the
// page looked up (created at its first use), then the cell's change by compare-and-swap.
void executor::claim(std::uint64_t word) {
  const auto mine = static_cast<std::uint32_t>(cta_index_ + 1) | footprint::kWritten;
  const std::uint64_t page = word >> footprint::kPageBits;
  if (page != fp_page_) {
    std::uint32_t*& cells = fp_pages_[page];
    if (cells == nullptr) cells = par_->words.page(page);
    fp_page_ = page;
    fp_cells_ = cells;
  }
  std::atomic_ref<std::uint32_t> cell(fp_cells_[word & (footprint::kPageWords - 1)]);
  std::uint32_t now = 0;
  if (!cell.compare_exchange_strong(now, mine, std::memory_order_relaxed) && now != mine) {
    throw parallel_abort{};  // another block wrote it
  }
}

bool executor::reads_conflict(const parallel_launch& p, const std::vector<std::unique_ptr<executor>>& workers) {
  for (const auto& w : workers) {
    std::uint64_t page = ~std::uint64_t{0};
    const std::uint32_t* cells = nullptr;
    for (const read_run& r : w->read_runs_) {
      for (std::uint64_t word = r.lo / 4, last = (r.lo + r.size - 1) / 4; word <= last; ++word) {
        if ((word >> footprint::kPageBits) != page) {
          page = word >> footprint::kPageBits;
          cells = p.words.find(page);
        }
        if (cells == nullptr) {  // no block wrote this page: on to the next one
          word |= footprint::kPageWords - 1;
          continue;
        }
        const std::uint32_t cell = cells[word & (footprint::kPageWords - 1)];
        if ((cell & footprint::kWritten) != 0 && (cell & footprint::kBlock) != r.block) return true;
      }
    }
  }
  return false;
}

void executor::save_old(std::uint64_t addr, std::size_t size) {
  const auto* p = reinterpret_cast<const unsigned char*>(static_cast<std::uintptr_t>(addr));
  if (!undo_.empty() && undo_.back().addr + undo_.back().size == addr) {
    undo_.back().size += size;  // a warp's neighbouring lanes: one run
  } else {
    undo_.push_back({addr, undo_bytes_.size(), size});
  }
  undo_bytes_.insert(undo_bytes_.end(), p, p + size);
}

// Every word a worker wrote belongs to blocks it ran alone (a second block touching it stopped
// the launch before its access), so undoing each worker's log backwards restores every byte.
void executor::roll_back() const {
  for (auto r = undo_.rbegin(); r != undo_.rend(); ++r) {
    std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(r->addr)), undo_bytes_.data() + r->at, r->size);
  }
}

void executor::run_blocks(parallel_launch& p) {
  par_ = &p;
  fence_check_ = false;
  for (;;) {
    if (p.stop.load(std::memory_order_relaxed)) return;
    const std::size_t i = p.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= p.order.size()) return;
    run_block(p.order[i]);
  }
}

bool executor::run_parallel(const std::vector<std::uint64_t>& order, unsigned threads) {
  parallel_launch p{order};
  std::vector<std::unique_ptr<executor>> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.push_back(std::make_unique<executor>(m_, f_, grid_, block_, dynamic_shared_, params_, memory_, sched_));
  }
  std::vector<std::exception_ptr> stopped(threads);
  const auto work = [&](unsigned t) {
    try {
      workers[t]->run_blocks(p);
    } catch (...) {  // a conflict, a finding or anything else: the blocks run one at a time
      stopped[t] = std::current_exception();
      p.stop.store(true, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> pool;
  try {
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, t);
  } catch (const std::system_error&) {  // no thread to be had: the ones started finish alone
  }
  work(0);
  for (std::thread& t : pool) t.join();
  const bool stop = std::any_of(stopped.begin(), stopped.end(), [](const std::exception_ptr& e) { return e != nullptr; });
  if (stop || reads_conflict(p, workers)) {
    for (const auto& w : workers) w->roll_back();
    return false;
  }
  for (const auto& w : workers) {
    const launch_result& r = w->result_;
    result_.warp_instructions += r.warp_instructions;
    result_.global.bytes_read += r.global.bytes_read;
    result_.global.bytes_written += r.global.bytes_written;
    result_.global.sector_reads_total += r.global.sector_reads_total;
    result_.global.async_bytes_read += r.global.async_bytes_read;
    sectors_read_.merge(w->sectors_read_);
    sectors_written_.merge(w->sectors_written_);
    async_sectors_.merge(w->async_sectors_);
    printed_.insert(printed_.end(), std::make_move_iterator(w->printed_.begin()), std::make_move_iterator(w->printed_.end()));
  }
  result_.threads = 1 + static_cast<unsigned>(pool.size());
  return true;
}

}  // namespace rungs::sim::detail
