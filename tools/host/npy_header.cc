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
  // Python's tokenizer refuses a 201st level of open brackets ("too many nested parentheses").
  static constexpr int kMaxBracketLevels = 200;

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

  // `levels`: brackets open around the value.
  Result<Value> ParseValue(int levels) {
    SkipSpace();
    if (pos_ >= s_.size()) return Syntax("unexpected end");
    const char c = s_[pos_];
    if (c == '(' || c == '[' || c == '{') {
      if (levels >= kMaxBracketLevels) return Syntax("too many nested brackets");
      return c == '{' ? ParseDict(levels + 1) : ParseSequence(levels + 1);
    }
    if (c == '-' || c == '+' || (c >= '0' && c <= '9')) return ParseInt();
    if (c == '\'' || c == '"' || StringPrefixLength() > 0) return ParseStrings();
    if (Value v; TakeConstant(v)) return v;
    return Syntax("unexpected character");
  }

  // True, False or None at pos_, taken into `v`.
  bool TakeConstant(Value& v) {
    for (const char* name : {"True", "False", "None"}) {
      const size_t n = std::strlen(name);
      if (s_.compare(pos_, n, name) == 0 && !IsNameChar(pos_ + n)) {
        pos_ += n;
        v.kind = name[0] == 'N' ? Value::Kind::kNone : Value::Kind::kBool;
        v.flag = name[0] == 'T';
        return true;
      }
    }
    return false;
  }

  // The length of a string literal's prefix at pos_ (r, u, b, f, br, rb, fr, rf in either case),
  // 0 if no quote follows one.
  size_t StringPrefixLength() const {
    for (size_t n = 1; n <= 2 && pos_ + n < s_.size(); ++n) {
      if (s_[pos_ + n] != '\'' && s_[pos_ + n] != '"') continue;
      std::string prefix;
      for (size_t i = 0; i < n; ++i) prefix += char(std::tolower(static_cast<unsigned char>(s_[pos_ + i])));
      for (const char* valid : {"r", "u", "b", "f", "br", "rb", "fr", "rf"}) {
        if (prefix == valid) return n;
      }
      return 0;
    }
    return 0;
  }

  bool IsNameChar(size_t at) const {
    if (at >= s_.size()) return false;
    const auto c = static_cast<unsigned char>(s_[at]);
    return std::isalnum(c) || c == '_' || c >= 0x80;
  }

  // One or more adjacent string literals (Python joins them: '<' 'f4' is '<f4'), with Python 3's
  // prefixes, triple quotes and escapes. Bytes literals and f-strings are refused (np.load refuses
  // a header that holds one: neither is a str its literal_eval returns).
  Result<Value> ParseStrings() {
    Value v;
    v.kind = Value::Kind::kString;
    do {
      const size_t prefix_length = StringPrefixLength();
      bool raw = false;
      for (size_t i = 0; i < prefix_length; ++i) {
        const char p = char(std::tolower(static_cast<unsigned char>(s_[pos_ + i])));
        if (p == 'b') return Bad("holds a bytes literal, not a string");
        if (p == 'f') return Bad("holds an f-string, not a literal");
        raw = raw || p == 'r';
      }
      pos_ += prefix_length;
      const char quote = s_[pos_];
      const bool triple = s_.compare(pos_, 3, std::string(3, quote)) == 0;
      pos_ += triple ? 3 : 1;
      while (true) {
        if (pos_ >= s_.size() || (!triple && s_[pos_] == '\n')) return Syntax("unterminated string");
        if (s_[pos_] == quote && (!triple || s_.compare(pos_, 3, std::string(3, quote)) == 0)) {
          pos_ += triple ? 3 : 1;
          break;
        }
        const char c = s_[pos_++];
        if (c != '\\') {
          v.text += c;
        } else if (pos_ >= s_.size()) {
          return Syntax("unterminated string");
        } else if (raw) {  // the backslash stays, and keeps the next character from ending the string
          v.text += c;
          v.text += s_[pos_++];
        } else if (Status escaped = TakeEscape(v.text); !escaped.ok()) {
          return escaped;
        }
      }
      SkipSpace();
    } while (pos_ < s_.size() && (s_[pos_] == '\'' || s_[pos_] == '"' || StringPrefixLength() > 0));
    return v;
  }

  // The escape after a backslash in a string, appended to `text` (code points above 0x7f as
  // UTF-8: no header key or dtype string holds one, so only that they differ matters).
  Status TakeEscape(std::string& text) {
    const char e = s_[pos_++];
    auto hex_digits = [&](size_t count) -> int64_t {
      if (pos_ + count > s_.size()) return -1;
      int64_t value = 0;
      for (size_t i = 0; i < count; ++i) {
        const char h = s_[pos_ + i];
        const int digit = DigitValue(h);
        if (digit < 0) return -1;
        value = value * 16 + digit;
      }
      pos_ += count;
      return value;
    };
    switch (e) {
      case '\n': return Status::Ok();  // a line continuation inside the string
      case '\\': case '\'': case '"': text += e; return Status::Ok();
      case 'a': text += '\a'; return Status::Ok();
      case 'b': text += '\b'; return Status::Ok();
      case 'f': text += '\f'; return Status::Ok();
      case 'n': text += '\n'; return Status::Ok();
      case 'r': text += '\r'; return Status::Ok();
      case 't': text += '\t'; return Status::Ok();
      case 'v': text += '\v'; return Status::Ok();
      case 'x': case 'u': case 'U': {
        const int64_t code = hex_digits(e == 'x' ? 2 : e == 'u' ? 4 : 8);
        if (code < 0 || code > 0x10ffff) return Syntax(std::string("malformed \\") + e + " escape");
        AppendUtf8(text, uint32_t(code));
        return Status::Ok();
      }
      case 'N': return Bad("holds a \\N{...} escape (not supported)");
      default:
        if (e >= '0' && e <= '7') {  // up to three octal digits
          uint32_t code = uint32_t(e - '0');
          for (int i = 0; i < 2 && pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '7'; ++i) {
            code = code * 8 + uint32_t(s_[pos_++] - '0');
          }
          AppendUtf8(text, code);
        } else {
          text += '\\', text += e;  // Python keeps unknown escapes as written
        }
        return Status::Ok();
    }
  }

  // The value of a hexadecimal (or lower-base) digit, -1 for any other character.
  static int DigitValue(char c) {
    const auto u = static_cast<unsigned char>(c);
    return std::isdigit(u) ? u - '0' : std::isxdigit(u) ? std::tolower(u) - 'a' + 10 : -1;
  }

  static void AppendUtf8(std::string& text, uint32_t code) {
    if (code < 0x80) {
      text += char(code);
    } else if (code < 0x800) {
      text += char(0xc0 | (code >> 6)), text += char(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      text += char(0xe0 | (code >> 12)), text += char(0x80 | ((code >> 6) & 0x3f)), text += char(0x80 | (code & 0x3f));
    } else {
      text += char(0xf0 | (code >> 18)), text += char(0x80 | ((code >> 12) & 0x3f));
      text += char(0x80 | ((code >> 6) & 0x3f)), text += char(0x80 | (code & 0x3f));
    }
  }

  // Integers as Python writes them: decimal (no leading zeros but for zero itself), 0x / 0o / 0b,
  // single '_' between digits, after at most one sign (literal_eval takes one unary + or - before a
  // number, not before True or False). Versions 1 and 2 may end them with Python
  // 2's long suffix: NumPy drops an 'L' token that follows a number token (spaces between allowed).
  Result<Value> ParseInt() {
    Value v;
    v.kind = Value::Kind::kInt;
    if (s_[pos_] == '-' || s_[pos_] == '+') {
      v.negative = s_[pos_++] == '-';
      SkipSpace();
    }
    if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) return Syntax("malformed number");
    uint64_t base = 10;
    if (s_[pos_] == '0' && pos_ + 1 < s_.size()) {
      switch (std::tolower(static_cast<unsigned char>(s_[pos_ + 1]))) {
        case 'x': base = 16; break;
        case 'o': base = 8; break;
        case 'b': base = 2; break;
        default: break;
      }
      if (base != 10) {
        pos_ += 2;
        if (pos_ < s_.size() && s_[pos_] == '_') ++pos_;  // 0x_ff is valid
      }
    }
    const size_t start = pos_;
    bool last_was_digit = false;
    while (pos_ < s_.size()) {
      const auto c = static_cast<unsigned char>(s_[pos_]);
      const int digit = DigitValue(char(c));
      if (digit >= 0 && uint64_t(digit) < base) {
        if (v.magnitude > (std::numeric_limits<uint64_t>::max() - uint64_t(digit)) / base) v.too_large = true;
        v.magnitude = v.magnitude * base + uint64_t(digit);
        last_was_digit = true;
      } else if (c == '_' && last_was_digit) {
        last_was_digit = false;
      } else {
        break;
      }
      ++pos_;
    }
    if (pos_ == start || !last_was_digit) return Syntax("malformed number");
    if (base == 10 && s_[start] == '0' && v.magnitude != 0) return Syntax("leading zeros in a number");
    if (long_suffix_) {
      size_t after = pos_;
      while (after < s_.size()) {  // spaces, tabs, form feeds and line continuations: no token
        if (s_[after] == ' ' || s_[after] == '\t' || s_[after] == '\f') {
          ++after;
        } else if (s_.compare(after, 2, "\\\n") == 0) {
          after += 2;
        } else {
          break;
        }
      }
      if (after < s_.size() && s_[after] == 'L' && !IsNameChar(after + 1)) pos_ = after + 1;
    }
    if (IsNameChar(pos_)) return Syntax("malformed number");
    return v;
  }

  // Tuples and lists. "(x)" is x itself; "(x,)" and "()" are tuples.
  Result<Value> ParseSequence(int levels) {
    const char close = s_[pos_] == '(' ? ')' : ']';
    const bool parenthesis = close == ')';
    ++pos_;
    Value v;
    v.kind = parenthesis ? Value::Kind::kTuple : Value::Kind::kList;
    bool comma = false;
    while (!Take(close)) {
      if (!v.items.empty() && !comma) return Syntax(std::string("expected ',' or '") + close + "'");
      auto item = ParseValue(levels);
      if (!item.ok()) return item;
      v.items.push_back(std::move(item).value());
      comma = Take(',');
    }
    if (parenthesis && v.items.size() == 1 && !comma) return std::move(v.items[0]);
    return v;
  }

  Result<Value> ParseDict(int levels) {
    ++pos_;
    Value v;
    v.kind = Value::Kind::kDict;
    bool comma = false;
    std::set<std::string> keys;
    while (!Take('}')) {
      if (!v.entries.empty() && !comma) return Syntax("expected ',' or '}'");
      auto key = ParseValue(levels);
      if (!key.ok()) return key;
      if (key->kind != Value::Kind::kString) return Bad("has a key that is not a string");
      if (!Take(':')) return Syntax("expected ':'");
      auto value = ParseValue(levels);
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
        if (dim.kind != Value::Kind::kInt) {  // also True and False: NumPy wants ints there
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
