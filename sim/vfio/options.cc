#include "sim/vfio/options.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>

#include <fmt/format.h>

namespace cxv::sim::vfio {

namespace {

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return {};
    const auto e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

// Unsigned integer in decimal or 0x-hex, bounded.
bool parse_uint(const std::string& text, std::uint64_t max, std::uint64_t& out) {
    if (text.empty() || text[0] == '-') return false;
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 0);
    if (errno != 0 || end == text.c_str() || *end != '\0' || v > max) return false;
    out = v;
    return true;
}

error bad(const std::string& key, const std::string& value, const char* expected) {
    return error{EINVAL, fmt::format("setting {} = '{}': expected {}", key, value, expected)};
}

template <typename T>
status set_uint(const std::string& key, const std::string& value, std::uint64_t min,
                std::uint64_t max, T& field) {
    std::uint64_t v = 0;
    if (!parse_uint(value, max, v) || v < min) {
        return bad(key, value, fmt::format("an integer in [{}, {}]", min, max).c_str());
    }
    field = static_cast<T>(v);
    return ok_status();
}

status set_fraction(const std::string& key, const std::string& value, double& field) {
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(v >= 0 && v <= 1)) return bad(key, value, "a fraction in [0, 1]");
    field = v;
    return ok_status();
}

status set_ms(const std::string& key, const std::string& value, std::uint64_t min,
              std::chrono::milliseconds& field) {
    std::uint64_t v = 0;
    if (!parse_uint(value, 3'600'000, v) || v < min) {
        return bad(key, value, "a number of milliseconds");
    }
    field = std::chrono::milliseconds(v);
    return ok_status();
}

template <std::size_t N>
status set_bytes(const std::string& key, const std::string& value, char sep,
                 std::array<std::uint8_t, N>& field, unsigned base) {
    std::array<std::uint8_t, N> out{};
    std::size_t pos = 0;
    for (std::size_t i = 0; i < N; ++i) {
        const auto next = value.find(sep, pos);
        const std::string part = value.substr(pos, next == std::string::npos ? std::string::npos
                                                                               : next - pos);
        if (part.empty() || part.size() > 3 || (next == std::string::npos) != (i == N - 1)) {
            return bad(key, value, sep == ':' ? "a MAC address aa:bb:cc:dd:ee:ff" : "an IPv4 address");
        }
        char* end = nullptr;
        const unsigned long v = std::strtoul(part.c_str(), &end, base);
        if (*end != '\0' || v > 255) {
            return bad(key, value, sep == ':' ? "a MAC address aa:bb:cc:dd:ee:ff" : "an IPv4 address");
        }
        out[i] = static_cast<std::uint8_t>(v);
        pos = next + 1;
    }
    field = out;
    return ok_status();
}

// The device ID of a PF's VFs (Linux's mlx5 ID table: one VF ID per ConnectX
// generation up to ConnectX-6, the family VF 0x101e after it).
std::uint16_t vf_device_id(std::uint16_t pf) {
    switch (pf) {
    case 0x1013: case 0x1015: case 0x1017: case 0x1019: case 0x101b: return static_cast<std::uint16_t>(pf + 1);
    case 0xa2d2: return 0xa2d3;
    default: return 0x101e;
    }
}

using setter = std::function<status(options&, const std::string& key, const std::string& value)>;

const std::map<std::string, setter>& setters() {
    static const std::map<std::string, setter> table = {
        {"devices", [](options& o, const std::string& k, const std::string& v) {
             return set_uint(k, v, 1, 64, o.devices);
         }},
        {"port_type", [](options& o, const std::string& k, const std::string& v) -> status {
             if (v == "ib" || v == "infiniband") {
                 o.model.port = port_type::IB;
             } else if (v == "eth" || v == "ethernet") {
                 o.model.port = port_type::ETHERNET;
             } else {
                 return bad(k, v, "ib or eth");
             }
             return ok_status();
         }},
        {"first_bdf", [](options& o, const std::string& k, const std::string& v) -> status {
             auto a = pci_address::parse(v);
             if (!a) return bad(k, v, "a PCI address DDDD:BB:DD.F");
             o.first_address = a.value();
             return ok_status();
         }},
        {"first_group", [](options& o, const std::string& k, const std::string& v) {
             return set_uint(k, v, 0, 1u << 20, o.first_group);
         }},
        {"numa_node", [](options& o, const std::string& k, const std::string& v) -> status {
             if (v == "-1") {
                 o.numa_node = -1;
                 return ok_status();
             }
             return set_uint(k, v, 0, 1023, o.numa_node);
         }},
        {"device_id", [](options& o, const std::string& k, const std::string& v) {
             return set_uint(k, v, 0, 0xffff, o.model.device_id);
         }},
        {"subsystem_vendor_id", [](options& o, const std::string& k, const std::string& v) {
             return set_uint(k, v, 0, 0xffff, o.model.subsystem_vendor_id);
         }},
        {"subsystem_id", [](options& o, const std::string& k, const std::string& v) {
             return set_uint(k, v, 0, 0xffff, o.model.subsystem_id);
         }},
        {"fw_version", [](options& o, const std::string& k, const std::string& v) -> status {
             unsigned a = 0, b = 0, c = 0;
             char tail = 0;
             if (std::sscanf(v.c_str(), "%u.%u.%u%c", &a, &b, &c, &tail) != 3 || a > 0xffff ||
                 b > 0xffff || c > 0xffff) {
                 return bad(k, v, "major.minor.subminor");
             }
             o.model.fw_rev_major = static_cast<std::uint16_t>(a);
             o.model.fw_rev_minor = static_cast<std::uint16_t>(b);
             o.model.fw_rev_subminor = static_cast<std::uint16_t>(c);
             return ok_status();
         }},
        {"psid", [](options& o, const std::string& k, const std::string& v) -> status {
             if (v.empty() || v.size() > 16) return bad(k, v, "1 to 16 characters");
             o.model.psid = v;
             return ok_status();
         }},
        {"bar0_size", [](options& o, const std::string& k, const std::string& v) -> status {
             std::size_t size = 0;
             if (auto s = set_uint(k, v, 1u << 20, std::uint64_t{1} << 30, size); !s) return s;
             if (size & (size - 1)) return bad(k, v, "a power of two between 1 MiB and 1 GiB");
             o.model.bar0_size = size;
             return ok_status();
         }},
        {"msix_vectors", [](options& o, const std::string& k, const std::string& v) {
             // The MSI-X table (BAR0 0x2000) must end before the PBA (0x3000).
             return set_uint(k, v, 1, 256, o.model.msix_vectors);
         }},
        {"boot_pages", [](options& o, const std::string& k, const std::string& v) {
             return set_uint(k, v, 0, 1u << 20, o.model.boot_pages);
         }},
        {"init_pages", [](options& o, const std::string& k, const std::string& v) {
             return set_uint(k, v, 0, 1u << 20, o.model.init_pages);
         }},
        {"page_request_batch", [](options& o, const std::string& k, const std::string& v) {
             return set_uint(k, v, 1, 1u << 16, o.model.page_request_batch);
         }},
        {"boot_time_ms", [](options& o, const std::string& k, const std::string& v) {
             return set_ms(k, v, 0, o.model.boot_time);
         }},
        {"health_period_ms", [](options& o, const std::string& k, const std::string& v) {
             return set_ms(k, v, 1, o.model.health_period);
         }},
        {"clock_khz", [](options& o, const std::string& k, const std::string& v) {
             return set_uint(k, v, 1000, 10'000'000, o.model.clock_khz);
         }},
        {"clock_ppm", [](options& o, const std::string& k, const std::string& v) -> status {
             // A signed offset, within what any crystal is off by (and then some).
             char* end = nullptr;
             errno = 0;
             const long ppm = std::strtol(v.c_str(), &end, 10);
             if (v.empty() || *end != '\0' || errno != 0 || ppm < -100'000 || ppm > 100'000) {
                 return bad(k, v, "parts per million, -100000 to 100000");
             }
             o.model.clock_ppm = static_cast<std::int32_t>(ppm);
             return ok_status();
         }},
        {"link_up_ms", [](options& o, const std::string& k, const std::string& v) {
             return set_ms(k, v, 0, o.model.link_up_time);
         }},
        {"sm_sweep_ms", [](options& o, const std::string& k, const std::string& v) {
             return set_ms(k, v, 0, o.model.sm_sweep_time);
         }},
        {"lid", [](options& o, const std::string& k, const std::string& v) {
             return set_uint(k, v, 1, 0xbfff, o.model.lid);  // unicast LIDs
         }},
        {"node_guid", [](options& o, const std::string& k, const std::string& v) {
             return set_uint(k, v, 1, ~std::uint64_t{0}, o.model.node_guid);
         }},
        {"mac", [](options& o, const std::string& k, const std::string& v) {
             return set_bytes(k, v, ':', o.model.mac, 16);
         }},
        {"ipv4", [](options& o, const std::string& k, const std::string& v) {
             return set_bytes(k, v, '.', o.model.ipv4, 10);
         }},
        {"fabric", [](options& o, const std::string& k, const std::string& v) -> status {
             if (v.empty()) return bad(k, v, "a fabric name");
             o.model.fabric = v;
             return ok_status();
         }},
        {"fabric_dir", [](options& o, const std::string&, const std::string& v) -> status {
             o.model.fabric_dir = v;  // empty: the in-process segment `fabric`
             return ok_status();
         }},
        {"fabric_index", [](options& o, const std::string& k, const std::string& v) {
             return set_uint(k, v, 0, kMaxFabricIndex, o.fabric_index);
         }},
        {"pcap", [](options& o, const std::string&, const std::string& v) -> status {
             o.model.pcap = v;
             return ok_status();
         }},
        {"link_drop", [](options& o, const std::string& k, const std::string& v) {
             return set_fraction(k, v, o.model.faults.drop);
         }},
        {"link_duplicate", [](options& o, const std::string& k, const std::string& v) {
             return set_fraction(k, v, o.model.faults.duplicate);
         }},
        {"link_reorder", [](options& o, const std::string& k, const std::string& v) {
             return set_fraction(k, v, o.model.faults.reorder);
         }},
        {"link_corrupt", [](options& o, const std::string& k, const std::string& v) {
             return set_fraction(k, v, o.model.faults.corrupt);
         }},
        {"link_delay_us", [](options& o, const std::string& k, const std::string& v) -> status {
             std::uint64_t us = 0;
             if (auto s = set_uint(k, v, 0, 10'000'000, us); !s) return s;
             o.model.faults.delay = std::chrono::microseconds(us);
             return ok_status();
         }},
        {"link_seed", [](options& o, const std::string& k, const std::string& v) {
             return set_uint(k, v, 0, ~std::uint64_t{0}, o.model.faults.seed);
         }},
        {"write_combining", [](options& o, const std::string& k, const std::string& v) -> status {
             if (v != "on" && v != "off") return bad(k, v, "on or off");
             o.model.write_combining = v == "on";
             return ok_status();
         }},
        {"kernel_driver", [](options& o, const std::string& k, const std::string& v) -> status {
             if (v != "vfio-pci" && v != "mlx5_core" && v != "none") return bad(k, v, "vfio-pci, mlx5_core or none");
             o.kernel_driver = v == "none" ? "" : v;
             return ok_status();
         }},
        {"sriov_totalvfs", [](options& o, const std::string& k, const std::string& v) -> status {
             unsigned n = 0;
             if (auto s = set_uint(k, v, 0, 64, n); !s) return s;
             o.model.sriov_totalvfs = static_cast<std::uint16_t>(n);
             return ok_status();
         }},
        {"vfio_pci_enable_sriov", [](options& o, const std::string& k, const std::string& v) -> status {
             if (v != "Y" && v != "N" && v != "1" && v != "0") return bad(k, v, "Y or N");
             o.vfio_pci_enable_sriov = v == "Y" || v == "1";
             return ok_status();
         }},
        {"netdev", [](options& o, const std::string& k, const std::string& v) -> status {
             if (v != "up" && v != "down") return bad(k, v, "up or down");
             o.netdev_up = v == "up";
             return ok_status();
         }},
        {"model_thread", [](options& o, const std::string& k, const std::string& v) -> status {
             if (v != "shared" && v != "own") return bad(k, v, "shared or own");
             o.model.own_thread = v == "own";
             return ok_status();
         }},
    };
    return table;
}

}  // namespace

std::string pci_address::str() const {
    return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, device, function);
}

result<pci_address> pci_address::parse(const std::string& text) {
    unsigned d = 0, b = 0, dev = 0, f = 0;
    int n = 0;
    if (std::sscanf(text.c_str(), "%4x:%2x:%2x.%1x%n", &d, &b, &dev, &f, &n) != 4 ||
        static_cast<std::size_t>(n) != text.size() || dev > 0x1f || f > 7) {
        return error{EINVAL, fmt::format("'{}' is not a PCI address DDDD:BB:DD.F", text)};
    }
    return pci_address{static_cast<std::uint16_t>(d), static_cast<std::uint8_t>(b),
                       static_cast<std::uint8_t>(dev), static_cast<std::uint8_t>(f)};
}

status options::set(const std::string& key, const std::string& value) {
    const auto& table = setters();
    auto it = table.find(key);
    if (it == table.end()) return error{EINVAL, fmt::format("unknown setting '{}'", key)};
    return it->second(*this, key, trim(value));
}

status options::load_file(const std::string& path, const std::string& only_prefix) {
    std::ifstream in(path);
    if (!in) return error{ENOENT, fmt::format("cannot read config file {}", path)};
    std::string line;
    for (unsigned n = 1; std::getline(in, line); ++n) {
        if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        line = trim(line);
        if (line.empty()) continue;
        const auto eq = line.find('=');
        if (eq == std::string::npos) {
            return error{EINVAL, fmt::format("{}:{}: expected key = value", path, n)};
        }
        const std::string key = trim(line.substr(0, eq));
        if (key.rfind(only_prefix, 0) != 0) {
            return error{EINVAL, fmt::format("{}:{}: only {}* settings here", path, n, only_prefix)};
        }
        if (auto s = set(key, line.substr(eq + 1)); !s) {
            return error{EINVAL, fmt::format("{}:{}: {}", path, n, s.error().message)};
        }
    }
    return ok_status();
}

status options::load_environment() {
    if (const char* file = std::getenv("CXV_SIM_CONFIG"); file && *file) {
        if (auto s = load_file(file); !s) return s;
    }
    return load_variables();
}

status options::load_variables() {
    for (const auto& [key, fn] : setters()) {
        if (const char* v = std::getenv(environment_name(key).c_str()); v && *v) {
            if (auto s = fn(*this, key, trim(v)); !s) {
                return error{EINVAL, fmt::format("{} (from {})", s.error().message, environment_name(key))};
            }
        }
    }
    return ok_status();
}

result<std::vector<function_spec>> options::functions() const {
    std::vector<function_spec> out;
    const unsigned first_devfn = first_address.device * 8u + first_address.function;
    const unsigned vfs = model.sriov_totalvfs;
    const unsigned total = devices * (1 + vfs);
    if (first_devfn + total > 256) {
        return error{EINVAL, fmt::format("{} functions from {} do not fit on bus {:02x}",
                                         total, first_address.str(), first_address.bus)};
    }
    if (!model.fabric_dir.empty() && total > kFunctionsPerProcess) {
        return error{EINVAL, fmt::format("at most {} functions per process on a shared fabric ({} asked, VFs "
                                         "included)",
                                         kFunctionsPerProcess, total)};
    }
    for (unsigned i = 0; i < total; ++i) {
        function_spec f;
        const unsigned devfn = first_devfn + i;
        f.address = first_address;
        f.address.device = static_cast<std::uint8_t>(devfn / 8);
        f.address.function = static_cast<std::uint8_t>(devfn % 8);
        f.iommu_group = first_group + i;
        f.numa_node = numa_node;
        f.model = model;
        f.kernel_driver = kernel_driver;
        f.netdev_up = netdev_up;
        f.vfio_pci_enable_sriov = vfio_pci_enable_sriov;
        if (i < devices && vfs != 0) {
            // A PF: its VFs follow every PF, vfs of them each.
            f.model.sriov_vf_device_id = vf_device_id(model.device_id);
            f.model.sriov_vf_offset = static_cast<std::uint16_t>(devices + i * vfs - i);
            f.model.sriov_vf_stride = 1;
        } else if (i >= devices) {
            // A VF: its own model with the VF's identity; no binding until it exists.
            f.physfn = static_cast<int>((i - devices) / vfs);
            f.vf_index = (i - devices) % vfs;
            f.model.device_id = vf_device_id(model.device_id);
            f.model.sriov_totalvfs = 0;
            f.model.virtual_function = true;
            f.kernel_driver = "";
            f.netdev_up = false;
        }
        // The n-th function on the fabric: this process's place (fabric_index) times the
        // functions a process may have, plus i.
        const unsigned n = fabric_index * kFunctionsPerProcess + i;
        f.address.bus = static_cast<std::uint8_t>(f.address.bus + fabric_index);
        f.iommu_group += fabric_index * kFunctionsPerProcess;
        f.model.node_guid += n;
        f.model.lid = static_cast<std::uint16_t>((f.model.lid - 1 + n) % 0xbfff + 1);  // unicast LIDs
        std::uint64_t mac = 0;
        for (const auto b : f.model.mac) mac = (mac << 8) | b;
        mac += n;
        for (std::size_t j = 0; j < 6; ++j) f.model.mac[j] = static_cast<std::uint8_t>(mac >> (8 * (5 - j)));
        if (fabric_index == 0) {
            f.model.ipv4[3] = static_cast<std::uint8_t>(f.model.ipv4[3] + i);
        } else {
            // Link-local, derived from the MAC as the driver's default is.
            f.model.ipv4 = {169, 254, static_cast<std::uint8_t>(1 + f.model.mac[4] % 254), f.model.mac[5]};
        }
        out.push_back(std::move(f));
    }
    return out;
}

std::vector<std::pair<std::string, std::string>> options::settings() const {
    const auto& m = model;
    return {
        {"devices", std::to_string(devices)},
        {"port_type", m.port == port_type::ETHERNET ? "eth" : "ib"},
        {"first_bdf", first_address.str()},
        {"first_group", std::to_string(first_group)},
        {"numa_node", std::to_string(numa_node)},
        {"device_id", fmt::format("0x{:04x}", m.device_id)},
        {"subsystem_vendor_id", fmt::format("0x{:04x}", m.subsystem_vendor_id)},
        {"subsystem_id", fmt::format("0x{:04x}", m.subsystem_id)},
        {"fw_version", fmt::format("{}.{}.{}", m.fw_rev_major, m.fw_rev_minor, m.fw_rev_subminor)},
        {"psid", m.psid},
        {"bar0_size", std::to_string(m.bar0_size)},
        {"msix_vectors", std::to_string(m.msix_vectors)},
        {"boot_pages", std::to_string(m.boot_pages)},
        {"init_pages", std::to_string(m.init_pages)},
        {"page_request_batch", std::to_string(m.page_request_batch)},
        {"boot_time_ms", std::to_string(m.boot_time.count())},
        {"health_period_ms", std::to_string(m.health_period.count())},
        {"clock_khz", std::to_string(m.clock_khz)},
        {"clock_ppm", std::to_string(m.clock_ppm)},
        {"link_up_ms", std::to_string(m.link_up_time.count())},
        {"sm_sweep_ms", std::to_string(m.sm_sweep_time.count())},
        {"lid", std::to_string(m.lid)},
        {"node_guid", fmt::format("0x{:016x}", m.node_guid)},
        {"mac", fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m.mac[0], m.mac[1], m.mac[2],
                            m.mac[3], m.mac[4], m.mac[5])},
        {"ipv4", fmt::format("{}.{}.{}.{}", m.ipv4[0], m.ipv4[1], m.ipv4[2], m.ipv4[3])},
        {"fabric", m.fabric},
        {"fabric_dir", m.fabric_dir},
        {"fabric_index", std::to_string(fabric_index)},
        {"pcap", m.pcap},
        {"link_drop", fmt::format("{}", m.faults.drop)},
        {"link_duplicate", fmt::format("{}", m.faults.duplicate)},
        {"link_reorder", fmt::format("{}", m.faults.reorder)},
        {"link_corrupt", fmt::format("{}", m.faults.corrupt)},
        {"link_delay_us", std::to_string(m.faults.delay.count())},
        {"link_seed", std::to_string(m.faults.seed)},
        {"write_combining", m.write_combining ? "on" : "off"},
        {"kernel_driver", kernel_driver.empty() ? "none" : kernel_driver},
        {"netdev", netdev_up ? "up" : "down"},
        {"sriov_totalvfs", std::to_string(m.sriov_totalvfs)},
        {"vfio_pci_enable_sriov", vfio_pci_enable_sriov ? "Y" : "N"},
        {"model_thread", m.own_thread ? "own" : "shared"},
    };
}

std::string environment_name(const std::string& key) {
    std::string out = "CXV_SIM_";
    for (char c : key) out += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    return out;
}

const std::vector<std::string>& setting_keys() {
    static const std::vector<std::string> keys = [] {
        std::vector<std::string> k;
        for (const auto& [key, fn] : setters()) k.push_back(key);
        return k;
    }();
    return keys;
}

}  // namespace cxv::sim::vfio
