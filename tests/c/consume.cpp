// The C ABI from C++: lagless.h compiles as C++11, and a consumer in a group consumes every
// record of a topic. Usage: consume_cpp TOPIC GROUP COUNT
#include <lagless.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

// Throws the error's message, freeing the error.
void check(lagless_error *err, const char *what) {
    if (err == nullptr) return;
    std::string msg = std::string(what) + ": " + lagless_error_message(err);
    lagless_error_destroy(err);
    throw std::runtime_error(msg);
}

struct ConsumerDeleter {
    void operator()(lagless_consumer *c) const { lagless_consumer_destroy(c); }
};
struct MessageDeleter {
    void operator()(lagless_message *m) const { lagless_message_destroy(m); }
};

struct State {
    int assigned_calls = 0;
};

extern "C" int on_assigned(void *opaque, lagless_consumer *, const lagless_tplist *) {
    static_cast<State *>(opaque)->assigned_calls++;
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    const char *bootstrap = std::getenv("LAGLESS_BOOTSTRAP");
    if (bootstrap == nullptr) {
        std::fprintf(stderr, "LAGLESS_BOOTSTRAP is not set\n");
        return 2;
    }
    const long want = std::atol(argv[3]);
    try {
        lagless_config *cfg = lagless_config_new();
        check(lagless_config_set(cfg, "bootstrap.servers", bootstrap), "config");
        check(lagless_config_set(cfg, "group.id", argv[2]), "config");
        check(lagless_config_set(cfg, "auto.offset.reset", "earliest"), "config");
        lagless_consumer *raw = nullptr;
        lagless_error *err = lagless_consumer_new(cfg, &raw);
        lagless_config_destroy(cfg);
        check(err, "consumer");
        std::unique_ptr<lagless_consumer, ConsumerDeleter> consumer(raw);

        State state;
        lagless_rebalance_listener listener{&state, on_assigned, nullptr, nullptr};
        const char *topics[] = {argv[1]};
        check(lagless_consumer_subscribe(consumer.get(), topics, 1, &listener), "subscribe");

        std::set<std::pair<int, long long>> seen;
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (static_cast<long>(seen.size()) < want && std::chrono::steady_clock::now() < deadline) {
            lagless_message *m = nullptr;
            check(lagless_consumer_poll(consumer.get(), 200, &m), "poll");
            if (m == nullptr) continue;
            std::unique_ptr<lagless_message, MessageDeleter> msg(m);
            seen.insert({lagless_message_partition(msg.get()),
                         static_cast<long long>(lagless_message_offset(msg.get()))});
        }
        check(lagless_consumer_commit_sync(consumer.get(), nullptr, 10000), "commit");
        check(lagless_consumer_close(consumer.get(), 10000), "close");
        if (static_cast<long>(seen.size()) != want || state.assigned_calls < 1) {
            std::fprintf(stderr, "consume_cpp: %zu of %ld records, %d assigned calls\n", seen.size(),
                         want, state.assigned_calls);
            return 1;
        }
        std::printf("consume_cpp: ok (%zu records, header version %s)\n", seen.size(), LAGLESS_VERSION);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "consume_cpp: %s\n", e.what());
        return 1;
    }
    return 0;
}
