// A strict JSON parser (RFC 8259) for the tests, independent of base/json.h: it
// rejects what the grammar does not allow (trailing commas, raw control characters in
// strings, bad escapes, leading zeros, NaN, trailing text) and builds a tree to look
// values up in.
#pragma once

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cxv::test {

struct json_value {
    enum kind_t { null_k, bool_k, number_k, string_k, array_k, object_k } kind = null_k;
    bool boolean = false;
    double number = 0;
    std::string string;
    std::vector<json_value> array;
    std::map<std::string, json_value> object;

    const json_value* get(const std::string& key) const {
        const auto it = object.find(key);
        return kind == object_k && it != object.end() ? &it->second : nullptr;
    }
};

class json_parser {
public:
    explicit json_parser(const std::string& text) : s_(text) {}
    // The document, or false (and where it failed in error()).
    bool parse(json_value* out) {
        ws();
        if (!value(out, 0)) return false;
        ws();
        return i_ == s_.size() || fail("trailing text");
    }
    const std::string& error() const { return error_; }

private:
    bool fail(const char* what) {
        if (error_.empty()) error_ = std::string(what) + " at offset " + std::to_string(i_);
        return false;
    }
    void ws() {
        while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
    }
    bool literal(const char* word) {
        const std::string w = word;
        if (s_.compare(i_, w.size(), w) != 0) return fail("bad literal");
        i_ += w.size();
        return true;
    }
    static bool digit(char c) { return c >= '0' && c <= '9'; }
    bool number(json_value* v) {
        const std::size_t start = i_;
        if (s_[i_] == '-') ++i_;
        if (i_ >= s_.size()) return fail("bad number");
        if (s_[i_] == '0') {
            ++i_;
        } else if (digit(s_[i_])) {
            while (i_ < s_.size() && digit(s_[i_])) ++i_;
        } else {
            return fail("bad number");
        }
        if (i_ < s_.size() && s_[i_] == '.') {
            ++i_;
            if (i_ >= s_.size() || !digit(s_[i_])) return fail("bad fraction");
            while (i_ < s_.size() && digit(s_[i_])) ++i_;
        }
        if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
            ++i_;
            if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
            if (i_ >= s_.size() || !digit(s_[i_])) return fail("bad exponent");
            while (i_ < s_.size() && digit(s_[i_])) ++i_;
        }
        v->kind = json_value::number_k;
        v->number = std::strtod(s_.substr(start, i_ - start).c_str(), nullptr);
        return true;
    }
    bool string(std::string* out) {
        if (s_[i_] != '"') return fail("expected a string");
        ++i_;
        for (;;) {
            if (i_ >= s_.size()) return fail("unterminated string");
            const char c = s_[i_++];
            if (c == '"') return true;
            if (static_cast<unsigned char>(c) < 0x20) return fail("raw control character in a string");
            if (c != '\\') {
                *out += c;
                continue;
            }
            if (i_ >= s_.size()) return fail("bad escape");
            const char e = s_[i_++];
            switch (e) {
                case '"':
                    *out += '"';
                    break;
                case '\\':
                    *out += '\\';
                    break;
                case '/':
                    *out += '/';
                    break;
                case 'b':
                    *out += '\b';
                    break;
                case 'f':
                    *out += '\f';
                    break;
                case 'n':
                    *out += '\n';
                    break;
                case 'r':
                    *out += '\r';
                    break;
                case 't':
                    *out += '\t';
                    break;
                case 'u': {
                    if (i_ + 4 > s_.size()) return fail("bad \\u escape");
                    unsigned cp = 0;
                    for (int k = 0; k < 4; ++k) {
                        const char h = s_[i_++];
                        cp <<= 4;
                        if (digit(h))
                            cp |= static_cast<unsigned>(h - '0');
                        else if (h >= 'a' && h <= 'f')
                            cp |= static_cast<unsigned>(h - 'a' + 10);
                        else if (h >= 'A' && h <= 'F')
                            cp |= static_cast<unsigned>(h - 'A' + 10);
                        else
                            return fail("bad \\u escape");
                    }
                    if (cp >= 0x80) return fail("\\u escape above ASCII (not needed here)");
                    *out += static_cast<char>(cp);
                    break;
                }
                default:
                    return fail("bad escape");
            }
        }
    }
    bool value(json_value* v, int depth) {
        if (depth > 64) return fail("too deep");
        if (i_ >= s_.size()) return fail("unexpected end");
        const char c = s_[i_];
        if (c == '{') {
            ++i_;
            v->kind = json_value::object_k;
            ws();
            if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
            for (;;) {
                ws();
                std::string key;
                if (i_ >= s_.size() || !string(&key)) return fail("expected a key");
                ws();
                if (i_ >= s_.size() || s_[i_] != ':') return fail("expected ':'");
                ++i_;
                ws();
                if (v->object.count(key)) return fail("duplicate key");
                if (!value(&v->object[key], depth + 1)) return false;
                ws();
                if (i_ < s_.size() && s_[i_] == ',') {
                    ++i_;
                    continue;
                }
                if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
                return fail("expected ',' or '}'");
            }
        }
        if (c == '[') {
            ++i_;
            v->kind = json_value::array_k;
            ws();
            if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
            for (;;) {
                ws();
                v->array.emplace_back();
                if (!value(&v->array.back(), depth + 1)) return false;
                ws();
                if (i_ < s_.size() && s_[i_] == ',') {
                    ++i_;
                    continue;
                }
                if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
                return fail("expected ',' or ']'");
            }
        }
        if (c == '"') {
            v->kind = json_value::string_k;
            return string(&v->string);
        }
        if (c == 't') return v->kind = json_value::bool_k, v->boolean = true, literal("true");
        if (c == 'f') return v->kind = json_value::bool_k, literal("false");
        if (c == 'n') return literal("null");
        return number(v);
    }

    const std::string& s_;
    std::size_t i_ = 0;
    std::string error_;
};

}  // namespace cxv::test
