// Who holds a VFIO group, from /proc as lsof(8) finds it: the processes with /dev/vfio/N
// open, and the UNIX sockets a holder listens on (a cxvd's, to ask it instead). Also the
// two small file readers cxv's subcommands share for sysfs and /proc.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace cxv::tool {

// The first line of a file, without trailing newline or blanks ("" when unreadable).
std::string read_text(const std::string& path);
// A directory's entries but dot files, sorted.
std::vector<std::string> entries(const std::string& dir);
// A symbolic link's target ("" when unreadable), and its last component.
std::string link_target(const std::string& path);
std::string link_base(const std::string& path);

struct holder {
    pid_t pid = 0;
    std::string comm;
    std::string text() const;  // "1234 (cxvd)"
};
// The processes holding /dev/vfio/GROUP open (those whose fds this process may read:
// its own uid's, or all as root).
std::vector<holder> group_holders(const std::string& group);
std::string join(const std::vector<holder>& v);
// The paths of the UNIX sockets of `type` (SOCK_SEQPACKET: a cxvd's) process `pid` listens
// on (/proc/PID/fd and /proc/net/unix).
std::vector<std::string> listening_sockets(pid_t pid, int type);

}  // namespace cxv::tool
