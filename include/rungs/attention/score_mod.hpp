// Score transforms and masks of rungs' paged attention, beyond the causal mask every kernel
// applies: sliding windows (Mistral, Gemma 2/3), logit soft-capping (Gemma 2) and attention
// sinks (gpt-oss). Plain C++, shared by the planner, the CPU reference and the kernels.
//
// The split follows FlashInfer (`use_sliding_window`, `use_logits_soft_cap` template flags with
// `window_left`, `logits_soft_cap` run-time values): which transforms a kernel compiles in is a
// compile-time policy, `score_mod`, a structural value passed as a template argument, so the
// default instance (no transform) is the same code as before these existed; the values (the
// window, the cap, the sink logits) are run-time, so one instance serves every layer and model
// that uses the same transforms.
#pragma once

#include <cmath>
#include <ostream>

namespace rungs::attention {

/// Which score transforms an attention instance compiles in. Semantics (the CPU reference,
/// reference.hpp, is the definition):
///  * sliding_window: a query at position p sees keys [p - window + 1, p] (with the causal
///    bound; `window` keys at most);
///  * soft_cap: a score s = sm_scale * q.k becomes cap * tanh(s / cap) before the softmax;
///  * sinks: query head h's learned logit sink[h] joins the softmax denominator,
///    sum_t e^(s_t) + e^(sink[h]), and contributes no value (so the weights sum to less
///    than 1). The sink is a final logit: it is neither scaled nor capped.
struct score_mod {
  bool sliding_window = false;
  bool soft_cap = false;
  bool sinks = false;

  friend constexpr bool operator==(const score_mod&, const score_mod&) = default;
  friend std::ostream& operator<<(std::ostream& os, const score_mod& m) {
    os << "score_mod{";
    const char* sep = "";
    if (m.sliding_window) os << sep << ".sliding_window = true", sep = ", ";
    if (m.soft_cap) os << sep << ".soft_cap = true", sep = ", ";
    if (m.sinks) os << sep << ".sinks = true";
    return os << "}";
  }
};

/// The default: causal attention only.
inline constexpr score_mod causal_only{};

/// A score_mod as bits (1: sliding window, 2: soft-cap, 4: sinks), and back. The __global__
/// kernels take the bits, not the struct: nvcc 13's host stubs cannot name a class-type
/// template argument of a kernel (the generated stub fails to compile), though device code can.
constexpr unsigned score_mod_bits(const score_mod& m) {
  return (m.sliding_window ? 1u : 0u) | (m.soft_cap ? 2u : 0u) | (m.sinks ? 4u : 0u);
}
constexpr score_mod score_mod_from_bits(unsigned bits) {
  return {.sliding_window = (bits & 1u) != 0, .soft_cap = (bits & 2u) != 0, .sinks = (bits & 4u) != 0};
}

/// The per-layer values of the transforms (attention_config carries them; a zero turns a
/// transform off).
struct score_values {
  int window = 0;             ///< sliding window in keys; 0: none
  float logit_soft_cap = 0;   ///< cap c; 0: none (Gemma 2 uses 50 for attention logits)

  friend constexpr bool operator==(const score_values&, const score_values&) = default;
};

/// The transforms a configuration needs: what an instance must compile in to run it.
constexpr score_mod needed_mod(const score_values& v, bool has_sinks) {
  return {.sliding_window = v.window > 0, .soft_cap = v.logit_soft_cap > 0.0f, .sinks = has_sinks};
}

}  // namespace rungs::attention
