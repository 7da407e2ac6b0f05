#include "hw/selfcheck.h"

#include <cstring>

#include <fmt/format.h>

#include "hw/ifc.h"

namespace cxv::hw {

namespace {

bool bit_set(const std::vector<std::byte>& buf, std::size_t i) {
    return (std::to_integer<unsigned>(buf[i / 8]) >> (7 - i % 8)) & 1;
}

template <typename L>
void check_layout(selfcheck_result& r) {
    ++r.layouts;
    std::vector<std::byte> buf(L::size_bytes);
    ifc::for_each_field<L>([&]<typename F>(F) {
        ++r.fields;
        if constexpr (F::kind == ifc::field_kind::scalar) {
            std::memset(buf.data(), 0, buf.size());
            ifc::set<F>(buf.data(), F::max_value);
            bool ok = ifc::get<F>(buf.data()) == F::max_value;
            for (std::size_t i = 0; ok && i < L::size_bits; ++i) {
                const bool inside = i >= F::bit_offset && i < F::bit_offset + F::bit_width;
                ok = bit_set(buf, i) == inside;
            }
            if (!ok) r.failures.push_back(fmt::format("{}.{}", L::ifc_name, F::name));
            ++r.scalars_checked;
        }
    });
}

}  // namespace

selfcheck_result run_layout_selfcheck() {
    selfcheck_result r;
#define CXV_SELFCHECK_LAYOUT(cpp, prm) check_layout<ifc::cpp>(r);
    CXV_IFC_LAYOUTS(CXV_SELFCHECK_LAYOUT)
#undef CXV_SELFCHECK_LAYOUT
    return r;
}

}  // namespace cxv::hw
