#include "tests/testing/json_value.h"

#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace idem::test {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> ParseDocument() {
    absl::StatusOr<JsonValue> value = ParseValue(/*depth=*/0);
    if (!value.ok()) return value;
    SkipSpace();
    if (pos_ != text_.size()) return Error("trailing characters");
    return value;
  }

 private:
  static constexpr int kMaxDepth = 64;

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON: ", std::string(what), " at offset ", pos_));
  }

  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
            text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(std::string_view token) {
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }

  absl::StatusOr<JsonValue> ParseValue(int depth) {
    if (depth > kMaxDepth) return Error("nesting too deep");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("unexpected end");
    JsonValue v;
    const char c = text_[pos_];
    if (Consume("null")) return v;
    if (Consume("true") || Consume("false")) {
      v.type = JsonValue::Type::kBool;
      v.boolean = c == 't';
      return v;
    }
    if (c == '"') {
      absl::StatusOr<std::string> s = ParseString();
      if (!s.ok()) return s.status();
      v.type = JsonValue::Type::kString;
      v.string = *std::move(s);
      return v;
    }
    if (c == '[') return ParseArray(depth);
    if (c == '{') return ParseObject(depth);
    if (c == '-' || absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return ParseNumber();
    }
    return Error("unexpected character");
  }

  absl::StatusOr<JsonValue> ParseNumber() {
    const size_t start = pos_;
    auto digits = [this] {
      const size_t from = pos_;
      while (pos_ < text_.size() &&
             absl::ascii_isdigit(static_cast<unsigned char>(text_[pos_]))) {
        ++pos_;
      }
      return pos_ - from;
    };
    Consume("-");
    if (Consume("0")) {
      // No leading zeros.
    } else if (digits() == 0) {
      return Error("bad number");
    }
    if (Consume(".") && digits() == 0) return Error("bad fraction");
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (!Consume("+")) Consume("-");
      if (digits() == 0) return Error("bad exponent");
    }
    JsonValue v;
    v.type = JsonValue::Type::kNumber;
    v.number = std::strtod(
        std::string(text_.substr(start, pos_ - start)).c_str(), nullptr);
    return v;
  }

  absl::StatusOr<unsigned> ParseHex4() {
    if (pos_ + 4 > text_.size()) return Error("short \\u escape");
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      code <<= 4;
      if (h >= '0' && h <= '9') {
        code |= h - '0';
      } else if (h >= 'a' && h <= 'f') {
        code |= h - 'a' + 10;
      } else if (h >= 'A' && h <= 'F') {
        code |= h - 'A' + 10;
      } else {
        return Error("bad \\u escape");
      }
    }
    return code;
  }

  static void AppendCodePoint(unsigned code, std::string& out) {
    if (code <= 0xff) {
      out.push_back(static_cast<char>(code));  // one byte (Latin-1)
    } else if (code < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (code >> 6)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
    } else if (code < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (code >> 12)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (code >> 18)));
      out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
    }
  }

  absl::StatusOr<std::string> ParseString() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) return Error("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error("raw control character in string");
      }
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) return Error("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          absl::StatusOr<unsigned> code = ParseHex4();
          if (!code.ok()) return code.status();
          if (*code >= 0xd800 && *code < 0xdc00) {
            if (!Consume("\\u")) return Error("lone high surrogate");
            absl::StatusOr<unsigned> low = ParseHex4();
            if (!low.ok()) return low.status();
            if (*low < 0xdc00 || *low >= 0xe000) return Error("bad surrogate");
            *code = 0x10000 + ((*code - 0xd800) << 10) + (*low - 0xdc00);
          } else if (*code >= 0xdc00 && *code < 0xe000) {
            return Error("lone low surrogate");
          }
          AppendCodePoint(*code, out);
          break;
        }
        default:
          return Error("bad escape");
      }
    }
  }

  absl::StatusOr<JsonValue> ParseArray(int depth) {
    ++pos_;  // [
    JsonValue v;
    v.type = JsonValue::Type::kArray;
    SkipSpace();
    if (Consume("]")) return v;
    while (true) {
      absl::StatusOr<JsonValue> item = ParseValue(depth + 1);
      if (!item.ok()) return item;
      v.array.push_back(*std::move(item));
      SkipSpace();
      if (Consume("]")) return v;
      if (!Consume(",")) return Error("expected ',' or ']'");
    }
  }

  absl::StatusOr<JsonValue> ParseObject(int depth) {
    ++pos_;  // {
    JsonValue v;
    v.type = JsonValue::Type::kObject;
    SkipSpace();
    if (Consume("}")) return v;
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') {
        return Error("expected a member name");
      }
      absl::StatusOr<std::string> name = ParseString();
      if (!name.ok()) return name.status();
      SkipSpace();
      if (!Consume(":")) return Error("expected ':'");
      absl::StatusOr<JsonValue> member = ParseValue(depth + 1);
      if (!member.ok()) return member;
      v.object.emplace_back(*std::move(name), *std::move(member));
      SkipSpace();
      if (Consume("}")) return v;
      if (!Consume(",")) return Error("expected ',' or '}'");
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

const JsonValue* JsonValue::Find(std::string_view key) const {
  for (const auto& [name, value] : object) {
    if (name == key) return &value;
  }
  return nullptr;
}

absl::StatusOr<JsonValue> ParseJson(std::string_view text) {
  return Parser(text).ParseDocument();
}

}  // namespace idem::test
