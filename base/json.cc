#include "base/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace cxv {

std::string json_string(std::string_view s) {
    std::string out = "\"";
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += ch;
                }
        }
    }
    out += '"';
    return out;
}

void json_writer::separate() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (!empty_.empty()) {
        if (!empty_.back()) out_ += ',';
        empty_.back() = false;
        if (indented_) {
            out_ += '\n';
            out_.append(2 * empty_.size(), ' ');
        }
    }
}

void json_writer::key(std::string_view k) {
    separate();
    out_ += json_string(k);
    out_ += indented_ ? ": " : ":";
    after_key_ = true;
}

void json_writer::scalar(std::string_view text) {
    separate();
    out_ += text;
}

void json_writer::value(double d) {
    if (!std::isfinite(d)) {
        null();
        return;
    }
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, d);
    scalar(std::string_view(buf, static_cast<std::size_t>(r.ptr - buf)));
}

void json_writer::open(char c) {
    separate();
    out_ += c;
    empty_.push_back(true);
}

void json_writer::close(char c) {
    const bool was_empty = empty_.back();
    empty_.pop_back();
    if (!was_empty && indented_) {
        out_ += '\n';
        out_.append(2 * empty_.size(), ' ');
    }
    out_ += c;
}

}  // namespace cxv
