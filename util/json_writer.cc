#include "util/json_writer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace idem::util {

std::string JsonQuote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (b < 0x20 || b == 0x7f) {
      absl::StrAppendFormat(&out, "\\u%04x", b);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

std::string JsonQuoteBytes(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + 2);
  out.push_back('"');
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (b >= 0x20 && b <= 0x7e) {
      out.push_back(c);
    } else {
      absl::StrAppendFormat(&out, "\\u%04x", b);
    }
  }
  out.push_back('"');
  return out;
}

void JsonWriter::Open(char c) {
  Separate();
  out_.push_back(c);
  first_in_container_.push_back(true);
}

void JsonWriter::Close(char c) {
  out_.push_back(c);
  if (!first_in_container_.empty()) first_in_container_.pop_back();
}

void JsonWriter::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (first_in_container_.empty()) return;
  if (!first_in_container_.back()) out_.push_back(',');
  first_in_container_.back() = false;
}

void JsonWriter::Key(std::string_view key) {
  Separate();
  out_ += JsonQuote(key);
  out_.push_back(':');
  after_key_ = true;
}

void JsonWriter::String(std::string_view text) {
  Separate();
  out_ += JsonQuote(text);
}

void JsonWriter::Bytes(std::string_view bytes) {
  Separate();
  out_ += JsonQuoteBytes(bytes);
}

void JsonWriter::Number(double v) {
  Separate();
  if (std::isfinite(v)) {
    absl::StrAppendFormat(&out_, "%.6g", v);
  } else {
    out_ += "null";
  }
}

void JsonWriter::Int(int64_t v) {
  Separate();
  absl::StrAppend(&out_, v);
}

void JsonWriter::Uint(uint64_t v) {
  Separate();
  absl::StrAppend(&out_, v);
}

void JsonWriter::Bool(bool v) {
  Separate();
  out_ += v ? "true" : "false";
}

void JsonWriter::Null() {
  Separate();
  out_ += "null";
}

}  // namespace idem::util
