// JSON output of rungs' programs: documents are built with nlohmann::ordered_json (keys in the
// order written) and printed on one line with ", " and ": " between items, the layout the
// documented outputs use. nlohmann/json writes every string and number; only the spacing is
// chosen here. Tools only, like command_line.hpp.
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>

namespace rungs::cli {

using json = nlohmann::ordered_json;

/// `j` on one line, without the newline.
inline void write_json(std::ostream& out, const json& j) {
  if (j.is_object()) {
    out << "{";
    bool first = true;
    for (const auto& [key, value] : j.items()) {
      out << (first ? "" : ", ") << json(key).dump() << ": ";
      write_json(out, value);
      first = false;
    }
    out << "}";
  } else if (j.is_array()) {
    out << "[";
    for (std::size_t i = 0; i < j.size(); ++i) {
      out << (i ? ", " : "");
      write_json(out, j[i]);
    }
    out << "]";
  } else {
    out << j.dump();
  }
}

/// `j` on one line, and the newline.
inline void write_json_line(std::ostream& out, const json& j) {
  write_json(out, j);
  out << "\n";
}

}  // namespace rungs::cli
