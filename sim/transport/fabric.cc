#include "sim/transport/fabric.h"

namespace cxv::sim {

fabric& fabric::instance() {
    static fabric* f = new fabric();  // never destroyed: devices may outlive statics
    return *f;
}

void fabric::attach(const std::string& net, bool ethernet, std::uint32_t addr, std::shared_ptr<inbox> box) {
    std::lock_guard lock(mu_);
    ports_[key{net, ethernet, addr}] = std::move(box);
}

void fabric::detach(const std::string& net, bool ethernet, std::uint32_t addr, const inbox* box) {
    std::lock_guard lock(mu_);
    const auto it = ports_.find(key{net, ethernet, addr});
    if (it != ports_.end() && it->second.get() == box) ports_.erase(it);
}

bool fabric::deliver(const std::string& net, bool ethernet, std::uint32_t addr, wire::packet&& p) {
    std::shared_ptr<inbox> box;
    {
        std::lock_guard lock(mu_);
        const auto it = ports_.find(key{net, ethernet, addr});
        if (it == ports_.end()) return false;
        box = it->second;
    }
    box->push(std::move(p));
    return true;
}

}  // namespace cxv::sim
