// XLA FFI handlers of a Stan model's log density, for adaptmc.targets.stan.ffi.
//
// A compiled JAX program calls these directly (jax.ffi.ffi_call), without Python: one call
// evaluates a batch of points `theta: (..., dim)` (every chain's, under vmap) through the C
// interface of adaptmc_stan.cpp. A program names its model by a small integer id (an
// attribute), not by a pointer, so that the same program in another process is the same
// program (JAX's compilation cache). Every evaluation is counted, per model.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "xla/ffi/api/ffi.h"

extern "C" {
int adaptmc_log_density_gradient(void* model, int count, const double* theta, double* lp,
                                 double* grad, int propto, int jacobian, char** err);
int adaptmc_log_density(void* model, int count, const double* theta, double* lp, int propto,
                        int jacobian, char** err);
int adaptmc_num_unconstrained(void* model);
}

namespace ffi = xla::ffi;

namespace {

struct Entry {
  void* model = nullptr;  // null once released
  std::atomic<int64_t> gradients{0};
  std::atomic<int64_t> values{0};
};

std::mutex registry_mutex;
std::vector<std::unique_ptr<Entry>> registry;  // by id; entries never move or go away

Entry* lookup(int64_t id) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  if (id < 0 || id >= static_cast<int64_t>(registry.size())) return nullptr;
  Entry* entry = registry[static_cast<size_t>(id)].get();
  return entry->model == nullptr ? nullptr : entry;
}

// `id`'s entry and the number of points in `theta: (..., dim)`, or an error.
ffi::Error batch(int64_t id, const ffi::Buffer<ffi::F64>& theta, Entry** entry,
                 int64_t* count) {
  *entry = lookup(id);
  if (*entry == nullptr) return ffi::Error::InvalidArgument("no Stan model with this id");
  auto dims = theta.dimensions();
  const int64_t dim = adaptmc_num_unconstrained((*entry)->model);
  if (dims.size() == 0 || dims.back() != dim) {
    return ffi::Error::InvalidArgument("the points' last axis is not the model's dimension");
  }
  *count = static_cast<int64_t>(theta.element_count()) / dim;
  return ffi::Error::Success();
}

ffi::Error gradient_impl(ffi::Buffer<ffi::F64> theta, ffi::ResultBuffer<ffi::F64> lp,
                         ffi::ResultBuffer<ffi::F64> grad, int64_t id, int64_t propto,
                         int64_t jacobian) {
  Entry* entry = nullptr;
  int64_t count = 0;
  ffi::Error error = batch(id, theta, &entry, &count);
  if (!error.success()) return error;
  adaptmc_log_density_gradient(entry->model, static_cast<int>(count),
                               theta.typed_data(), lp->typed_data(), grad->typed_data(),
                               static_cast<int>(propto), static_cast<int>(jacobian), nullptr);
  entry->gradients.fetch_add(count, std::memory_order_relaxed);
  return ffi::Error::Success();
}

ffi::Error value_impl(ffi::Buffer<ffi::F64> theta, ffi::ResultBuffer<ffi::F64> lp, int64_t id,
                      int64_t propto, int64_t jacobian) {
  Entry* entry = nullptr;
  int64_t count = 0;
  ffi::Error error = batch(id, theta, &entry, &count);
  if (!error.success()) return error;
  adaptmc_log_density(entry->model, static_cast<int>(count), theta.typed_data(),
                      lp->typed_data(), static_cast<int>(propto), static_cast<int>(jacobian),
                      nullptr);
  entry->values.fetch_add(count, std::memory_order_relaxed);
  return ffi::Error::Success();
}

}  // namespace

// theta: (..., dim) -> lp: (...), grad: (..., dim); a rejected point: -inf, zero gradient.
XLA_FFI_DEFINE_HANDLER_SYMBOL(adaptmc_ffi_log_density_gradient, gradient_impl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Ret<ffi::Buffer<ffi::F64>>()
                                  .Ret<ffi::Buffer<ffi::F64>>()
                                  .Attr<int64_t>("model")
                                  .Attr<int64_t>("propto")
                                  .Attr<int64_t>("jacobian"));

// theta: (..., dim) -> lp: (...), the value alone (no reverse pass).
XLA_FFI_DEFINE_HANDLER_SYMBOL(adaptmc_ffi_log_density, value_impl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Ret<ffi::Buffer<ffi::F64>>()
                                  .Attr<int64_t>("model")
                                  .Attr<int64_t>("propto")
                                  .Attr<int64_t>("jacobian"));

extern "C" {

// The id a compiled program names `model` by (the first model registered is 0).
int64_t adaptmc_ffi_register(void* model) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry.push_back(std::make_unique<Entry>());
  registry.back()->model = model;
  return static_cast<int64_t>(registry.size()) - 1;
}

// Forget `id`'s model (before it is freed): a program still naming it gets an error.
void adaptmc_ffi_release(int64_t id) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  if (id >= 0 && id < static_cast<int64_t>(registry.size())) {
    registry[static_cast<size_t>(id)]->model = nullptr;
  }
}

// Evaluations through the handlers so far: out[0] gradients, out[1] values alone.
void adaptmc_ffi_counts(int64_t id, int64_t* out) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  out[0] = out[1] = 0;
  if (id >= 0 && id < static_cast<int64_t>(registry.size())) {
    out[0] = registry[static_cast<size_t>(id)]->gradients.load();
    out[1] = registry[static_cast<size_t>(id)]->values.load();
  }
}

}  // extern "C"
