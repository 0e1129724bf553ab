// The bucket listings of the two Gaudi documents, copied from their logs
// (gaudi-bucketing-linear-and-graph-capture.md and gaudi-bucketing-exponential-zh.md), and
// the serving configurations that reproduce them (gaudi-bucketing.md).
#pragma once

#include <rungs/ladder/gaudi_config.hpp>

#include <string>

namespace rungs_test {

inline rungs::gaudi::serving_config linear_doc() {
  rungs::gaudi::serving_config s;
  s.max_num_seqs = 4;
  s.block_size = 128;
  return s;
}

inline rungs::gaudi::serving_config exponential_doc() {
  rungs::gaudi::serving_config s;
  s.max_num_seqs = 4;
  s.max_num_prefill_seqs = 1;
  s.block_size = 128;
  s.max_model_len = 1024;
  s.num_blocks = 5777;
  s.prefix_caching = true;
  return s;
}

inline constexpr const char* linear_prompt_log =
    "[(1, 128), (1, 256), (1, 384), (1, 512), (1, 640), (1, 768), (1, 896), (1, 1024), (2, 128), (2, 256), "
    "(2, 384), (2, 512), (2, 640), (2, 768), (2, 896), (2, 1024), (4, 128), (4, 256), (4, 384), (4, 512), "
    "(4, 640), (4, 768), (4, 896), (4, 1024)]";
inline constexpr const char* linear_decode_log =
    "[(1, 128), (1, 256), (1, 384), (1, 512), (1, 640), (1, 768), (1, 896), (1, 1024), (1, 1152), (1, 1280), "
    "(1, 1408), (1, 1536), (1, 1664), (1, 1792), (1, 1920), (1, 2048), (2, 128), (2, 256), (2, 384), (2, 512), "
    "(2, 640), (2, 768), (2, 896), (2, 1024), (2, 1152), (2, 1280), (2, 1408), (2, 1536), (2, 1664), (2, 1792), "
    "(2, 1920), (2, 2048), (4, 128), (4, 256), (4, 384), (4, 512), (4, 640), (4, 768), (4, 896), (4, 1024), "
    "(4, 1152), (4, 1280), (4, 1408), (4, 1536), (4, 1664), (4, 1792), (4, 1920), (4, 2048)]";
inline constexpr const char* exponential_prompt_log =
    "[(1, 128, 0), (1, 128, 1), (1, 128, 2), (1, 128, 3), (1, 128, 4), (1, 128, 5), (1, 128, 6), (1, 128, 7), "
    "(1, 256, 0), (1, 256, 1), (1, 256, 2), (1, 256, 3), (1, 256, 4), (1, 256, 5), (1, 256, 6), (1, 384, 0), "
    "(1, 384, 1), (1, 384, 2), (1, 384, 3), (1, 384, 4), (1, 384, 5), (1, 512, 0), (1, 512, 1), (1, 512, 2), "
    "(1, 512, 3), (1, 512, 4), (1, 640, 0), (1, 640, 1), (1, 640, 2), (1, 640, 3), (1, 768, 0), (1, 768, 1), "
    "(1, 768, 2), (1, 896, 0), (1, 896, 1), (1, 1024, 0)]";
inline constexpr const char* exponential_decode_log =
    "[(1, 1, 128), (1, 1, 256), (1, 1, 384), (1, 1, 512), (1, 1, 640), (1, 1, 768), (1, 1, 896), (1, 1, 1024), "
    "(1, 1, 1408), (1, 1, 1792), (1, 1, 2432), (1, 1, 3328), (1, 1, 4352), (1, 1, 5888), (2, 1, 128), "
    "(2, 1, 256), (2, 1, 384), (2, 1, 512), (2, 1, 640), (2, 1, 768), (2, 1, 896), (2, 1, 1024), (2, 1, 1408), "
    "(2, 1, 1792), (2, 1, 2432), (2, 1, 3328), (2, 1, 4352), (2, 1, 5888), (4, 1, 128), (4, 1, 256), "
    "(4, 1, 384), (4, 1, 512), (4, 1, 640), (4, 1, 768), (4, 1, 896), (4, 1, 1024), (4, 1, 1408), (4, 1, 1792), "
    "(4, 1, 2432), (4, 1, 3328), (4, 1, 4352), (4, 1, 5888)]";

/// The documents' log lines (without vLLM's "INFO <time> <file>]" prefix), with "[bs, seq]" on the
/// 2-D lines as the output contract asks (the linear document itself omits it).
inline std::string linear_doc_log() {
  return std::string("Prompt bucket config (min, step, max_warmup) bs:[1, 32, 4], seq:[128, 128, 1024]\n") +
         "Generated 24 prompt buckets [bs, seq]: " + linear_prompt_log + "\n" +
         "Decode bucket config (min, step, max_warmup) bs:[1, 128, 4], seq:[128, 128, 2048]\n" +
         "Generated 48 decode buckets [bs, seq]: " + linear_decode_log + "\n";
}

/// The exponential document shows the prompt lines; the decode config line follows
/// vllm-gaudi's exponential.py ("block:" for the KV-block dimension).
inline std::string exponential_doc_log() {
  return std::string("Prompt bucket config (min, step, max_warmup, limit) bs:[1, 1, 1, 1], seq:[128, 128, 1024, 11]\n") +
         "Generated 36 prompt buckets [bs, query, num_blocks]: " + exponential_prompt_log + "\n" +
         "Decode bucket config (min, step, max_warmup, limit) bs:[1, 1, 4, 3], block:[128, 128, 5777, 14]\n" +
         "Generated 42 decode buckets [bs, query, num_blocks]: " + exponential_decode_log + "\n";
}

}  // namespace rungs_test
