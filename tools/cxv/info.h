// cxv info: bring-up, a description of the function (text, or one JSON object), teardown.
// Exit status 0 only when every port came up and every firmware page came back.
#pragma once

#include <chrono>
#include <string>

namespace cxv::tool {

int print_info(const std::string& bdf, bool json, std::chrono::milliseconds port_timeout);

}  // namespace cxv::tool
