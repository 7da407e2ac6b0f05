#include "tools/cxv/holders.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace cxv::tool {

namespace {

// The target of a /proc/PID/fd/N link ("" when unreadable).
std::string fd_target(const std::string& pid, const std::string& fd) { return link_target("/proc/" + pid + "/fd/" + fd); }

}  // namespace

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::string s;
    std::getline(in, s);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> out;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return out;
    while (const dirent* e = ::readdir(d)) {
        if (e->d_name[0] != '.') out.emplace_back(e->d_name);
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

std::string link_target(const std::string& path) {
    char buf[4096];
    const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

std::string link_base(const std::string& path) {
    const std::string t = link_target(path);
    return t.substr(t.rfind('/') + 1);
}

std::string holder::text() const { return fmt::format("{} ({})", pid, comm); }

std::vector<holder> group_holders(const std::string& group) {
    std::vector<holder> out;
    if (group.empty()) return out;
    const std::string node = "/dev/vfio/" + group;
    for (const auto& pid : entries("/proc")) {
        if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
        for (const auto& fd : entries("/proc/" + pid + "/fd")) {
            if (fd_target(pid, fd) == node) {
                out.push_back({static_cast<pid_t>(std::stol(pid)), read_text("/proc/" + pid + "/comm")});
                break;
            }
        }
    }
    return out;
}

std::string join(const std::vector<holder>& v) {
    std::string out;
    for (const auto& h : v) out += (out.empty() ? "" : ", ") + h.text();
    return out;
}

std::vector<std::string> listening_sockets(pid_t pid, int type) {
    // The process's sockets by inode ("socket:[INODE]")...
    std::set<std::string> inodes;
    const std::string p = std::to_string(pid);
    for (const auto& fd : entries("/proc/" + p + "/fd")) {
        const std::string t = fd_target(p, fd);
        if (t.rfind("socket:[", 0) == 0 && t.back() == ']') inodes.insert(t.substr(8, t.size() - 9));
    }
    // ... and unix(7)'s table: "Num RefCount Protocol Flags Type St Inode Path"; a
    // listening socket has __SO_ACCEPTCON (0x10000) in its flags.
    std::vector<std::string> out;
    std::ifstream in("/proc/net/unix");
    std::string line;
    std::getline(in, line);  // the heading
    while (std::getline(in, line)) {
        std::istringstream f(line);
        std::string num, refs, proto, flags, type_text, st, inode, path;
        if (!(f >> num >> refs >> proto >> flags >> type_text >> st >> inode >> path)) continue;
        if ((std::stoul(flags, nullptr, 16) & 0x10000) == 0 || std::stoi(type_text, nullptr, 16) != type ||
            !inodes.count(inode) || path[0] != '/') {
            continue;
        }
        out.push_back(path);
    }
    return out;
}

}  // namespace cxv::tool
