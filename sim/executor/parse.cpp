// PTX text -> the executor's internal form (ptx.hpp). Handles what nvcc 13 emits for rungs'
// kernels (see tests/sim/COVERAGE.md) and refuses anything else with the module name,
// line and text: a construct it cannot parse never becomes a silent no-op.
#include "ptx.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cstring>
#include <mutex>
#include <optional>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace rungs::sim {
namespace {

using namespace detail;

struct statement {
  std::string text;
  std::uint32_t line = 0;
  // load_ptx's scan does not split function bodies: the "{" after a function header carries the
  // body's bytes in the module's text, its '{' to its '}' (body_end 0: not such a statement).
  std::size_t body_begin = 0, body_end = 0;
};

// std::isspace in the C locale, inline: the statement splitter reads every byte of a module.
constexpr bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

std::string_view trim_view(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string trim(std::string_view s) { return std::string(trim_view(s)); }

// Whether executing `in` over a whole warp (unguarded, every lane running) writes every lane of
// register `slot` as a destination: then the register's first bits in a CTA (garbage, or zeros)
// could never be read, and the executor does not write them (function::kTouchDefines). Only
// opcodes whose handlers write their destination in every lane of the mask, and only when the
// instruction names the slot once (not also as a source).
bool writes_every_lane(op code) {
  switch (code) {
    case op::mov: case op::add: case op::sub: case op::mul: case op::mad: case op::fma: case op::min: case op::max:
    case op::neg: case op::abs: case op::and_: case op::or_: case op::xor_: case op::not_: case op::shl: case op::shr:
    case op::selp: case op::setp: case op::cvt: case op::ex2: case op::rcp: case op::rsqrt: case op::sqrt: case op::sin:
    case op::cos: case op::ld: return true;
    default: return false;
  }
}

// Whether `slot` is one of the destinations (operand 0: a register, or the registers of a
// vector) of `in`, whose handler writes every lane that executes it.
bool is_destination(const instr& in, std::uint32_t slot) {
  if (in.ops.empty()) return false;
  const operand& d = in.ops[0];
  if (d.kind == operand::k_reg) return d.reg == slot;
  if (d.kind != operand::k_vec || (in.code != op::mov && in.code != op::ld && in.code != op::setp && in.code != op::shfl)) {
    return false;
  }
  return std::any_of(d.elems.begin(), d.elems.end(), [&](const operand& e) { return e.kind == operand::k_reg && e.reg == slot; });
}

bool defines_whole(const instr& in, std::uint32_t slot) {
  return in.guard < 0 && writes_every_lane(in.code) && is_destination(in, slot);
}

// Whether every thread that executes `in` writes register `slot` there (a definition that ends
// the register's earlier value's life): an unguarded instruction whose handler writes its
// destination in every lane it runs, or shfl.sync (each lane writes its destination when the
// lanes its member mask names have arrived; a lane waiting for them runs nothing else).
bool kills(const instr& in, std::uint32_t slot) {
  return in.guard < 0 && (writes_every_lane(in.code) || in.code == op::shfl) && is_destination(in, slot);
}

// Registers `fixed` and up (dense numbers below `n`) share slots where their lives do not
// overlap; the first `fixed` (special registers, set at a CTA's start) keep theirs. nvcc's PTX
// names a fresh virtual register for nearly every value (2,240 in a decode kernel), so a warp's
// register file (32 lanes x 8 bytes a register) was 570 KB, and a loop touching hundreds of them
// missed the caches at every operand; registers whose lives do not overlap now share a slot.
// A register's life is the range of instruction indices [lo, hi] over which it is named or live
// (liveness over the basic blocks, a block's whole range where the register is live in or out of
// it: conservative). Lives that do not overlap never hold a value at the same time in any lane:
// a register read before any write on some path is live from the entry, so it shares with no
// register before its last read, and its first bits are garbage (or zeros) as before.
// Returns the slot count; `to` maps each dense number to its slot.
// Where basic blocks begin (size: instructions + 1): the entry, each branch target, and the
// instruction after a branch, ret, exit or trap. share_slots' liveness and the touch lists (what
// an instruction names first in its block) use the same blocks.
std::vector<bool> block_leaders(const std::vector<instr>& code) {
  std::vector<bool> leader(code.size() + 1, false);
  leader[0] = true;
  for (std::size_t i = 0; i < code.size(); ++i) {
    const op c = code[i].code;
    if (c == op::bra) leader[code[i].target] = true;
    if (c == op::bra || c == op::ret || c == op::exit || c == op::trap) leader[i + 1] = true;
  }
  return leader;
}

std::uint32_t share_slots(const function& f, std::uint32_t n, std::uint32_t fixed, std::vector<std::uint32_t>& to) {
  const std::size_t count = f.code.size();
  to.resize(n);
  for (std::uint32_t r = 0; r < n; ++r) to[r] = r;
  if (n <= fixed || count == 0) return n;
  // Basic blocks and their successors.
  std::vector<std::uint32_t> block_of(count), starts;
  {
    const std::vector<bool> leader = block_leaders(f.code);
    for (std::size_t i = 0; i < count; ++i) {
      if (leader[i]) starts.push_back(static_cast<std::uint32_t>(i));
      block_of[i] = static_cast<std::uint32_t>(starts.size() - 1);
    }
  }
  const std::size_t blocks = starts.size();
  const auto block_end = [&](std::size_t b) { return b + 1 < blocks ? starts[b + 1] : static_cast<std::uint32_t>(count); };
  std::vector<std::vector<std::uint32_t>> succ(blocks);
  for (std::size_t b = 0; b < blocks; ++b) {
    const instr& last = f.code[block_end(b) - 1];
    const bool guarded = last.guard >= 0;
    if (last.code == op::bra) succ[b].push_back(block_of[last.target]);
    const bool ends = last.code == op::bra || last.code == op::ret || last.code == op::exit;
    if ((!ends || guarded) && b + 1 < blocks) succ[b].push_back(static_cast<std::uint32_t>(b + 1));
  }
  // Per instruction, the registers it names; per register, the range of its namings.
  const std::size_t words = (n + 63) / 64;
  std::vector<std::uint32_t> lo(n, ~0u), hi(n, 0);
  std::vector<std::vector<std::uint32_t>> names(count);
  for (std::size_t i = 0; i < count; ++i) {
    const instr& in = f.code[i];
    if (in.guard >= 0) names[i].push_back(static_cast<std::uint32_t>(in.guard));
    const auto named = [&](auto& self, const operand& o) -> void {
      if (o.kind == operand::k_reg || (o.kind == operand::k_addr && o.has_base)) names[i].push_back(o.reg);
      for (const operand& e : o.elems) self(self, e);
    };
    for (const operand& o : in.ops) named(named, o);
    for (const std::uint32_t r : names[i]) {
      lo[r] = std::min(lo[r], static_cast<std::uint32_t>(i));
      hi[r] = std::max(hi[r], static_cast<std::uint32_t>(i));
    }
  }
  // gen (read before any write in the block) and kill (written in it), then live in and out.
  using bits = std::vector<std::uint64_t>;
  std::vector<bits> gen(blocks, bits(words)), kill(blocks, bits(words)), in(blocks, bits(words)), out(blocks, bits(words));
  const auto set_bit = [](bits& b, std::uint32_t r) { b[r / 64] |= std::uint64_t{1} << (r % 64); };
  const auto clear_bit = [](bits& b, std::uint32_t r) { b[r / 64] &= ~(std::uint64_t{1} << (r % 64)); };
  for (std::size_t b = 0; b < blocks; ++b) {
    for (std::uint32_t i = block_end(b); i-- > starts[b];) {
      const instr& ins = f.code[i];
      std::vector<std::uint32_t> uses;
      for (const std::uint32_t r : names[i]) {
        const bool def = kills(ins, r) && std::count(names[i].begin(), names[i].end(), r) == 1;
        if (def) {
          clear_bit(gen[b], r);
          set_bit(kill[b], r);
        } else {
          uses.push_back(r);
        }
      }
      for (const std::uint32_t r : uses) set_bit(gen[b], r);
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t b = blocks; b-- > 0;) {
      for (std::size_t k = 0; k < words; ++k) {
        std::uint64_t o = 0;
        for (const std::uint32_t s : succ[b]) o |= in[s][k];
        const std::uint64_t x = gen[b][k] | (o & ~kill[b][k]);
        out[b][k] = o;
        if (x != in[b][k]) {
          in[b][k] = x;
          changed = true;
        }
      }
    }
  }
  for (std::size_t b = 0; b < blocks; ++b) {
    for (std::size_t k = 0; k < words; ++k) {
      for (std::uint64_t m = in[b][k] | out[b][k]; m != 0; m &= m - 1) {
        const auto r = static_cast<std::uint32_t>(k * 64 + static_cast<unsigned>(std::countr_zero(m)));
        lo[r] = std::min(lo[r], starts[b]);
        hi[r] = std::max(hi[r], block_end(b) - 1);
      }
    }
  }
  // Linear scan: registers in the order their lives begin, each given a slot whose last
  // register's life has ended (the most recently freed: registers used together stay together).
  std::vector<std::uint32_t> order;
  for (std::uint32_t r = fixed; r < n; ++r) {
    if (lo[r] != ~0u) order.push_back(r);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return lo[a] < lo[b]; });
  using ending = std::pair<std::uint32_t, std::uint32_t>;  // (hi, slot)
  std::priority_queue<ending, std::vector<ending>, std::greater<>> active;
  std::vector<std::uint32_t> free;
  std::uint32_t slots = fixed;
  for (const std::uint32_t r : order) {
    while (!active.empty() && active.top().first < lo[r]) {
      free.push_back(active.top().second);
      active.pop();
    }
    std::uint32_t slot = 0;
    if (free.empty()) {
      slot = slots++;
    } else {
      slot = free.back();
      free.pop_back();
    }
    to[r] = slot;
    active.emplace(hi[r], slot);
  }
  for (std::uint32_t r = fixed; r < n; ++r) {
    if (lo[r] == ~0u) to[r] = slots++;  // named nowhere (not reached: renumbering drops them)
  }
  return slots;
}

std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    std::size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// Splits at commas that are not inside {} [] ().
std::vector<std::string> split_commas(std::string_view s) {
  std::vector<std::string> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '{' || c == '[' || c == '(') ++depth;
    if (c == '}' || c == ']' || c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  const std::string last = trim(s.substr(start));
  if (!last.empty() || !out.empty()) out.push_back(last);
  return out;
}

bool is_ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%' || c == '.';
}

std::size_t type_bytes(vtype t) {
  switch (t) {
    case vtype::b8: case vtype::u8: case vtype::s8: return 1;
    case vtype::b16: case vtype::u16: case vtype::s16: case vtype::f16: case vtype::bf16: case vtype::e4m3x2:
    case vtype::e5m2x2: return 2;
    case vtype::b32: case vtype::u32: case vtype::s32: case vtype::f32: case vtype::f16x2: case vtype::bf16x2:
    case vtype::tf32: return 4;
    case vtype::b64: case vtype::u64: case vtype::s64: case vtype::f64: return 8;
    case vtype::pred: return 1;
    case vtype::none: return 0;
  }
  return 0;
}

bool parse_type(std::string_view w, vtype& t) {
  static const std::unordered_map<std::string_view, vtype> types{
      {"pred", vtype::pred}, {"b8", vtype::b8},   {"b16", vtype::b16},     {"b32", vtype::b32},
      {"b64", vtype::b64},   {"u8", vtype::u8},   {"u16", vtype::u16},     {"u32", vtype::u32},
      {"u64", vtype::u64},   {"s8", vtype::s8},   {"s16", vtype::s16},     {"s32", vtype::s32},
      {"s64", vtype::s64},   {"f16", vtype::f16}, {"f16x2", vtype::f16x2}, {"bf16", vtype::bf16},
      {"bf16x2", vtype::bf16x2}, {"f32", vtype::f32}, {"f64", vtype::f64},
      {"e4m3x2", vtype::e4m3x2}, {"e5m2x2", vtype::e5m2x2}, {"tf32", vtype::tf32}};
  const auto it = types.find(w);
  if (it == types.end()) return false;
  t = it->second;
  return true;
}

// Limits that keep a malformed module from asking for absurd memory (far above what nvcc emits
// for rungs' kernels, and above the hardware's: 228 KiB of shared memory per block).
constexpr unsigned long kMaxRegisters = 1ul << 20;
constexpr std::size_t kMaxSharedBytes = 228 * 1024;
constexpr std::size_t kMaxLocalBytes = 512 * 1024;

struct symbol {
  space where = space::none;
  std::uint64_t value = 0;
  bool dynamic_shared = false;  // extern .shared: its value is the kernel's static shared size
};

}  // namespace

namespace detail {
// A function body as load_ptx's scan found it, parsed at the function's first use with the
// module scope as it stood at the function's position.
struct pending_body {
  statement head;                      // the function header
  std::size_t begin = 0, end = 0;      // the body's bytes in the text, '{' to '}'
  std::uint32_t brace_line = 0;        // the line of its '{'
  std::size_t module_shared = 0;       // module-scope .shared bytes declared before it
  std::size_t symbols = 0;             // module-scope symbols declared before it
  std::size_t dynamic_align = 16;      // the extern .shared alignment declared before it
  bool parsed = false;
};

// What parsing a body at its first use needs (module::source): a test process loads a module
// of hundreds of kernels (27 MB of PTX for rungs' attention instances) and launches a few.
struct module_source {
  std::string text;
  struct module_symbol {
    symbol sym;
    std::size_t ordinal = 0;  // declaration order: a function sees those declared before it
  };
  std::unordered_map<std::string, module_symbol> symbols;
  std::vector<pending_body> bodies;  // by module::functions index
  std::mutex mutex;                  // bodies are parsed under it (launches may come from several threads)
};
}  // namespace detail

namespace {

class parser {
 public:
  parser(module& m, module_source& src) : mod_(m), src_(src) {}

  // Module-scope statements, and each function's header and where its body lies.
  void scan() {
    std::vector<statement> stmts;
    split_statements(src_.text, 1, false, stmts);
    std::size_t i = 0;
    while (i < stmts.size()) i = module_statement(stmts, i);
    for (std::size_t f = 0; f < mod_.functions.size(); ++f) {
      if (mod_.functions[f].is_entry) mod_.by_name.emplace(mod_.functions[f].name, f);
    }
  }

  // Parses function `index`'s body (once): a construct it cannot parse refuses that function
  // only, naming kernel, PTX line and construct (refusal(), launch()).
  void parse_body(std::size_t index) {
    pending_body& b = src_.bodies[index];
    if (b.parsed) return;
    b.parsed = true;
    module_shared_ = b.module_shared;
    symbols_visible_ = b.symbols;
    dynamic_align_ = b.dynamic_align;
    std::vector<statement> st{b.head};
    split_statements(std::string_view(src_.text).substr(b.begin, b.end - b.begin), b.brace_line, true, st);
    function& f = mod_.functions[index];
    try {
      function_body(st, 0, f);
    } catch (const sim_error& e) {
      refuse(b.head, e.what(), f);
    } catch (const std::logic_error& e) {  // std::stoul on a malformed number
      refuse(b.head, "PTX module '" + mod_.name + "': malformed number (" + e.what() + ")", f);
    }
  }

 private:
  [[noreturn]] void fail(std::uint32_t line, std::string_view what, std::string_view text) const {
    std::ostringstream os;
    os << "PTX module '" << mod_.name << "' line " << line << ": " << what << ": `" << text << "`";
    throw sim_error(os.str());
  }

  // Statements: text up to ';', and the scope markers "{" and "}" as their own statements.
  // A '{' that starts a statement opens a scope; inside a statement it is a vector/initializer.
  // `s` begins on line `line`. Without `bodies` (load_ptx's scan) a function's body is not
  // split into statements: its "{" carries the body's bytes (statement::body_begin, body_end),
  // and the text inside is only followed, exactly as when split, to find where the body ends.
  void split_statements(std::string_view s, std::uint32_t line, bool bodies, std::vector<statement>& out) {
    std::string cur;
    bool content = false;  // cur holds more than whitespace
    std::uint32_t cur_line = 0;
    int inner = 0;          // braces inside the current statement
    int skipped = 0;        // scope depth inside a function body the scan does not split
    std::size_t open = 0;   // that body's "{" in out
    std::string last_text;  // the last statement inside it (the message of an unclosed body)
    std::uint32_t last_line = 0;
    auto push = [&](std::string_view t, std::uint32_t at) {
      if (skipped == 0) {
        out.push_back({std::string(t), at});
      } else {
        last_text.assign(t);
        last_line = at;
      }
      cur.clear();
      content = false;
    };
    auto open_scope = [&](std::uint32_t at, std::size_t i, bool function_body) {
      if (skipped > 0) {
        ++skipped;
      } else if (function_body && !bodies) {
        out.push_back({"{", at, i, 0});
        open = out.size() - 1;
        skipped = 1;
      }
      push("{", at);
    };
    auto close_scope = [&](std::uint32_t at, std::size_t i) {
      if (skipped > 0 && --skipped == 0) {
        out[open].body_end = i + 1;
        last_text.clear();
        cur.clear();
        content = false;
        return;
      }
      push("}", at);
    };
    for (std::size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
        while (i + 1 < s.size() && s[i + 1] != '\n') ++i;
        continue;
      }
      if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
        i += 2;
        while (i + 1 < s.size() && !(s[i] == '*' && s[i + 1] == '/')) {
          if (s[i] == '\n') ++line;
          ++i;
        }
        ++i;
        cur += ' ';
        continue;
      }
      if (c == '\n') {
        // .version, .target, .address_size, .file and .loc end at the end of their line.
        if (content && inner == 0) {
          const std::string_view t = trim_view(cur);
          for (const std::string_view d : {".version", ".target", ".address_size", ".file", ".loc"}) {
            if (t.starts_with(d) && (t.size() == d.size() || is_space(t[d.size()]))) {
              push(t, cur_line);
              break;
            }
          }
        }
        ++line;
      }
      const bool space_char = is_space(c);
      if (!content && !space_char) {
        cur.clear();
        cur_line = line;
      }
      if (c == '"') {
        cur += c;
        for (++i; i < s.size() && s[i] != '"'; ++i) cur += s[i];
        cur += '"';
        content = true;
        continue;
      }
      // "name:" at a statement start is a label; "::" is part of a modifier (.L2::evict_last).
      if (inner == 0 && c == ':' && (i + 1 >= s.size() || s[i + 1] != ':')) {
        const std::string_view t = trim_view(cur);
        if (!t.empty() && std::all_of(t.begin(), t.end(), [](char x) { return is_ident_char(x) && x != '%'; })) {
          push(std::string(t) + ":", cur_line);
          continue;
        }
      }
      if (inner == 0 && c == '{') {
        const std::string_view t = content ? trim_view(cur) : std::string_view();
        // A scope opens at a statement start and after a function header (.entry/.func ...).
        if (t.starts_with(".section")) {  // debug data (-lineinfo): raw lines up to its '}'
          push(t, cur_line);
          open_scope(line, i, false);
          for (++i; i < s.size() && s[i] != '}'; ++i) {
            if (s[i] == '\n') ++line;
          }
          close_scope(line, i);
          continue;
        }
        if (t.empty()) {
          open_scope(line, i, false);
          continue;
        }
        if (is_function_header(t)) {
          push(t, cur_line);
          open_scope(line, i, true);
          continue;
        }
      }
      if (inner == 0 && c == '}' && !content) {
        close_scope(line, i);
        continue;
      }
      if (c == '{') ++inner;
      if (c == '}') --inner;
      if (c == ';' && inner == 0) {
        if (content) push(trim_view(cur), cur_line);
        else cur.clear();
        continue;
      }
      cur += c;
      if (!space_char) content = true;
    }
    if (content) fail(cur_line, "statement without ';'", trim(cur));
    if (skipped > 0) fail(last_line, "unbalanced braces", last_text);
  }

  static bool is_function_header(std::string_view t) {
    const auto w = split_words(t.substr(0, t.find('(')));
    return std::find(w.begin(), w.end(), ".entry") != w.end() || std::find(w.begin(), w.end(), ".func") != w.end();
  }

  std::size_t skip_block(const std::vector<statement>& st, std::size_t i) const {
    int depth = 0;
    for (; i < st.size(); ++i) {
      if (st[i].text == "{") ++depth;
      if (st[i].text == "}" && --depth == 0) return i + 1;
    }
    fail(st.back().line, "unbalanced braces", st.back().text);
  }

  std::size_t module_statement(const std::vector<statement>& st, std::size_t i) {
    const statement& s = st[i];
    const auto words = split_words(s.text);
    const std::string& w0 = words.front();
    if (w0 == ".file") {
      file(s);
      return i + 1;
    }
    if (w0 == ".version" || w0 == ".target" || w0 == ".address_size") return i + 1;
    if (w0 == ".section") return skip_block(st, i + 1);  // debug sections: nothing executable
    if (is_function_header(s.text)) {
      if (i + 1 >= st.size() || st[i + 1].text != "{") return i + 1;  // a prototype (.extern .func ...;)
      // Parsing is per function, at its first use (parse_body): a construct the executor cannot
      // parse refuses only the function that has it, when it is launched (refusal(), launch()).
      const statement& open = st[i + 1];
      function f;
      f.line = s.line;
      function_name(s.text, f);
      mod_.functions.push_back(std::move(f));
      src_.bodies.push_back({s, open.body_begin, open.body_end, open.line, module_shared_, src_.symbols.size(),
                             dynamic_align_});
      return i + 2;
    }
    if (s.text == "{" || s.text == "}") fail(s.line, "unexpected brace at module scope", s.text);
    variable(s, nullptr, nullptr);
    return i + 1;
  }

  // .global / .shared / .const / .local declarations. Module-scope .shared variables share
  // the shared window with the kernel's own; .global/.const ones are recorded so that code
  // naming them fails clearly at run time (rungs' kernels declare but never use them).
  // Declared at module scope when `f` is null (into src_.symbols), else into `fsyms`.
  void variable(const statement& s, std::unordered_map<std::string, symbol>* fsyms, function* f) {
    std::string body = s.text;
    const auto eq = body.find('=');
    if (eq != std::string::npos) body = body.substr(0, eq);
    auto words = split_words(body);
    space where = space::none;
    bool is_extern = false;
    std::size_t align = 0;
    vtype t = vtype::none;
    std::string name;
    for (std::size_t k = 0; k < words.size(); ++k) {
      const std::string& w = words[k];
      if (w == ".global") where = space::global;
      else if (w == ".shared") where = space::shared;
      else if (w == ".const") where = space::global;
      else if (w == ".local" || (w == ".param" && f)) where = space::local;
      else if (w == ".extern") is_extern = true;
      else if (w == ".visible" || w == ".weak" || w == ".common") {
      } else if (w == ".align" && k + 1 < words.size()) align = std::stoul(words[++k]);
      else if (w.size() > 1 && w[0] == '.' && parse_type(std::string_view(w).substr(1), t)) {
      } else if (!w.empty() && w[0] != '.') name = w;
      else fail(s.line, "unsupported declaration", s.text);
    }
    if (where == space::none || name.empty() || t == vtype::none) fail(s.line, "unsupported declaration", s.text);
    std::size_t count = 1;
    bool unsized = false;
    if (const auto lb = name.find('['); lb != std::string::npos) {
      const auto rb = name.find(']', lb);
      if (rb == std::string::npos) fail(s.line, "bad array declarator", s.text);
      const std::string n = name.substr(lb + 1, rb - lb - 1);
      if (n.empty()) unsized = true;
      else count = std::stoull(n);
      name = name.substr(0, lb);
    }
    if (count > (where == space::shared ? kMaxSharedBytes : where == space::local ? kMaxLocalBytes : 1ull << 30)) {
      fail(s.line, "variable too large", s.text);
    }
    const std::size_t bytes = type_bytes(t) * count;
    if (align == 0) align = type_bytes(t);
    symbol sym{where, 0, false};
    if (where == space::shared) {
      if (is_extern) {
        if (!unsized) fail(s.line, "extern .shared must be an unsized array", s.text);
        sym.dynamic_shared = true;
        dynamic_align_ = std::max(dynamic_align_, align);
      } else {
        std::size_t& top = f ? f->static_shared : module_shared_;
        top = (top + align - 1) / align * align;
        sym.value = top;
        top += bytes;
      }
    } else if (where == space::local) {
      if (!f) fail(s.line, ".local at module scope is not supported", s.text);
      f->local_bytes = (f->local_bytes + align - 1) / align * align;
      sym.value = f->local_bytes;
      f->local_bytes += bytes;
    } else {
      module::variable v;
      v.name = name;
      v.size = std::max<std::size_t>(bytes, 1);
      v.data = std::make_unique<unsigned char[]>(v.size);
      if (eq != std::string::npos) initializer(s, s.text.substr(eq + 1), t, v);
      sym.where = space::global;
      sym.value = reinterpret_cast<std::uintptr_t>(v.data.get());
      mod_.variables.push_back(std::move(v));
    }
    if (fsyms) {
      (*fsyms)[name] = sym;
    } else {
      const std::size_t ordinal = src_.symbols.size();
      src_.symbols.insert_or_assign(name, module_source::module_symbol{sym, ordinal});
    }
  }

  // "= {1, 2, ...}" or "= 5": integer elements of the variable's type, little-endian.
  void initializer(const statement& s, const std::string& text, vtype t, module::variable& v) {
    std::string body = trim(text);
    if (!body.empty() && body.front() == '{') {
      if (body.back() != '}') fail(s.line, "bad initializer", s.text);
      body = body.substr(1, body.size() - 2);
    }
    const std::size_t esize = type_bytes(t);
    std::size_t at = 0;
    for (const std::string& e : split_commas(body)) {
      std::uint64_t value = 0;
      if (!parse_immediate(e, t, value)) fail(s.line, "unsupported initializer element '" + e + "'", s.text);
      if (at + esize > v.size) fail(s.line, "initializer longer than the variable", s.text);
      std::memcpy(v.data.get() + at, &value, esize);
      at += esize;
    }
  }

  // ".visible .entry NAME(" or ".func (.param .b32 ret) NAME(...)": kind and name.
  static void function_name(const std::string& h, function& f) {
    const auto lp = h.find('(');
    const std::string before = h.substr(0, lp == std::string::npos ? h.size() : lp);
    const auto words = split_words(before);
    f.is_entry = std::find(words.begin(), words.end(), ".entry") != words.end();
    f.name = words.empty() ? std::string("(unnamed)") : words.back();
    if (!f.is_entry && lp != std::string::npos) {  // .func: the name follows the return list
      const auto close = h.find(')', lp);
      const auto next = close == std::string::npos ? close : h.find('(', close);
      if (next != std::string::npos) {
        const auto w2 = split_words(h.substr(close + 1, next - close - 1));
        if (!w2.empty()) f.name = w2.back();
      }
    }
  }

  // A function whose body holds a construct the executor cannot parse: kept, with its
  // parameters where they parse, so that launching it fails naming kernel, line and construct.
  void refuse(const statement& head, const std::string& why, function& f) {
    f = function{};
    f.line = head.line;
    function_name(head.text, f);
    try {
      std::unordered_map<std::string, symbol> fsyms;
      parameters(head, f, fsyms);
    } catch (const std::exception&) {
      f.params.clear();
      f.param_bytes = 0;
    }
    f.refused = "kernel " + f.name + " cannot run: " + why;
    instr end;
    end.code = op::exit;
    end.line = head.line;
    end.text = "(refused)";
    f.code.push_back(end);
    cur_ = nullptr;
  }

  std::size_t function_body(const std::vector<statement>& st, std::size_t i, function& f) {
    const statement& head = st[i];
    f = function{};
    f.line = head.line;
    const std::string& h = head.text;
    function_name(h, f);
    std::unordered_map<std::string, symbol> fsyms;
    parameters(head, f, fsyms);
    f.static_shared = module_shared_;
    return function_statements(st, i, f, fsyms);
  }

  // An entry's parameter list: each parameter's size, alignment and offset in the buffer.
  void parameters(const statement& head, function& f, std::unordered_map<std::string, symbol>& fsyms) {
    const std::string& h = head.text;
    const auto lp = h.find('(');
    const auto rp = h.rfind(')');
    if (f.is_entry && lp != std::string::npos && rp != std::string::npos && rp > lp) {
      for (const std::string& p : split_commas(h.substr(lp + 1, rp - lp - 1))) {
        if (p.empty()) continue;
        const auto words = split_words(p);
        vtype t = vtype::none;
        std::size_t align = 0;
        std::string name;
        for (std::size_t k = 0; k < words.size(); ++k) {
          const std::string& w = words[k];
          if (w == ".param" || w == ".ptr" || w == ".global" || w == ".shared" || w == ".const" || w == ".local") {
          } else if (w == ".align" && k + 1 < words.size()) align = std::stoul(words[++k]);
          else if (w[0] == '.' && parse_type(std::string_view(w).substr(1), t)) {
          } else if (w[0] != '.') name = w;
          else fail(head.line, "unsupported parameter", p);
        }
        std::size_t count = 1;
        if (const auto lb = name.find('['); lb != std::string::npos) {
          count = std::stoull(name.substr(lb + 1, name.find(']') - lb - 1));
          name = name.substr(0, lb);
        }
        if (t == vtype::none || name.empty()) fail(head.line, "unsupported parameter", p);
        param_decl d;
        d.name = name;
        d.info.size = type_bytes(t) * count;
        d.info.align = align ? align : type_bytes(t);
        f.param_bytes = (f.param_bytes + d.info.align - 1) / d.info.align * d.info.align;
        d.offset = f.param_bytes;
        f.param_bytes += d.info.size;
        fsyms[name] = {space::param, d.offset, false};
        f.params.push_back(d);
      }
    }
  }

  std::size_t function_statements(const std::vector<statement>& st, std::size_t i, function& f,
                                  std::unordered_map<std::string, symbol>& fsyms) {
    const statement& head = st[i];
    const std::string& h = head.text;
    scopes_.clear();
    scopes_.emplace_back();
    labels_.clear();
    pending_branches_.clear();
    dynamic_refs_.clear();
    specials_.clear();
    slots_ = 0;
    loc_file_ = loc_line_ = call_file_ = call_line_ = 0;
    fsyms_ = &fsyms;
    cur_ = &f;
    std::size_t k = i + 2;  // past the header and "{"
    int depth = 1;
    for (; k < st.size() && depth > 0; ++k) {
      const statement& s = st[k];
      if (s.text == "{") {
        ++depth;
        scopes_.emplace_back();
        continue;
      }
      if (s.text == "}") {
        --depth;
        scopes_.pop_back();
        continue;
      }
      body_statement(s);
    }
    if (depth != 0) fail(head.line, "function body not closed", h);
    for (const auto& [index, label] : pending_branches_) {
      const auto it = labels_.find(label);
      if (it == labels_.end()) fail(f.code[index].line, "unknown label '" + label + "'", f.code[index].text);
      f.code[index].target = it->second;
    }
    f.dynamic_shared_offset = (f.static_shared + dynamic_align_ - 1) / dynamic_align_ * dynamic_align_;
    for (const auto& [index, operand_index] : dynamic_refs_) {
      operand& o = f.code[index].ops[operand_index];
      o.imm += f.dynamic_shared_offset;
    }
    // An entry without a terminating ret still ends: falling off the end is an exit.
    instr end;
    end.code = op::exit;
    end.line = f.code.empty() ? head.line : f.code.back().line;
    end.text = "(end of function)";
    f.code.push_back(end);
    f.specials.assign(specials_.begin(), specials_.end());
    f.slots = number_slots_by_first_use(f);
    f.forms = decode_forms(f.code);
    cur_ = nullptr;
    return k;
  }

  // Registers renumbered in the order the code first names them (special registers first),
  // dropping declared ones it never names, then registers whose lives do not overlap given one
  // slot (share_slots): a warp's register file is slot-major (32 lanes of a register together),
  // so registers used together lie together and the file stays small, which the executor's speed
  // depends on (nvcc declares thousands of virtual registers per kernel). Returns the count.
  std::uint32_t number_slots_by_first_use(function& f) const {
    constexpr std::uint32_t kUnset = ~0u;
    std::vector<std::uint32_t> to(slots_, kUnset);
    std::uint32_t next = 0;
    // Every slot of the function (special registers first, then in the code's order) through `fn`.
    const auto each_slot = [&f](auto&& fn) {
      for (auto& sp : f.specials) fn(sp.second);
      const auto visit = [&](auto& self, operand& o) -> void {
        if (o.kind == operand::k_reg || (o.kind == operand::k_addr && o.has_base)) fn(o.reg);
        for (operand& e : o.elems) self(self, e);
      };
      for (instr& in : f.code) {
        if (in.guard >= 0) {
          auto g = static_cast<std::uint32_t>(in.guard);
          fn(g);
          in.guard = static_cast<std::int32_t>(g);
        }
        for (operand& o : in.ops) visit(visit, o);
      }
    };
    each_slot([&](std::uint32_t& slot) {
      if (to[slot] == kUnset) to[slot] = next++;
      slot = to[slot];
    });
    // Registers whose lives do not overlap share a slot (share_slots).
    std::vector<std::uint32_t> shared;
    next = share_slots(f, next, static_cast<std::uint32_t>(f.specials.size()), shared);
    each_slot([&](std::uint32_t& slot) { slot = shared[slot]; });
    // What each instruction names first in its basic block (the executor gives a register its
    // bits at the first instruction of the CTA naming it, and every lane that reaches an
    // instruction inside a block has run the block's earlier ones; block_leaders).
    const std::vector<bool> leader = block_leaders(f.code);
    std::vector<std::uint32_t> seen(next, 0);  // per slot: the block (numbered from 1) that named it
    std::uint32_t block = 0;
    f.touch_at.assign(1, 0);
    f.touch.clear();
    for (std::size_t i = 0; i < f.code.size(); ++i) {
      if (leader[i]) ++block;
      const instr& in = f.code[i];
      // Every slot the instruction names, as often as it names it.
      std::vector<std::uint32_t> names;
      if (in.guard >= 0) names.push_back(static_cast<std::uint32_t>(in.guard));
      const auto named = [&](auto& self, const operand& o) -> void {
        if (o.kind == operand::k_reg || (o.kind == operand::k_addr && o.has_base)) names.push_back(o.reg);
        for (const operand& e : o.elems) self(self, e);
      };
      for (const operand& o : in.ops) named(named, o);
      for (const std::uint32_t slot : names) {
        if (seen[slot] == block) continue;
        seen[slot] = block;
        const bool def = defines_whole(in, slot) && std::count(names.begin(), names.end(), slot) == 1;
        f.touch.push_back(slot | (def ? function::kTouchDefines : 0u));
      }
      f.touch_at.push_back(static_cast<std::uint32_t>(f.touch.size()));
    }
    return next;
  }

  void body_statement(const statement& s) {
    const std::string& t = s.text;
    if (t.back() == ':') {
      labels_[t.substr(0, t.size() - 1)] = static_cast<std::uint32_t>(cur_->code.size());
      return;
    }
    const auto words = split_words(t);
    const std::string& w0 = words.front();
    if (w0 == ".reg") return registers(s, words);
    if (w0.starts_with(".reg.")) {  // ".reg.b32 f;" (no space: cuda_fp16.hpp's inline asm writes it so)
      std::vector<std::string> split{".reg", w0.substr(4)};
      split.insert(split.end(), words.begin() + 1, words.end());
      return registers(s, split);
    }
    if (w0 == ".pragma" || w0 == ".maxntid" || w0 == ".reqntid" || w0 == ".minnctapersm" || w0 == ".maxnreg") return;
    if (w0 == ".file") return file(s);
    if (w0 == ".loc") {  // ".loc file line column[, ...]": the source line of what follows
      if (words.size() < 3) fail(s.line, "bad .loc", t);
      std::uint64_t f = 0, l = 0;
      if (!parse_integer(words[1], f) || !parse_integer(words[2], l)) fail(s.line, "bad .loc", t);
      loc_file_ = static_cast<std::uint32_t>(f);
      loc_line_ = static_cast<std::uint32_t>(l);
      call_file_ = call_line_ = 0;
      if (const auto at = t.find("inlined_at"); at != std::string::npos) {
        const auto w = split_words(t.substr(at + 10));
        if (w.size() >= 2 && parse_integer(w[0], f) && parse_integer(w[1], l)) {
          call_file_ = static_cast<std::uint32_t>(f);
          call_line_ = static_cast<std::uint32_t>(l);
        }
      }
      return;
    }
    // A call's .param declarations (the { // callseq } scopes nvcc opens around a call) are
    // per-thread bytes like .local ones: st.param/ld.param on them become local accesses.
    if (w0 == ".shared" || w0 == ".local" || w0 == ".global" || w0 == ".const" || w0 == ".extern" || w0 == ".param") {
      return variable(s, fsyms_, cur_);
    }
    if (w0[0] == '.') fail(s.line, "unsupported directive", t);
    instruction(s);
  }

  void file(const statement& s) {  // .file index "path"[, timestamp, size]
    const auto q1 = s.text.find('"'), q2 = s.text.rfind('"');
    std::uint64_t index = 0;
    const auto words = split_words(s.text);
    if (words.size() < 3 || q1 == std::string::npos || q2 <= q1 || !parse_integer(words[1], index)) {
      fail(s.line, "bad .file", s.text);
    }
    mod_.files[static_cast<std::uint32_t>(index)] = s.text.substr(q1 + 1, q2 - q1 - 1);
  }

  void registers(const statement& s, const std::vector<std::string>& words) {
    // .reg .type name, name<N>, ...
    std::size_t k = 1;
    vtype t = vtype::none;
    while (k < words.size() && words[k][0] == '.') {
      if (!parse_type(std::string_view(words[k]).substr(1), t)) fail(s.line, "unsupported register type", s.text);
      ++k;
    }
    std::string rest;
    for (; k < words.size(); ++k) rest += words[k];
    for (const std::string& n : split_commas(rest)) {
      if (n.empty()) fail(s.line, "empty register name", s.text);
      if (const auto lt = n.find('<'); lt != std::string::npos) {
        const auto count = std::stoul(n.substr(lt + 1, n.find('>') - lt - 1));
        if (count > kMaxRegisters) fail(s.line, "more than " + std::to_string(kMaxRegisters) + " registers", s.text);
        const std::string base = n.substr(0, lt);
        for (unsigned long r = 0; r < count; ++r) scopes_.back()[base + std::to_string(r)] = slots_++;
      } else {
        scopes_.back()[n] = slots_++;
      }
    }
  }

  const std::uint32_t* find_register(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      const auto f = it->find(name);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  std::optional<std::uint32_t> special_register(const std::string& name) {
    static const std::unordered_map<std::string_view, special> specials{
        {"%tid.x", special::tid_x},       {"%tid.y", special::tid_y},       {"%tid.z", special::tid_z},
        {"%ntid.x", special::ntid_x},     {"%ntid.y", special::ntid_y},     {"%ntid.z", special::ntid_z},
        {"%ctaid.x", special::ctaid_x},   {"%ctaid.y", special::ctaid_y},   {"%ctaid.z", special::ctaid_z},
        {"%nctaid.x", special::nctaid_x}, {"%nctaid.y", special::nctaid_y}, {"%nctaid.z", special::nctaid_z},
        {"%laneid", special::laneid},     {"%warpid", special::warpid},     {"%nwarpid", special::nwarpid},
        {"%lanemask_eq", special::lanemask_eq}, {"%lanemask_le", special::lanemask_le},
        {"%lanemask_lt", special::lanemask_lt}, {"%lanemask_ge", special::lanemask_ge},
        {"%lanemask_gt", special::lanemask_gt}, {"%smid", special::smid}, {"%nsmid", special::nsmid},
        {"%gridid", special::gridid}, {"%dynamic_smem_size", special::dynamic_smem_size},
        {"%total_smem_size", special::total_smem_size},
        {"%reserved_smem_offset_begin", special::reserved_smem_begin},
        {"%reserved_smem_offset_end", special::reserved_smem_end},
        {"%reserved_smem_offset_cap", special::reserved_smem_cap},
        {"%reserved_smem_offset_0", special::reserved_smem_0}, {"%reserved_smem_offset_1", special::reserved_smem_1}};
    const auto it = specials.find(name);
    if (it == specials.end()) return std::nullopt;
    const auto have = specials_.find(it->second);
    if (have != specials_.end()) return have->second;
    const std::uint32_t slot = slots_++;
    specials_.emplace(it->second, slot);
    return slot;
  }

  static std::optional<clock_kind> clock_register(const std::string& name) {
    if (name == "%clock") return clock_kind::clock32;
    if (name == "%clock64") return clock_kind::clock64;
    if (name == "%globaltimer") return clock_kind::globaltimer;
    return std::nullopt;
  }

  const symbol* find_symbol(const std::string& name) const {
    if (const auto it = fsyms_->find(name); it != fsyms_->end()) return &it->second;
    // The module's, declared before the function (as a one-pass parse would see them).
    if (const auto it = src_.symbols.find(name); it != src_.symbols.end() && it->second.ordinal < symbols_visible_) {
      return &it->second.sym;
    }
    return nullptr;
  }

  static bool parse_integer(std::string_view s, std::uint64_t& out) {
    bool neg = false;
    if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
      neg = s[0] == '-';
      s.remove_prefix(1);
    }
    if (s.empty()) return false;
    int base = 10;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
      base = 16;
      s.remove_prefix(2);
    }
    if (!s.empty() && (s.back() == 'U' || s.back() == 'u')) s.remove_suffix(1);
    std::uint64_t v = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v, base);
    if (r.ec != std::errc{} || r.ptr != s.data() + s.size()) return false;
    out = neg ? ~v + 1 : v;
    return true;
  }

  // An immediate as the bits the instruction reads: 0fXXXXXXXX / 0dXXXXXXXXXXXXXXXX are float
  // bit patterns; decimal floats are converted to the instruction's float type.
  bool parse_immediate(const std::string& s, vtype t, std::uint64_t& out) {
    if (s.size() == 10 && s[0] == '0' && (s[1] == 'f' || s[1] == 'F')) {
      return std::from_chars(s.data() + 2, s.data() + 10, out, 16).ec == std::errc{};
    }
    if (s.size() == 18 && s[0] == '0' && (s[1] == 'd' || s[1] == 'D')) {
      return std::from_chars(s.data() + 2, s.data() + 18, out, 16).ec == std::errc{};
    }
    if (parse_integer(s, out)) {
      if (t == vtype::f32) out = std::bit_cast<std::uint32_t>(static_cast<float>(static_cast<std::int64_t>(out)));
      if (t == vtype::f64) out = std::bit_cast<std::uint64_t>(static_cast<double>(static_cast<std::int64_t>(out)));
      return true;
    }
    if (t == vtype::f32 || t == vtype::f64) {
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (end != s.c_str() + s.size()) return false;
      out = t == vtype::f32 ? std::bit_cast<std::uint32_t>(static_cast<float>(d)) : std::bit_cast<std::uint64_t>(d);
      return true;
    }
    return false;
  }

  operand parse_operand(const statement& s, std::string tok, vtype t, std::size_t instr_index, std::size_t op_index) {
    operand o;
    if (tok.empty()) fail(s.line, "empty operand", s.text);
    if (tok == "_") return o;  // sink
    if (tok[0] == '!') {
      o = parse_operand(s, tok.substr(1), t, instr_index, op_index);
      o.negate = true;
      return o;
    }
    if (tok[0] == '{') {
      if (tok.back() != '}') fail(s.line, "bad vector operand", s.text);
      o.kind = operand::k_vec;
      for (const std::string& e : split_commas(tok.substr(1, tok.size() - 2))) {
        o.elems.push_back(parse_operand(s, e, t, instr_index, op_index));
      }
      return o;
    }
    if (const auto bar = tok.find('|'); bar != std::string::npos) {  // d|p (setp, shfl)
      o.kind = operand::k_vec;
      o.elems.push_back(parse_operand(s, tok.substr(0, bar), t, instr_index, op_index));
      o.elems.push_back(parse_operand(s, tok.substr(bar + 1), vtype::pred, instr_index, op_index));
      return o;
    }
    if (tok[0] == '[') {
      if (tok.back() != ']') fail(s.line, "bad address operand", s.text);
      const std::string inner = trim(std::string_view(tok).substr(1, tok.size() - 2));
      o.kind = operand::k_addr;
      std::string base = inner;
      std::uint64_t offset = 0;
      if (const auto plus = inner.find('+'); plus != std::string::npos) {
        base = trim(std::string_view(inner).substr(0, plus));
        if (!parse_integer(trim(std::string_view(inner).substr(plus + 1)), offset)) {
          fail(s.line, "bad address offset", s.text);
        }
      }
      std::uint64_t absolute = 0;
      if (const std::uint32_t* r = find_register(base)) {
        o.has_base = true;
        o.reg = *r;
      } else if (const symbol* sym = find_symbol(base)) {
        if (sym->dynamic_shared) dynamic_refs_.emplace_back(instr_index, op_index);
        offset += sym->value;
      } else if (parse_integer(base, absolute)) {
        offset += absolute;
      } else {
        fail(s.line, "unknown name '" + base + "' in address", s.text);
      }
      o.imm = offset;
      return o;
    }
    if (const std::uint32_t* r = find_register(tok)) {
      o.kind = operand::k_reg;
      o.reg = *r;
      return o;
    }
    if (tok[0] == '%') {
      if (const auto slot = special_register(tok)) {
        o.kind = operand::k_reg;
        o.reg = *slot;
        return o;
      }
      fail(s.line, "unknown register '" + tok + "'", s.text);
    }
    if (tok == "WARP_SZ") {  // PTX's warp-size constant
      o.kind = operand::k_imm;
      o.imm = 32;
      return o;
    }
    if (const symbol* sym = find_symbol(tok)) {  // the address of a variable
      if (sym->dynamic_shared) dynamic_refs_.emplace_back(instr_index, op_index);
      o.kind = operand::k_imm;
      o.imm = sym->value;
      return o;
    }
    if (std::uint64_t v = 0; parse_immediate(tok, t, v)) {
      o.kind = operand::k_imm;
      o.imm = v;
      return o;
    }
    fail(s.line, "unknown operand '" + tok + "'", s.text);
  }

  void instruction(const statement& s) {
    std::string t = s.text;
    instr in;
    in.line = s.line;
    in.src_file = loc_file_;
    in.src_line = loc_line_;
    in.call_file = call_file_;
    in.call_line = call_line_;
    in.text = t;
    if (t[0] == '@') {  // guard
      std::size_t k = 1;
      if (t[k] == '!') {
        in.guard_negate = true;
        ++k;
      }
      std::size_t e = k;
      while (e < t.size() && !std::isspace(static_cast<unsigned char>(t[e]))) ++e;
      const std::string g = t.substr(k, e - k);
      const std::uint32_t* r = find_register(g);
      if (!r) fail(s.line, "unknown guard predicate '" + g + "'", t);
      in.guard = static_cast<std::int32_t>(*r);
      t = trim(std::string_view(t).substr(e));
    }
    std::size_t e = 0;
    while (e < t.size() && !std::isspace(static_cast<unsigned char>(t[e]))) ++e;
    const std::string opcode = t.substr(0, e);
    const std::string rest = trim(std::string_view(t).substr(e));
    if (opcode == "call" || opcode.starts_with("call.")) {
      call(s, opcode, rest, in);
      cur_->code.push_back(std::move(in));
      return;
    }
    decode(s, opcode, in);
    const std::size_t index = cur_->code.size();
    const auto toks = rest.empty() ? std::vector<std::string>{} : split_commas(rest);
    if (in.code == op::mov && toks.size() == 2 && clock_register(toks[1])) {
      // %clock, %clock64, %globaltimer change while the kernel runs: read when executed.
      in.code = op::clock;
      in.ops.push_back(parse_operand(s, toks[0], in.type, index, 0));
      operand kind;
      kind.kind = operand::k_imm;
      kind.imm = static_cast<std::uint64_t>(*clock_register(toks[1]));
      in.ops.push_back(kind);
    } else if (in.code == op::bra) {
      if (toks.size() != 1) fail(s.line, "bra takes one label", t);
      pending_branches_.emplace_back(index, toks[0]);
    } else {
      for (std::size_t k = 0; k < toks.size(); ++k) {
        // Operand types: cvt's source operand has the source type; setp/selp's predicate
        // operands and the shuffle's lane operands are integers.
        vtype ot = in.type;
        if (in.code == op::cvt && k >= 1) ot = in.type2;
        if (in.code == op::setp && k == 0) ot = vtype::pred;
        if (in.code == op::shfl && k >= 2) ot = vtype::b32;
        if ((in.code == op::shl || in.code == op::shr) && k == 2) ot = vtype::u32;
        if (in.code == op::bfi && k >= 3) ot = vtype::u32;
        if (in.code == op::mad && in.wide && k == 3) ot = vtype::u64;
        if ((in.code == op::vote || in.code == op::match || in.code == op::redux) && k == in.ops.size() &&
            k + 1 == toks.size()) {
          ot = vtype::b32;
        }
        if (in.code == op::vote && k == 1) ot = vtype::pred;
        if (in.code == op::bfe && k >= 2) ot = vtype::u32;
        if (in.code == op::bar_red && k >= 1) ot = k + 1 == toks.size() ? vtype::pred : vtype::u32;
        if ((in.code == op::clz || in.code == op::popc || in.code == op::bfind) && k == 0) ot = vtype::u32;
        in.ops.push_back(parse_operand(s, toks[k], ot, index, k));
      }
    }
    if ((in.code == op::ld || in.code == op::st) && in.where == space::param && toks.size() == 2) {
      // ld/st.param on a call's parameter (declared in the body): a local access.
      const std::string& a = toks[in.code == op::ld ? 1 : 0];
      const auto end = a.find_first_of("+]", 1);
      const symbol* sym = a.size() > 2 ? find_symbol(trim(std::string_view(a).substr(1, end - 1))) : nullptr;
      if (sym && sym->where == space::local) in.where = space::local;
    }
    check_shape(s, in);
    cur_->code.push_back(std::move(in));
  }

  // "call[.uni] (ret), callee, (arg, ...)" or "call[.uni] callee, (arg, ...)": the calls nvcc
  // emits for device printf (vprintf) and assert (__assertfail). Return slot and arguments are
  // the call's .param variables (local bytes, see body_statement). Any other callee loads and
  // fails when executed, naming itself (device functions must be inlined).
  void call(const statement& s, const std::string& opcode, const std::string& rest, instr& in) {
    in.code = op::call;
    in.text.clear();  // nvcc spreads a call over lines: one line in messages
    for (const char c : s.text) {
      const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
      if (space && (in.text.empty() || in.text.back() == ' ' || in.text.back() == '(')) continue;
      if (c == ')' && !in.text.empty() && in.text.back() == ' ') in.text.pop_back();
      in.text += space ? ' ' : c;
    }
    const auto toks = split_commas(rest);
    const auto param = [&](std::string name) {
      name = trim(name);
      const symbol* sym = find_symbol(name);
      if (!sym || sym->where != space::local) fail(s.line, "call argument '" + name + "' is not a .param of the call", s.text);
      operand o;
      o.kind = operand::k_addr;
      o.imm = sym->value;
      return o;
    };
    const auto list = [](const std::string& t) {
      return t.size() >= 2 && t.front() == '(' && t.back() == ')' ? split_commas(std::string_view(t).substr(1, t.size() - 2))
                                                                  : std::vector<std::string>{};
    };
    const auto opens = [](const std::string& t) { return !t.empty() && t.front() == '('; };
    std::size_t k = 0;
    operand ret;
    if (!toks.empty() && opens(toks[0])) {
      const auto r = list(toks[0]);
      if (r.size() != 1) fail(s.line, "a call returns one value", s.text);
      ret = param(r[0]);
      ++k;
    }
    if (k + 2 != toks.size() || !opens(toks[k + 1])) fail(s.line, "call: expected [(ret),] callee, (args)", s.text);
    in.ops.push_back(ret);
    for (const std::string& a : list(toks[k + 1])) in.ops.push_back(param(a));
    const std::string& name = toks[k];
    const auto unsupported = [&](const std::string& why) {
      in.code = op::unsupported;
      in.why = why;
      in.ops.clear();
    };
    if (opcode != "call" && opcode != "call.uni") return unsupported("form '" + opcode + "' (implemented: call, call.uni)");
    if (name == "vprintf" && in.ops.size() == 3) {
      in.fn = callee::vprintf;
    } else if (name == "__assertfail" && in.ops.size() == 6) {
      in.fn = callee::assertfail;
    } else {
      unsupported("a call of '" + name + "' (the executor runs calls of vprintf and __assertfail, which nvcc emits for "
                  "printf and assert; other device functions must be inlined)");
    }
  }

  // Operand counts and kinds per opcode, checked once here so execution need not.
  void check_shape(const statement& s, const instr& in) {
    if (in.code == op::unsupported) return;
    std::size_t want = 0;
    switch (in.code) {
      case op::ld: case op::st: case op::mov: case op::neg: case op::abs: case op::not_: case op::cvt:
      case op::cvta: case op::ex2: case op::rcp: case op::rsqrt: case op::sqrt: case op::sin: case op::cos:
      case op::lg2: case op::tanh:
      case op::ldmatrix: case op::clz: case op::popc: case op::brev: case op::bfind: case op::clock:
        want = 2; break;
      case op::atom: want = in.aop == atom_op::cas ? 4 : 3; break;
      case op::red: want = 2; break;
      case op::vote: case op::match: case op::redux: want = 3; break;
      case op::activemask: want = 1; break;
      case op::bfe: want = 4; break;
      case op::fence: want = 0; break;
      case op::mma: case op::wmma_mma: want = 4; break;
      case op::wmma_load: case op::wmma_store: want = in.ops.size() == 3 ? 3 : 2; break;  // stride optional
      case op::add: case op::sub: case op::mul: case op::div: case op::rem: case op::min: case op::max:
      case op::and_: case op::or_: case op::xor_: case op::shl: case op::shr: case op::setp: case op::bmsk:
      case op::copysign:
        want = 3; break;
      case op::mad: case op::fma: case op::selp: case op::prmt: want = 4; break;
      case op::bfi: case op::shfl: case op::lop3: want = 5; break;
      case op::cp_async: want = 4; break;
      case op::bar_sync: case op::bar_warp_sync: case op::cp_async_wait_group: case op::prefetch: case op::nanosleep:
        want = 1; break;
      case op::bar_red: want = 3; break;
      case op::bra: case op::ret: case op::exit: case op::cp_async_commit: case op::cp_async_wait_all:
      case op::call: case op::trap:
        return;
      case op::unsupported: return;
    }
    if (in.code == op::cp_async && in.ops.size() == 3) return;  // no src-size operand
    if (in.code == op::bar_sync && in.ops.size() == 2) return;   // with a thread count
    if (in.code == op::bar_red && in.ops.size() == 4) return;    // with a thread count
    if (in.code == op::cvt && (in.type == vtype::f16x2 || in.type == vtype::bf16x2) &&
        in.type2 != vtype::e4m3x2 && in.type2 != vtype::e5m2x2) {
      want = 3;
    }
    if (in.code == op::cvt && (in.type == vtype::e4m3x2 || in.type == vtype::e5m2x2)) want = 3;
    if (in.ops.size() != want) fail(s.line, "wrong operand count for " + std::to_string(want) + " operands", s.text);
    for (std::size_t k = 0; k < in.ops.size(); ++k) {
      const operand& o = in.ops[k];
      const bool mem = in.code == op::ld || in.code == op::st || in.code == op::cp_async || in.code == op::ldmatrix ||
                       in.code == op::atom || in.code == op::red || in.code == op::prefetch ||
                       in.code == op::wmma_load || in.code == op::wmma_store;
      if (o.kind == operand::k_addr && !mem) fail(s.line, "an address operand outside ld/st/cp.async/ldmatrix", s.text);
      const bool pair_dest = k == 0 && (in.code == op::setp || in.code == op::shfl || in.code == op::match);
      if (o.kind == operand::k_vec && !mem && in.code != op::mov && in.code != op::mma && in.code != op::wmma_mma &&
          !pair_dest) {
        fail(s.line, "a vector operand where the instruction takes a scalar", s.text);
      }
      const bool is_dest = k == 0 && in.code != op::st && in.code != op::bar_sync && in.code != op::bar_warp_sync &&
                           in.code != op::prefetch && in.code != op::nanosleep && in.code != op::wmma_store &&
                           in.code != op::cp_async && in.code != op::cp_async_wait_group && in.code != op::red;
      if (is_dest && o.kind != operand::k_reg && o.kind != operand::k_vec) fail(s.line, "destination must be a register", s.text);
      if (o.kind == operand::k_vec) {
        for (const operand& e : o.elems) {
          if (is_dest && e.kind != operand::k_reg && e.kind != operand::k_none) {
            fail(s.line, "vector destination elements must be registers", s.text);
          }
        }
      }
    }
    const bool mem = in.code == op::ld || in.code == op::st;
    if (mem && in.ops[in.code == op::ld ? 1 : 0].kind != operand::k_addr) fail(s.line, "ld/st need an address", s.text);
    if ((in.code == op::atom || in.code == op::red) && in.ops[in.code == op::atom ? 1 : 0].kind != operand::k_addr) {
      fail(s.line, std::string(in.code == op::atom ? "atom" : "red") + " needs an address", s.text);
    }
    if (in.code == op::cp_async && (in.ops[0].kind != operand::k_addr || in.ops[1].kind != operand::k_addr)) {
      fail(s.line, "cp.async needs two addresses", s.text);
    }
    if (mem && in.vec > 1) {
      const operand& v = in.ops[in.code == op::ld ? 0 : 1];
      if (v.kind != operand::k_vec || v.elems.size() != in.vec) fail(s.line, "vector width mismatch", s.text);
    }
    if (in.code == op::wmma_load || in.code == op::wmma_store || in.code == op::wmma_mma) {
      // Each fragment's registers as the ISA counts them (wmma_geometry), and an address.
      const auto need = [&](const operand& o, unsigned matrix, vtype t, const char* what) {
        const unsigned regs = wmma_geometry(in.shape, matrix, t).regs;
        if (o.kind != operand::k_vec || o.elems.size() != regs) {
          fail(s.line, std::string("wmma ") + what + " fragment needs " + std::to_string(regs) + " registers", s.text);
        }
      };
      if (in.code == op::wmma_mma) {
        need(in.ops[0], 2, in.type, "D");
        need(in.ops[1], 0, in.type2, "A");
        need(in.ops[2], 1, in.type2, "B");
        need(in.ops[3], 2, in.type3, "C");
      } else {
        const bool load = in.code == op::wmma_load;
        need(in.ops[load ? 0 : 1], in.vec, in.type, load ? "loaded" : "stored");
        if (in.ops[load ? 1 : 0].kind != operand::k_addr) fail(s.line, "wmma load/store needs an address", s.text);
      }
    }
    if (in.code == op::ldmatrix) {  // {d0..d(n-1)} (or d for .x1), [address]
      const operand& d = in.ops[0];
      const bool fits = d.kind == operand::k_reg ? in.vec == 1 : d.elems.size() == in.vec;
      if (!fits || in.ops[1].kind != operand::k_addr) {
        fail(s.line, "ldmatrix needs " + std::to_string(in.vec) + " destination registers and an address", s.text);
      }
    }
    if (in.code == op::mma) {  // {d0..d3}, {a0..a3}, {b0, b1}, {c0..c3} (k8: {a0, a1}, {b0})
      const std::size_t sizes[4] = {4, 2u * in.vec, in.vec, 4};
      for (std::size_t k = 0; k < 4; ++k) {
        const operand& o = in.ops[k];
        bool regs = o.kind == operand::k_vec && o.elems.size() == sizes[k];
        for (const operand& e : o.elems) regs = regs && e.kind == operand::k_reg;
        if (!regs) {
          fail(s.line, in.vec == 2 ? "mma.m16n8k16 takes register vectors of 4, 4, 2 and 4 elements"
                                   : "mma.m16n8k8 takes register vectors of 4, 2, 1 and 4 elements",
               s.text);
        }
      }
    }
  }

  // Opcode and modifiers. What is recognised here is executed; everything else becomes an
  // `unsupported` instruction that fails when (and only when) it is executed, naming itself.
  void decode(const statement& s, const std::string& opcode, instr& in) {
    std::vector<std::string> parts;
    {
      std::size_t start = 0;
      for (std::size_t k = 0; k <= opcode.size(); ++k) {
        if (k == opcode.size() || opcode[k] == '.') {
          parts.push_back(opcode.substr(start, k - start));
          start = k + 1;
        }
      }
    }
    const std::string& name = parts[0];
    auto unsupported = [&](std::string why) {
      in.code = op::unsupported;
      in.why = std::move(why);
    };
    static const std::unordered_map<std::string_view, op> names{
        {"ld", op::ld},     {"st", op::st},         {"mov", op::mov},     {"add", op::add},   {"sub", op::sub},
        {"mul", op::mul},   {"mad", op::mad},       {"fma", op::fma},     {"div", op::div},   {"rem", op::rem},
        {"min", op::min},   {"max", op::max},       {"neg", op::neg},     {"abs", op::abs},   {"and", op::and_},
        {"or", op::or_},    {"xor", op::xor_},      {"not", op::not_},    {"shl", op::shl},   {"shr", op::shr},
        {"bfi", op::bfi},   {"prmt", op::prmt}, {"setp", op::setp},     {"selp", op::selp},   {"cvt", op::cvt},   {"cvta", op::cvta},
        {"bra", op::bra},   {"ret", op::ret},       {"exit", op::exit},   {"shfl", op::shfl}, {"ex2", op::ex2},
        {"rcp", op::rcp},   {"rsqrt", op::rsqrt},   {"sqrt", op::sqrt},   {"sin", op::sin},   {"cos", op::cos},
        {"lg2", op::lg2},   {"tanh", op::tanh},     {"copysign", op::copysign},
        {"clz", op::clz},   {"popc", op::popc},     {"brev", op::brev},   {"bfind", op::bfind}, {"bfe", op::bfe},
        {"lop3", op::lop3}, {"trap", op::trap}};
    if (name == "atom" || name == "red") return decode_atom(opcode, parts, in, unsupported);
    if (name == "vote" || name == "match" || name == "redux" || name == "activemask") {
      return decode_warp(opcode, parts, in, unsupported);
    }
    if (name == "fence" || name == "membar") {
      // fence{.sem}.scope and membar.level: the executor runs every access in one sequentially
      // consistent order, so a fence orders nothing further (proxy fences are not implemented).
      static const std::unordered_set<std::string_view> forms{
          "fence.cta", "fence.gpu", "fence.sys", "fence.cluster", "fence.sc.cta", "fence.sc.gpu", "fence.sc.sys",
          "fence.sc.cluster", "fence.acq_rel.cta", "fence.acq_rel.gpu", "fence.acq_rel.sys", "fence.acq_rel.cluster",
          "membar.cta", "membar.gl", "membar.sys"};
      if (!forms.count(opcode)) return unsupported("fence form '" + opcode + "'");
      in.code = op::fence;
      in.publishes = opcode == "membar.gl" || opcode == "membar.sys" || opcode.ends_with(".gpu") || opcode.ends_with(".sys");
      return;
    }
    if (name == "bar" || name == "barrier") {
      // bar.sync a / barrier.sync(.aligned) a / bar.warp.sync mask
      if (parts.size() >= 3 && parts[1] == "warp" && parts[2] == "sync" && parts.size() == 3) {
        in.code = op::bar_warp_sync;
        return;
      }
      if (parts.size() >= 2 && parts[1] == "sync" &&
          (parts.size() == 2 || (parts.size() == 3 && parts[2] == "aligned" && name == "barrier"))) {
        in.code = op::bar_sync;
        in.aligned = name == "bar" || parts.size() == 3;  // bar.sync is barrier.sync.aligned
        return;
      }
      // bar.red.{and,or}.pred / bar.red.popc.u32 (barrier.red... with .aligned): __syncthreads_and,
      // _or and _count. The reduction's kind goes in aop (popc as add).
      if (parts.size() >= 4 && parts[1] == "red") {
        const bool aligned = parts.size() == 5 && parts[3] == "aligned" && name == "barrier";
        const std::string& kind = parts[2];
        const std::string& type = parts.back();
        if ((parts.size() == 4 || aligned) && ((kind == "popc" && type == "u32") ||
                                               ((kind == "and" || kind == "or") && type == "pred"))) {
          in.code = op::bar_red;
          in.aligned = name == "bar" || aligned;
          in.type = type == "u32" ? vtype::u32 : vtype::pred;
          in.aop = kind == "popc" ? atom_op::add : kind == "and" ? atom_op::and_ : atom_op::or_;
          return;
        }
      }
      return unsupported("barrier form '" + opcode + "'");
    }
    if (name == "cp") {
      if (opcode == "cp.async.commit_group") { in.code = op::cp_async_commit; return; }
      if (opcode == "cp.async.wait_group") { in.code = op::cp_async_wait_group; return; }
      if (opcode == "cp.async.wait_all") { in.code = op::cp_async_wait_all; return; }
      if (opcode == "cp.async.cg.shared.global" || opcode == "cp.async.ca.shared.global") {
        in.code = op::cp_async;
        return;
      }
      return unsupported("cp form '" + opcode + "'");
    }
    if (name == "mma") {
      // The tensor-core shape of FlashInfer-style GQA decode and prefill; other shapes and
      // types are not implemented (and fail when executed, naming themselves).
      for (const char* shape : {"m16n8k16", "m16n8k8"}) {
        const std::string form = std::string("mma.sync.aligned.") + shape + ".row.col.f32.";
        if (opcode == form + "f16.f16.f32" || opcode == form + "bf16.bf16.f32") {
          in.code = op::mma;
          in.type = vtype::f32;
          in.type2 = parts[7] == "f16" ? vtype::f16 : vtype::bf16;
          in.vec = shape[6] == '1' ? 2 : 1;  // K / 8
          return;
        }
      }
      return unsupported("mma form '" + opcode +
                         "' (implemented: m16n8k16 and m16n8k8 .row.col.f32.{f16,bf16}.{f16,bf16}.f32)");
    }
    if (name == "wmma") {
      // wmma.load.{a,b,c}.sync.aligned.{row,col}.shape{.ss}.type, wmma.store.d (the same),
      // wmma.mma.sync.aligned.{row,col}.{row,col}.shape.dtype{.atype.btype}.ctype{.satfinite}:
      // shapes m16n16k16, m32n8k16, m8n32k16 (f16, bf16, s8, u8), m16n16k8 (tf32), m8n8k4 (f64).
      const auto refuse = [&] {
        return unsupported("wmma form '" + opcode + "' (implemented: load/store/mma of m16n16k16, m32n8k16, m8n32k16 "
                           "over f16, bf16, s8, u8; m16n16k8 over tf32; m8n8k4 over f64)");
      };
      const auto shape_of = [](std::string_view t) -> std::uint32_t {
        if (t == "m16n16k16") return 16u << 16 | 16u << 8 | 16u;
        if (t == "m32n8k16") return 32u << 16 | 8u << 8 | 16u;
        if (t == "m8n32k16") return 8u << 16 | 32u << 8 | 16u;
        if (t == "m16n16k8") return 16u << 16 | 16u << 8 | 8u;
        if (t == "m8n8k4") return 8u << 16 | 8u << 8 | 4u;
        return 0;
      };
      std::size_t k = 1;
      auto next_is = [&](std::string_view m) { return k < parts.size() && parts[k] == m ? (++k, true) : false; };
      if (next_is("load") || next_is("store")) {
        const bool load = parts[1] == "load";
        std::uint8_t matrix = 0;
        if (load && next_is("a")) matrix = 0;
        else if (load && next_is("b")) matrix = 1;
        else if (next_is(load ? "c" : "d")) matrix = 2;
        else return refuse();
        if (!next_is("sync") || !next_is("aligned")) return refuse();
        const bool col = next_is("col");
        if (!col && !next_is("row")) return refuse();
        in.shape = k < parts.size() ? shape_of(parts[k++]) : 0;
        in.where = space::generic;
        if (next_is("shared") || next_is("shared::cta")) in.where = space::shared;
        else if (next_is("global")) in.where = space::global;
        if (in.shape == 0 || k + 1 != parts.size() || !parse_type(parts[k], in.type)) return refuse();
        if (!wmma_type_fits(in.shape, matrix, in.type)) return refuse();
        in.code = load ? op::wmma_load : op::wmma_store;
        in.vec = matrix;
        in.trans = col;
        return;
      }
      if (next_is("mma") && next_is("sync") && next_is("aligned")) {
        for (int i = 0; i < 2; ++i) {
          if (!next_is("row") && !next_is("col")) return refuse();
        }
        in.shape = k < parts.size() ? shape_of(parts[k++]) : 0;
        if (k < parts.size() && (parts[k] == "rn" || parts[k] == "rz" || parts[k] == "rm" || parts[k] == "rp")) {
          if (parts[k] != "rn") return refuse();  // f64's rounding: only the default, to nearest
          ++k;
        }
        std::vector<vtype> types;
        while (k < parts.size() && parts[k] != "satfinite") {
          vtype v{};
          if (!parse_type(parts[k++], v)) return refuse();
          types.push_back(v);
        }
        in.sat = next_is("satfinite");
        if (in.shape == 0 || k != parts.size() || (types.size() != 2 && types.size() != 4)) return refuse();
        in.code = op::wmma_mma;
        in.type = types.front();   // D
        in.type3 = types.back();   // C
        in.type2 = types.size() == 4 ? types[1] : vtype::f16;  // A and B (f16: dtype.ctype only)
        if (types.size() == 4 && types[1] != types[2]) return refuse();
        const bool is_int = in.type2 == vtype::s8 || in.type2 == vtype::u8;
        if (!wmma_type_fits(in.shape, 0, in.type2) || !wmma_type_fits(in.shape, 2, in.type) ||
            !wmma_type_fits(in.shape, 2, in.type3) || is_int != (in.type == vtype::s32) || is_int != (in.type3 == vtype::s32) ||
            (in.type2 != vtype::f16 && (in.type == vtype::f16 || in.type3 == vtype::f16)) || (in.sat && !is_int)) {
          return refuse();
        }
        return;
      }
      return refuse();
    }
    if (name == "nanosleep") {  // nanosleep.u32 t: sleep for about t ns (PTX ISA: any time in [0, 2t], at most 1 ms)
      if (opcode != "nanosleep.u32") return unsupported("nanosleep form '" + opcode + "' (implemented: nanosleep.u32)");
      in.code = op::nanosleep;
      return;
    }
    if (name == "prefetch" || name == "prefetchu") {  // a cache hint: prefetch{.global,.local}.{L1,L2}[::evict_*]
      static const std::unordered_set<std::string_view> forms{
          "prefetch.L1", "prefetch.L2", "prefetch.global.L1", "prefetch.global.L2", "prefetch.local.L1",
          "prefetch.local.L2", "prefetch.global.L2::evict_last", "prefetch.global.L2::evict_normal", "prefetchu.L1"};
      if (!forms.count(opcode)) return unsupported("prefetch form '" + opcode + "'");
      in.code = op::prefetch;
      return;
    }
    if (name == "bmsk") {  // bmsk.{clamp,wrap}.b32
      if (opcode != "bmsk.clamp.b32" && opcode != "bmsk.wrap.b32") {
        return unsupported("bmsk form '" + opcode + "' (implemented: bmsk.clamp.b32, bmsk.wrap.b32)");
      }
      in.code = op::bmsk;
      in.type = vtype::b32;
      in.clamp = parts[1] == "clamp";
      return;
    }
    if (name == "ldmatrix") {
      // ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared{::cta}.b16
      std::size_t k = 1;
      auto next_is = [&](std::string_view m) { return k < parts.size() && parts[k] == m ? (++k, true) : false; };
      const bool head = next_is("sync") && next_is("aligned") && next_is("m8n8");
      std::uint8_t n = 0;
      if (next_is("x1")) n = 1;
      else if (next_is("x2")) n = 2;
      else if (next_is("x4")) n = 4;
      const bool trans = next_is("trans");
      const bool shared = next_is("shared") || next_is("shared::cta");
      if (!head || n == 0 || !shared || !next_is("b16") || k != parts.size()) {
        return unsupported("ldmatrix form '" + opcode + "' (implemented: .sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16)");
      }
      in.code = op::ldmatrix;
      in.type = vtype::b16;
      in.where = space::shared;
      in.vec = n;
      in.trans = trans;
      return;
    }
    const auto it = names.find(name);
    if (it == names.end()) return unsupported("opcode '" + name + "'");
    in.code = it->second;
    std::vector<vtype> types;
    for (std::size_t k = 1; k < parts.size(); ++k) {
      const std::string& m = parts[k];
      vtype t;
      if (parse_type(m, t)) { types.push_back(t); continue; }
      if (m == "global") in.where = space::global;
      else if (m == "shared") in.where = space::shared;
      else if (m == "param") in.where = space::param;
      else if (m == "local") in.where = space::local;
      else if (m == "const") in.where = space::global;  // the module's variables are host storage
      else if (m == "nc" && in.code == op::ld) {
      } else if ((in.code == op::ld || in.code == op::st) && memory_qualifier(m, in)) {
      } else if (in.code == op::bfind && m == "shiftamt") in.shiftamt = true;
      else if (in.code == op::prmt && prmt_qualifier(m, in)) {
      } else if (m == "v2") in.vec = 2;
      else if (m == "v4") in.vec = 4;
      else if (m == "ftz") in.ftz = true;
      else if (m == "sat") in.sat = true;
      else if (m == "satfinite" && in.code == op::cvt) in.satfinite = true;
      else if (m == "approx") in.approx = true;
      else if (m == "full" && in.code == op::div) in.approx = true;
      else if (m == "uni") in.uni = true;
      else if (m == "hi") in.hi = true;
      else if (m == "lo") {
      } else if (m == "wide") in.wide = true;
      else if (m == "to" && in.code == op::cvta) in.to = true;
      else if (m == "rn") in.round = rounding::rn;
      else if (m == "rz") in.round = rounding::rz;
      else if (m == "rm") in.round = rounding::rm;
      else if (m == "rp") in.round = rounding::rp;
      else if (m == "rni") in.round = rounding::rni;
      else if (m == "rzi") in.round = rounding::rzi;
      else if (m == "rmi") in.round = rounding::rmi;
      else if (m == "rpi") in.round = rounding::rpi;
      else if (m == "rna" && in.code == op::cvt) in.round = rounding::rna;
      else if (in.code == op::shfl && m == "sync") {
      } else if (in.code == op::shfl && m == "up") in.mode = shfl_mode::up;
      else if (in.code == op::shfl && m == "down") in.mode = shfl_mode::down;
      else if (in.code == op::shfl && m == "bfly") in.mode = shfl_mode::bfly;
      else if (in.code == op::shfl && m == "idx") in.mode = shfl_mode::idx;
      else if (in.code == op::setp && set_compare(m, in.compare)) {
      } else return unsupported("modifier '." + m + "' of " + name);
    }
    if (in.code == op::cvt) {
      if (types.size() != 2) return unsupported("cvt needs two types");
      in.type = types[0];
      in.type2 = types[1];
    } else if (in.code == op::setp) {
      if (types.size() != 1) return unsupported("setp needs one type");
      in.type = types[0];
    } else if (in.code == op::bra || in.code == op::ret || in.code == op::exit || in.code == op::trap) {
      if (!types.empty()) return unsupported("typed " + name);
    } else {
      if (types.size() != 1) return unsupported(name + " needs one type");
      in.type = types[0];
    }
    if ((in.code == op::shfl) && opcode.find(".sync") == std::string::npos) return unsupported("shfl without .sync");
    if (in.code == op::prmt && in.type != vtype::b32) return unsupported("prmt type");
    if ((in.code == op::clz || in.code == op::popc || in.code == op::brev) && in.type != vtype::b32 &&
        in.type != vtype::b64) {
      return unsupported(name + " type (b32, b64)");
    }
    if ((in.code == op::bfind || in.code == op::bfe) && in.type != vtype::u32 && in.type != vtype::s32 &&
        in.type != vtype::u64 && in.type != vtype::s64) {
      return unsupported(name + " type (u32, s32, u64, s64)");
    }
    if (in.code == op::shfl && in.type != vtype::b32) return unsupported("shfl type");
    if (in.code == op::lop3 && in.type != vtype::b32) return unsupported("lop3 type (implemented: lop3.b32)");
    (void)s;
  }

  // ld/st ordering, scope and cache qualifiers (PTX ISA: ld, st). Scopes and cache hints change
  // nothing on a device that runs every access in one order; the ordering feeds the race check.
  static bool memory_qualifier(const std::string& m, instr& in) {
    static const std::unordered_map<std::string_view, mem_order> orders{
        {"weak", mem_order::weak},       {"relaxed", mem_order::relaxed}, {"acquire", mem_order::acquire},
        {"release", mem_order::release}, {"volatile", mem_order::volatile_}};
    if (const auto it = orders.find(m); it != orders.end()) {
      in.order = it->second;
      return true;
    }
    static const std::unordered_set<std::string_view> ignored{
        "cta", "gpu", "sys", "cluster", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "L1::evict_normal",
        "L1::evict_unchanged", "L1::evict_first", "L1::evict_last", "L1::no_allocate", "L2::evict_normal",
        "L2::evict_first", "L2::evict_last", "L2::64B", "L2::128B", "L2::256B"};
    return ignored.count(m) != 0;
  }

  static bool prmt_qualifier(const std::string& m, instr& in) {
    static const std::unordered_map<std::string_view, prmt_mode> modes{
        {"f4e", prmt_mode::f4e}, {"b4e", prmt_mode::b4e}, {"rc8", prmt_mode::rc8},
        {"ecl", prmt_mode::ecl}, {"ecr", prmt_mode::ecr}, {"rc16", prmt_mode::rc16}};
    const auto it = modes.find(m);
    if (it == modes.end()) return false;
    in.pmode = it->second;
    return true;
  }

  // atom{.sem}{.scope}{.space}.op{.noftz}.type and red likewise (PTX ISA: atom, red).
  template <class Refuse>
  static void decode_atom(const std::string& opcode, const std::vector<std::string>& parts, instr& in, Refuse&& unsupported) {
    static const std::unordered_map<std::string_view, atom_op> ops{
        {"add", atom_op::add}, {"min", atom_op::min}, {"max", atom_op::max}, {"inc", atom_op::inc},
        {"dec", atom_op::dec}, {"exch", atom_op::exch}, {"cas", atom_op::cas}, {"and", atom_op::and_},
        {"or", atom_op::or_},  {"xor", atom_op::xor_}};
    static const std::unordered_map<std::string_view, mem_order> orders{
        {"relaxed", mem_order::relaxed}, {"acquire", mem_order::acquire}, {"release", mem_order::release},
        {"acq_rel", mem_order::acq_rel}};
    in.code = parts[0] == "atom" ? op::atom : op::red;
    in.order = mem_order::relaxed;  // an atomic is strong whatever its order
    bool have_op = false;
    std::vector<vtype> types;
    for (std::size_t k = 1; k < parts.size(); ++k) {
      const std::string& m = parts[k];
      vtype t;
      if (parse_type(m, t)) types.push_back(t);
      else if (const auto o = ops.find(m); o != ops.end() && !have_op) {
        in.aop = o->second;
        have_op = true;
      } else if (const auto r = orders.find(m); r != orders.end()) in.order = r->second;
      else if (m == "global") in.where = space::global;
      else if (m == "shared" || m == "shared::cta") in.where = space::shared;
      else if (m == "cta" || m == "gpu" || m == "sys") {
      } else if (m == "noftz") in.noftz = true;
      else return unsupported("modifier '." + m + "' of " + parts[0]);
    }
    if (!have_op || types.size() != 1) return unsupported(parts[0] + " needs one operation and one type");
    in.type = types[0];
    const vtype t = in.type;
    const bool b = t == vtype::b32 || t == vtype::b64, u = t == vtype::u32 || t == vtype::u64,
               s = t == vtype::s32 || t == vtype::s64;
    const bool half = t == vtype::f16 || t == vtype::bf16 || t == vtype::f16x2 || t == vtype::bf16x2;
    bool ok = false;
    switch (in.aop) {
      case atom_op::and_: case atom_op::or_: case atom_op::xor_: ok = b; break;
      case atom_op::exch: ok = b; break;
      case atom_op::cas: ok = b || t == vtype::b16; break;
      case atom_op::inc: case atom_op::dec: ok = t == vtype::u32; break;
      case atom_op::min: case atom_op::max: ok = u || s; break;
      case atom_op::add: ok = u || s || t == vtype::f32 || t == vtype::f64 || (half && in.noftz); break;
    }
    if (in.aop == atom_op::cas && in.code == op::red) ok = false;
    if (!ok) return unsupported("the combination '" + opcode + "' (PTX ISA: atom's operation and type table)");
  }

  // vote.sync.{all,any,uni}.pred, vote.sync.ballot.b32, match.{any,all}.sync.{b32,b64},
  // activemask.b32 (PTX ISA: vote, match, activemask).
  template <class Refuse>
  static void decode_warp(const std::string& opcode, const std::vector<std::string>& parts, instr& in, Refuse&& unsupported) {
    if (opcode == "activemask.b32") {
      in.code = op::activemask;
      in.type = vtype::b32;
      return;
    }
    static const std::unordered_map<std::string_view, vote_mode> votes{
        {"vote.sync.all.pred", vote_mode::all}, {"vote.sync.any.pred", vote_mode::any},
        {"vote.sync.uni.pred", vote_mode::uni}, {"vote.sync.ballot.b32", vote_mode::ballot},
        // .sync after the mode: the order CUB's inline PTX writes (ptxas takes both).
        {"vote.all.sync.pred", vote_mode::all}, {"vote.any.sync.pred", vote_mode::any},
        {"vote.uni.sync.pred", vote_mode::uni}, {"vote.ballot.sync.b32", vote_mode::ballot}};
    if (const auto v = votes.find(opcode); v != votes.end()) {
      in.code = op::vote;
      in.vote = v->second;
      in.type = v->second == vote_mode::ballot ? vtype::b32 : vtype::pred;
      return;
    }
    // redux.sync.{add,min,max}.{u32,s32} and redux.sync.{and,or,xor}.b32 d, a, membermask.
    static const std::unordered_map<std::string_view, atom_op> reductions{
        {"redux.sync.add.u32", atom_op::add}, {"redux.sync.add.s32", atom_op::add},
        {"redux.sync.min.u32", atom_op::min}, {"redux.sync.min.s32", atom_op::min},
        {"redux.sync.max.u32", atom_op::max}, {"redux.sync.max.s32", atom_op::max},
        {"redux.sync.and.b32", atom_op::and_}, {"redux.sync.or.b32", atom_op::or_},
        {"redux.sync.xor.b32", atom_op::xor_}};
    if (const auto r = reductions.find(opcode); r != reductions.end()) {
      in.code = op::redux;
      in.aop = r->second;
      parse_type(parts[3], in.type);
      return;
    }
    if (parts.size() == 4 && parts[0] == "match" && (parts[1] == "any" || parts[1] == "all") && parts[2] == "sync" &&
        (parts[3] == "b32" || parts[3] == "b64")) {
      in.code = op::match;
      in.match_all = parts[1] == "all";
      in.type = parts[3] == "b32" ? vtype::b32 : vtype::b64;
      return;
    }
    return unsupported("form '" + opcode + "' (implemented: vote.sync.{all,any,uni}.pred, vote.sync.ballot.b32, "
                       "match.{any,all}.sync.{b32,b64}, redux.sync on 32-bit integers, activemask.b32)");
  }

  static bool set_compare(const std::string& m, cmp& c) {
    static const std::unordered_map<std::string_view, cmp> cmps{
        {"eq", cmp::eq},   {"ne", cmp::ne},   {"lt", cmp::lt},   {"le", cmp::le},   {"gt", cmp::gt},
        {"ge", cmp::ge},   {"equ", cmp::equ}, {"neu", cmp::neu}, {"ltu", cmp::ltu}, {"leu", cmp::leu},
        {"gtu", cmp::gtu}, {"geu", cmp::geu}, {"num", cmp::num}, {"nan", cmp::nan}, {"lo", cmp::lt},
        {"ls", cmp::le},   {"hi", cmp::gt},   {"hs", cmp::ge}};
    const auto it = cmps.find(m);
    if (it == cmps.end()) return false;
    c = it->second;
    return true;
  }

  module& mod_;
  module_source& src_;
  std::size_t symbols_visible_ = 0;  // module symbols declared before the function being parsed
  std::unordered_map<std::string, symbol>* fsyms_ = nullptr;
  std::size_t module_shared_ = 0;
  std::size_t dynamic_align_ = 16;
  function* cur_ = nullptr;
  std::vector<std::unordered_map<std::string, std::uint32_t>> scopes_;
  std::unordered_map<std::string, std::uint32_t> labels_;
  std::vector<std::pair<std::size_t, std::string>> pending_branches_;
  std::vector<std::pair<std::size_t, std::size_t>> dynamic_refs_;
  std::map<special, std::uint32_t> specials_;
  std::uint32_t slots_ = 0;
  std::uint32_t loc_file_ = 0, loc_line_ = 0, call_file_ = 0, call_line_ = 0;
};

// An entry, its body parsed at its first use. The module is shared as const, and is not const:
// load_ptx made it; a body is parsed once, under the module's lock, and never changes after.
const detail::function& find_entry(const module& m, std::string_view entry) {
  const auto it = m.by_name.find(entry);
  if (it == m.by_name.end()) {
    throw sim_error("PTX module '" + m.name + "' has no .entry '" + std::string(entry) + "'");
  }
  module_source& src = *m.source;
  const std::lock_guard<std::mutex> lock(src.mutex);
  if (!src.bodies[it->second].parsed) parser(const_cast<module&>(m), src).parse_body(it->second);
  return m.functions[it->second];
}

}  // namespace

namespace detail {
const function& entry_function(const module& m, std::string_view entry) { return find_entry(m, entry); }
}  // namespace detail

std::shared_ptr<const module> load_ptx(std::string text, std::string name) {
  auto m = std::make_shared<module>();
  m->name = name;
  m->source = std::make_shared<module_source>();
  m->source->text = std::move(text);
  try {
    parser(*m, *m->source).scan();
  } catch (const std::logic_error& e) {  // std::stoul on a malformed number
    throw sim_error("PTX module '" + name + "': malformed number (" + e.what() + ")");
  }
  return m;
}

std::string refusal(const module& m, std::string_view entry) { return find_entry(m, entry).refused; }

entry_resources resources(const module& m, std::string_view entry) {
  const detail::function& f = find_entry(m, entry);
  return {f.static_shared, f.local_bytes, f.param_bytes};
}

variable_storage variable(const module& m, std::string_view name) {
  const std::lock_guard<std::mutex> lock(m.source->mutex);  // a body parsed meanwhile may declare one
  for (const auto& v : m.variables) {
    if (v.name == name) return {v.data.get(), v.size};
  }
  return {};
}

std::vector<std::string> entries(const module& m) {
  std::vector<std::string> out;
  for (const auto& f : m.functions) {
    if (f.is_entry) out.push_back(f.name);
  }
  return out;
}

std::vector<param_info> entry_params(const module& m, std::string_view entry) {
  std::vector<param_info> out;
  for (const auto& p : find_entry(m, entry).params) out.push_back(p.info);
  return out;
}

}  // namespace rungs::sim
