// The Python module's router (tools/python/buffer_router.hpp) allocates nothing after its
// first call of a shape, whatever options the call gives: the Router's promise. This
// binary counts every global operator new around repeated calls.

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <vector>

#include "buffer_router.hpp"

namespace {
std::atomic<long> allocations{0};
}

void* operator new(std::size_t size) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {

namespace py = moe_routing::python;

py::array_argument matrix(const void* data, py::element_kind kind, std::int64_t rows, std::int64_t cols) {
  py::array_argument array;
  array.given = true, array.data = data, array.kind = kind, array.rank = 2;
  array.shape[0] = rows, array.shape[1] = cols, array.strides[0] = cols, array.strides[1] = 1;
  return array;
}

py::array_argument vector(const void* data, py::element_kind kind, std::int64_t length) {
  py::array_argument array;
  array.given = true, array.data = data, array.kind = kind, array.rank = 1;
  array.shape[0] = length, array.strides[0] = 1;
  return array;
}

/// Allocations made by `calls` routing calls after a first one, for each batch size.
long allocations_of(py::buffer_router& router, py::routing_arguments arguments, int max_tokens, int experts) {
  std::mt19937 rng(3);
  std::vector<float> scores(static_cast<std::size_t>(max_tokens) * experts);
  for (float& s : scores) s = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  std::vector<float> weights(static_cast<std::size_t>(max_tokens) * router.top_k());
  std::vector<std::int32_t> ids(weights.size());
  long made = 0;
  for (int tokens : {max_tokens, 1, max_tokens / 2}) {
    arguments.scores = matrix(scores.data(), py::element_kind::float32, tokens, experts);
    // Two requests (one for a single token): R <= n, as the module requires.
    const std::vector<std::int32_t> segments =
        tokens >= 2 ? std::vector<std::int32_t>{0, tokens / 2, tokens} : std::vector<std::int32_t>{0, tokens};
    const std::vector<std::uint8_t> mask(static_cast<std::size_t>(tokens), 1);
    if (arguments.segments.given)
      arguments.segments = vector(segments.data(), py::element_kind::int32, static_cast<std::int64_t>(segments.size()));
    if (arguments.mask.given) arguments.mask = vector(mask.data(), py::element_kind::uint8, tokens);
    const auto out_weights = matrix(weights.data(), py::element_kind::float32, tokens, router.top_k());
    const auto out_ids = matrix(ids.data(), py::element_kind::int32, tokens, router.top_k());
    router.route(arguments, out_weights, out_ids);  // a first call may size buffers (unbound router)
    const long before = allocations.load();
    for (int call = 0; call < 20; ++call) router.route(arguments, out_weights, out_ids);
    made += allocations.load() - before;
  }
  return made;
}

}  // namespace

int main() {
  const int n = 200, experts = 128;
  std::vector<float> bias(experts, 0.01f);
  std::vector<std::int64_t> placement(experts);
  for (int e = 0; e < experts; ++e) placement[static_cast<std::size_t>(e)] = e % 4;
  int failures = 0;
  for (const char* policy : {"topk(k=8)", "oea(k0=4,k=8)", "xshare(k0=1,m=16,k=8)", "lynx_lat(d=16,k=8)"}) {
    py::routing_arguments plain;
    py::routing_arguments everything;
    everything.scoring = "sigmoid";
    everything.bias = vector(bias.data(), py::element_kind::float32, experts);
    everything.n_group = 8, everything.topk_group = 4;
    everything.placement = vector(placement.data(), py::element_kind::int64, experts);
    everything.padding = "repeat";
    everything.scale = 2.5;
    everything.segments.given = true;  // filled per batch size by allocations_of
    everything.mask.given = true;
    const moe_routing::workspace_shape bound{n, experts, 8};
    py::buffer_router fixed(policy, 0, &bound);
    py::buffer_router growing(policy, 0);
    for (auto* router : {&fixed, &growing}) {
      for (const auto& arguments : {plain, everything}) {
        const long made = allocations_of(*router, arguments, n, experts);
        if (made != 0) {
          std::fprintf(stderr, "%s (%s router, %s): %ld allocations in 60 calls after the first\n", policy,
                       router == &fixed ? "bound" : "growing", arguments.bias.given ? "every option" : "no options",
                       made);
          ++failures;
        }
      }
    }
  }
  std::printf("%s\n", failures == 0 ? "no allocation after the first call" : "allocations found");
  return failures == 0 ? 0 : 1;
}
