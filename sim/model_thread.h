// The threads that make the emulated functions act. A card's engines run by themselves;
// the model's run on threads of the process that hosts it, each of which calls the
// rounds of the functions it serves (device.h) one after the other, and backs off when
// none has anything to do (spin, unless pinned to one CPU with the application; then
// yield; then sleep growing to 1 ms, woken early by a frame from the fabric).
//
// By default every function of a process is served by one model thread (`shared()`):
// two functions of one process then talk without a thread switch, and the model takes
// one core, not one per function, on the 2-core machines it is mostly run on. A function
// created with `model_thread=own` gets a thread of its own instead (more throughput
// when several functions are busy at once on a machine with the cores for it).
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace cxv::sim {

class device;

class model_thread {
public:
    // The process's shared model thread (never destroyed; its thread runs while it
    // serves a function).
    static model_thread& shared();

    model_thread() = default;
    ~model_thread();
    model_thread(const model_thread&) = delete;
    model_thread& operator=(const model_thread&) = delete;

    // From now on the thread runs `d`'s rounds (started if it was not running).
    void serve(device* d);
    // Returns once the thread no longer runs `d`'s rounds (it stops when it serves none).
    void drop(device* d);

private:
    void run();

    std::mutex mu_;  // held by the thread for each sweep over the functions and each wait
    std::atomic<unsigned> callers_{0};  // serve()/drop() calls waiting for mu_
    std::vector<device*> devices_;
    std::thread thread_;
    bool running_ = false;
};

}  // namespace cxv::sim
