#include "npy_header.h"

#include <cctype>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

namespace vkflash::tools {
namespace {

// The Python literals a header can hold (ast.literal_eval's subset that matters here).
struct Value {
  enum class Kind { kString, kInt, kBool, kNone, kTuple, kList, kDict } kind = Kind::kNone;
  std::string text;         // kString
  uint64_t magnitude = 0;   // kInt: |value|, valid unless `too_large`
  bool negative = false, too_large = false;
  bool flag = false;        // kBool
  std::vector<Value> items;                            // kTuple, kList
  std::vector<std::pair<std::string, Value>> entries;  // kDict (string keys only)
};

Status Bad(const std::string& why) {
  return Status::Error(ErrorCode::kInvalidArgument, "header " + why);
}

bool IsUtf8(const std::string& s) {
  static const uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};  // shorter forms are overlong
  size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    size_t extra;
    uint32_t code;
    if (lead < 0x80) {
      extra = 0, code = lead;
    } else if ((lead & 0xe0) == 0xc0) {
      extra = 1, code = lead & 0x1f;
    } else if ((lead & 0xf0) == 0xe0) {
      extra = 2, code = lead & 0x0f;
    } else if ((lead & 0xf8) == 0xf0) {
      extra = 3, code = lead & 0x07;
    } else {
      return false;
    }
    if (extra >= s.size() - i) return false;  // the sequence runs past the end
    for (size_t k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(s[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3f);
    }
    if (code < kSmallest[extra] || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) return false;
    i += extra + 1;
  }
  return true;
}

// Recursive descent over the header text.
class Parser {
 public:
  Parser(const std::string& text, bool long_suffix) : s_(text), long_suffix_(long_suffix) {}

  Result<Value> ParseAll() {
    auto value = ParseValue(0);
    if (!value.ok()) return value;
    SkipSpace();
    if (pos_ != s_.size()) return Bad("has text after its dict: '" + Excerpt() + "'");
    return value;
  }

 private:
  static constexpr int kMaxDepth = 64;  // Python's own parser refuses far less deep nesting than this

  // Up to 20 characters from the error on, printable: messages stay on one line.
  std::string Excerpt() const {
    std::string out;
    for (char c : s_.substr(pos_, 20)) {
      const auto u = static_cast<unsigned char>(c);
      if (u >= 0x20 && u < 0x7f) {
        out += c;
      } else {
        static const char kHex[] = "0123456789abcdef";
        out += std::string("\\x") + kHex[u >> 4] + kHex[u & 15];
      }
    }
    return out;
  }
  Status Syntax(const std::string& what) const {
    return Bad("is not a Python literal: " + what + " at byte " + std::to_string(pos_) + " ('" + Excerpt() + "')");
  }

  // White space, line continuations and comments, as Python's tokenizer skips them.
  void SkipSpace() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f') {
        ++pos_;
      } else if (c == '\\' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '\n') {
        pos_ += 2;
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  bool Take(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  Result<Value> ParseValue(int depth) {
    if (depth > kMaxDepth) return Syntax("nesting too deep");
    SkipSpace();
    if (pos_ >= s_.size()) return Syntax("unexpected end");
    const char c = s_[pos_];
    if (c == '\'' || c == '"') return ParseStrings();
    if (c == '(' || c == '[') return ParseSequence(depth);
    if (c == '{') return ParseDict(depth);
    if (c == '-' || c == '+' || (c >= '0' && c <= '9')) return ParseInt();
    for (const char* name : {"True", "False", "None"}) {
      const size_t n = std::strlen(name);
      if (s_.compare(pos_, n, name) == 0 && !IsNameChar(pos_ + n)) {
        pos_ += n;
        Value v;
        v.kind = name[0] == 'N' ? Value::Kind::kNone : Value::Kind::kBool;
        v.flag = name[0] == 'T';
        return v;
      }
    }
    return Syntax("unexpected character");
  }

  bool IsNameChar(size_t at) const {
    if (at >= s_.size()) return false;
    const auto c = static_cast<unsigned char>(s_[at]);
    return std::isalnum(c) || c == '_' || c >= 0x80;
  }

  // One or more adjacent string literals (Python joins them: '<' 'f4' is '<f4').
  Result<Value> ParseStrings() {
    Value v;
    v.kind = Value::Kind::kString;
    do {
      const char quote = s_[pos_++];
      while (true) {
        if (pos_ >= s_.size() || s_[pos_] == '\n') return Syntax("unterminated string");
        const char c = s_[pos_++];
        if (c == quote) break;
        if (c != '\\') {
          v.text += c;
          continue;
        }
        if (pos_ >= s_.size()) return Syntax("unterminated string");
        const char e = s_[pos_++];
        switch (e) {
          case '\n': break;  // a line continuation inside the string
          case '\\': case '\'': case '"': v.text += e; break;
          case 'n': v.text += '\n'; break;
          case 't': v.text += '\t'; break;
          case 'r': v.text += '\r'; break;
          case '0': v.text += '\0'; break;
          default: v.text += '\\', v.text += e;  // Python keeps unknown escapes as written
        }
      }
      SkipSpace();
    } while (pos_ < s_.size() && (s_[pos_] == '\'' || s_[pos_] == '"'));
    return v;
  }

  // Decimal integers as Python writes them: digits with single '_' between them, an optional
  // sign, no leading zeros but for zero itself; versions 1 and 2 may end them with Python 2's L.
  Result<Value> ParseInt() {
    Value v;
    v.kind = Value::Kind::kInt;
    while (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+')) {
      if (s_[pos_] == '-') v.negative = !v.negative;
      ++pos_;
      SkipSpace();
    }
    const size_t start = pos_;
    bool last_was_digit = false;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c >= '0' && c <= '9') {
        const uint64_t digit = uint64_t(c - '0');
        if (v.magnitude > (std::numeric_limits<uint64_t>::max() - digit) / 10) v.too_large = true;
        v.magnitude = v.magnitude * 10 + digit;
        last_was_digit = true;
      } else if (c == '_' && last_was_digit) {
        last_was_digit = false;
      } else {
        break;
      }
      ++pos_;
    }
    if (pos_ == start || !last_was_digit) return Syntax("malformed number");
    if (s_[start] == '0' && v.magnitude != 0) return Syntax("leading zeros in a number");
    if (long_suffix_ && pos_ < s_.size() && (s_[pos_] == 'L' || s_[pos_] == 'l')) ++pos_;
    if (IsNameChar(pos_)) return Syntax("malformed number");
    return v;
  }

  // Tuples and lists. "(x)" is x itself; "(x,)" and "()" are tuples.
  Result<Value> ParseSequence(int depth) {
    const char close = s_[pos_] == '(' ? ')' : ']';
    const bool parenthesis = close == ')';
    ++pos_;
    Value v;
    v.kind = parenthesis ? Value::Kind::kTuple : Value::Kind::kList;
    bool comma = false;
    while (!Take(close)) {
      if (!v.items.empty() && !comma) return Syntax(std::string("expected ',' or '") + close + "'");
      auto item = ParseValue(depth + 1);
      if (!item.ok()) return item;
      v.items.push_back(std::move(item).value());
      comma = Take(',');
    }
    if (parenthesis && v.items.size() == 1 && !comma) return std::move(v.items[0]);
    return v;
  }

  Result<Value> ParseDict(int depth) {
    ++pos_;
    Value v;
    v.kind = Value::Kind::kDict;
    bool comma = false;
    std::set<std::string> keys;
    while (!Take('}')) {
      if (!v.entries.empty() && !comma) return Syntax("expected ',' or '}'");
      auto key = ParseValue(depth + 1);
      if (!key.ok()) return key;
      if (key->kind != Value::Kind::kString) return Bad("has a key that is not a string");
      if (!Take(':')) return Syntax("expected ':'");
      auto value = ParseValue(depth + 1);
      if (!value.ok()) return value;
      if (!keys.insert(key->text).second) return Bad("repeats the key '" + key->text + "'");
      v.entries.emplace_back(key->text, std::move(value).value());
      comma = Take(',');
    }
    return v;
  }

  const std::string& s_;
  const bool long_suffix_;
  size_t pos_ = 0;
};

}  // namespace

Result<NpyHeader> ParseNpyHeader(const std::string& text, int format_version) {
  if (format_version >= 3) {
    if (!IsUtf8(text)) return Bad("is not valid UTF-8");
  }
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\0') return Bad("holds a NUL byte");
  }
  auto parsed = Parser(text, /*long_suffix=*/format_version <= 2).ParseAll();
  if (!parsed.ok()) return parsed.status();
  const Value& dict = *parsed;
  if (dict.kind != Value::Kind::kDict) return Bad("is not a dict");

  NpyHeader header;
  std::set<std::string> seen;
  for (const auto& [key, value] : dict.entries) {
    seen.insert(key);
    if (key == "descr") {
      if (value.kind != Value::Kind::kString) return Bad("descr is not a plain dtype string (structured dtypes are not supported)");
      header.descr = value.text;
    } else if (key == "fortran_order") {
      if (value.kind != Value::Kind::kBool) return Bad("fortran_order is not True or False");
      header.fortran_order = value.flag;
    } else if (key == "shape") {
      if (value.kind != Value::Kind::kTuple) return Bad("shape is not a tuple");
      for (const Value& dim : value.items) {
        if (dim.kind == Value::Kind::kBool) {  // Python's bool is an int: NumPy takes True as 1
          header.shape.push_back(dim.flag ? 1 : 0);
        } else if (dim.kind != Value::Kind::kInt) {
          return Bad("shape holds something other than integers");
        } else if (dim.negative && dim.magnitude != 0) {
          return Bad("shape has a negative dimension");
        } else if (dim.too_large) {
          return Bad("shape has a dimension too large to store");
        } else {
          header.shape.push_back(dim.magnitude);
        }
      }
    } else {
      return Bad("has the key '" + key + "' (a .npy header holds exactly descr, fortran_order and shape)");
    }
  }
  for (const char* required : {"descr", "fortran_order", "shape"}) {
    if (!seen.count(required)) return Bad(std::string("lacks the key '") + required + "'");
  }
  return header;
}

}  // namespace vkflash::tools
