#include "util/json_writer.h"

#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace idem::util {
namespace {

using Json = nlohmann::ordered_json;

// Compact JSON text of `v`. `ascii`: every non-ASCII character escaped as
// \uXXXX. Invalid UTF-8 becomes U+FFFD rather than an exception.
std::string Dump(const Json& v, bool ascii) {
  return v.dump(/*indent=*/-1, /*indent_char=*/' ', ascii,
                Json::error_handler_t::replace);
}

// `bytes` as a string of code points U+0000..U+00FF, one per byte, in UTF-8
// (what nlohmann::json holds strings in).
std::string Latin1ToUtf8(std::string_view bytes) {
  std::string utf8;
  utf8.reserve(bytes.size());
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x80) {
      utf8.push_back(c);
    } else {
      utf8.push_back(static_cast<char>(0xc0 | (b >> 6)));
      utf8.push_back(static_cast<char>(0x80 | (b & 0x3f)));
    }
  }
  return utf8;
}

}  // namespace

std::string JsonQuote(std::string_view text) {
  return Dump(Json(std::string(text)), /*ascii=*/false);
}

std::string JsonQuoteBytes(std::string_view bytes) {
  return Dump(Json(Latin1ToUtf8(bytes)), /*ascii=*/true);
}

JsonWriter::Json& JsonWriter::Add(Json v) {
  if (open_.empty()) return root_ = std::move(v);
  Json& parent = *open_.back();
  if (parent.is_array()) {
    parent.push_back(std::move(v));
    return parent.back();
  }
  return parent[key_] = std::move(v);
}

void JsonWriter::BeginObject() { open_.push_back(&Add(Json::object())); }

void JsonWriter::BeginArray() { open_.push_back(&Add(Json::array())); }

void JsonWriter::String(std::string_view text) { Add(std::string(text)); }

void JsonWriter::Bytes(std::string_view bytes) { Add(Latin1ToUtf8(bytes)); }

void JsonWriter::Number(double v) {
  if (!std::isfinite(v)) {
    Add(nullptr);
    return;
  }
  // Rounded to the 6 significant digits the reports have always had.
  double rounded = v;
  if (!absl::SimpleAtod(absl::StrFormat("%.6g", v), &rounded)) rounded = v;
  Add(rounded);
}

void JsonWriter::Int(int64_t v) { Add(v); }

void JsonWriter::Uint(uint64_t v) { Add(v); }

void JsonWriter::Bool(bool v) { Add(v); }

void JsonWriter::Null() { Add(nullptr); }

std::string JsonWriter::str() const { return Dump(root_, /*ascii=*/true); }

}  // namespace idem::util
