// A counting CPU allocator for PyTorch: every tensor allocation made while it is
// installed (c10::SetCPUAllocator) is counted, so a step's live tensor bytes and their
// peak are exact. memplan.torch builds this file with torch.utils.cpp_extension.
//
// Each block carries a 64-byte header holding its size, so the deleter needs no table;
// data stays 64-byte aligned (the alignment c10's own CPU allocator gives).
// raw_allocate/raw_deallocate work too (the context is the data pointer).
#include <torch/extension.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

constexpr size_t kHeader = 64;

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_allocs{0};

void note_alloc(int64_t n) {
  int64_t now = g_live.fetch_add(n) + n;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  g_allocs.fetch_add(1);
}

// The context is the data pointer itself (c10 asks that of CPU allocations); the
// header sits just before it.
void counted_free(void* ctx) {
  if (ctx == nullptr) return;
  auto* base = static_cast<char*>(ctx) - kHeader;
  size_t n = 0;
  std::memcpy(&n, base, sizeof(n));
  g_live.fetch_sub(static_cast<int64_t>(n));
  std::free(base);
}

struct CountingAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* base = nullptr;
    // posix_memalign: the block is 64-byte aligned; the data starts one header later.
    if (posix_memalign(&base, kHeader, n + kHeader) != 0 || base == nullptr) {
      TORCH_CHECK(false, "memplan counting allocator: out of memory allocating ", n, " bytes");
    }
    std::memcpy(base, &n, sizeof(n));
    note_alloc(static_cast<int64_t>(n));
    void* data = static_cast<char*>(base) + kHeader;
    return {data, data, &counted_free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counted_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

CountingAllocator g_alloc;
c10::Allocator* g_previous = nullptr;
uint8_t g_priority = 100;

void install() {
  if (g_previous != nullptr) return;
  g_previous = c10::GetCPUAllocator();
  // A priority above any set so far wins; uninstall sets the previous one back with a
  // higher one still.
  c10::SetCPUAllocator(&g_alloc, ++g_priority);
}

void uninstall() {
  if (g_previous == nullptr) return;
  c10::SetCPUAllocator(g_previous, ++g_priority);
  g_previous = nullptr;
}

int64_t live() { return g_live.load(); }
int64_t peak() { return g_peak.load(); }
int64_t allocations() { return g_allocs.load(); }
// Starts a new peak window at the bytes live now.
void reset_peak() { g_peak.store(g_live.load()); }
bool installed() { return g_previous != nullptr; }

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("install", &install);
  m.def("uninstall", &uninstall);
  m.def("installed", &installed);
  m.def("live", &live);
  m.def("peak", &peak);
  m.def("allocations", &allocations);
  m.def("reset_peak", &reset_peak);
}
