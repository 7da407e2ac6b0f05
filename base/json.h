// A small JSON writer (RFC 8259) for every JSON cxv's programs print or write (cxv
// --json, cxv-perf's and the benchmarks' result files): objects, arrays, escaped strings,
// numbers in their shortest round-trip form (non-finite ones as null).
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cxv {

// s as a JSON string literal, quotes included: '"' and '\\' escaped, control characters
// as \n, \t, ... or \u00XX; other bytes (UTF-8 included) as they are.
std::string json_string(std::string_view s);

class json_writer {
public:
    enum class layout { indented, one_line };
    // indented: a member or element per line, two spaces deep (files people read);
    // one_line: no whitespace at all (a line a script reads).
    explicit json_writer(layout l = layout::indented) : indented_(l == layout::indented) {}

    void begin_object() { open('{'); }
    void end_object() { close('}'); }
    void begin_array() { open('['); }
    void end_array() { close(']'); }
    // The next value is this member of the enclosing object.
    void key(std::string_view k);

    void value(std::string_view s) { scalar(json_string(s)); }
    void value(const char* s) { value(std::string_view(s)); }
    void value(const std::string& s) { value(std::string_view(s)); }
    void value(bool b) { scalar(b ? "true" : "false"); }
    void value(double d);
    template <std::integral T>
    void value(T v) {
        scalar(std::to_string(v));
    }
    void null() { scalar("null"); }

    template <class T>
    void member(std::string_view k, const T& v) {
        key(k);
        value(v);
    }

    // The document so far (complete once every object and array is closed).
    const std::string& str() const { return out_; }

private:
    void separate();
    void scalar(std::string_view text);
    void open(char c);
    void close(char c);

    std::string out_;
    std::vector<bool> empty_;  // per open container: nothing written in it yet
    bool after_key_ = false;
    bool indented_ = true;
};

}  // namespace cxv
