// hyper_parallel._hp_shmem: the symmetric-memory calls hyper_parallel.shmem builds on. Buffers
// cross as addresses (symmetric memory) or Python buffers (local memory); every call that can
// block releases the GIL, and errors raise HpError after the GIL is back.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "raise_status.h"
#include "shmem/shmem.h"

namespace py = pybind11;
namespace shmem = hp::shmem;
using hp::python::blocking;
using hp::python::check;

namespace {

void* address(std::uintptr_t value) { return reinterpret_cast<void*>(value); }

shmem::Cmp parse_cmp(const std::string& cmp) {
  static const std::pair<const char*, shmem::Cmp> kNames[] = {
      {"eq", shmem::Cmp::kEq}, {"ne", shmem::Cmp::kNe}, {"gt", shmem::Cmp::kGt},
      {"ge", shmem::Cmp::kGe}, {"lt", shmem::Cmp::kLt}, {"le", shmem::Cmp::kLe}};
  for (const auto& [name, value] : kNames) {
    if (cmp == name) return value;
  }
  hp::python::raise(hp::Status::error(hp::ErrorCode::kInvalidArgument,
                                      "cmp='{}': expected eq, ne, gt, ge, lt or le", cmp));
}

// acc[i] += in[i] for T (hp::shmem::ReduceFn).
template <typename T>
void add_into(void* acc, const void* in, std::size_t count, void*) {
  auto* a = static_cast<T*>(acc);
  const auto* b = static_cast<const T*>(in);
  for (std::size_t i = 0; i < count; ++i) a[i] = T(a[i] + b[i]);
}

// The sum's combine for a numpy dtype name (float32/64, int32/64, uint32/64).
shmem::ReduceFn sum_of(const std::string& dtype, std::size_t* element_bytes) {
  static const struct {
    const char* name;
    shmem::ReduceFn fn;
    std::size_t bytes;
  } kSums[] = {{"float32", &add_into<float>, 4},        {"float64", &add_into<double>, 8},
               {"int32", &add_into<std::int32_t>, 4},   {"int64", &add_into<std::int64_t>, 8},
               {"uint32", &add_into<std::uint32_t>, 4}, {"uint64", &add_into<std::uint64_t>, 8}};
  for (const auto& s : kSums) {
    if (dtype == s.name) {
      *element_bytes = s.bytes;
      return s.fn;
    }
  }
  hp::python::raise(hp::Status::error(
      hp::ErrorCode::kDTypeMismatch,
      "a scan of {}: expected float32, float64, int32, int64, uint32 or uint64", dtype));
}

shmem::SignalOp parse_op(const std::string& op) {
  if (op == "set") return shmem::SignalOp::kSet;
  if (op == "add") return shmem::SignalOp::kAdd;
  hp::python::raise(
      hp::Status::error(hp::ErrorCode::kInvalidArgument, "op='{}': expected 'set' or 'add'", op));
}

}  // namespace

PYBIND11_MODULE(_hp_shmem, m) {
  m.doc() = "HyperParallel symmetric memory (native layer of hyper_parallel.shmem)";
  m.def("init", [] { blocking([] { return shmem::init(); }); });
  m.def("finalize", [] { blocking([] { return shmem::finalize(); }); });
  m.def("initialized", &shmem::initialized);
  m.def("my_pe", &shmem::my_pe);
  m.def("n_pes", &shmem::n_pes);
  m.def("heap_size", &shmem::heap_size);
  m.def("transport_name", [](int pe) { return std::string(shmem::transport_name(pe)); });
  m.def("malloc", [](std::size_t bytes, std::size_t alignment) {
    void* out = nullptr;
    blocking([&] { return shmem::align(alignment, bytes, &out); });
    return reinterpret_cast<std::uintptr_t>(out);
  });
  m.def("free", [](std::uintptr_t addr) { blocking([&] { return shmem::free(address(addr)); }); });
  m.def("barrier_all", [] { blocking([] { return shmem::barrier_all(); }); });
  m.def("put", [](std::uintptr_t dest, py::buffer source, int pe) {
    py::buffer_info info = source.request();
    const std::size_t bytes = std::size_t(info.size) * std::size_t(info.itemsize);
    blocking([&] { return shmem::put(address(dest), info.ptr, bytes, pe); });
  });
  m.def("put_signal", [](std::uintptr_t dest, py::buffer source, std::uintptr_t sig,
                         std::uint64_t value, const std::string& op, int pe) {
    py::buffer_info info = source.request();
    const std::size_t bytes = std::size_t(info.size) * std::size_t(info.itemsize);
    const shmem::SignalOp signal_op = parse_op(op);
    blocking([&] {
      return shmem::put_signal(address(dest), info.ptr, bytes,
                               static_cast<std::uint64_t*>(address(sig)), value, signal_op, pe);
    });
  });
  m.def("get", [](py::buffer dest, std::uintptr_t source, int pe) {
    py::buffer_info info = dest.request(/*writable=*/true);
    const std::size_t bytes = std::size_t(info.size) * std::size_t(info.itemsize);
    blocking([&] { return shmem::get(info.ptr, address(source), bytes, pe); });
  });
  m.def("signal", [](std::uintptr_t sig, std::uint64_t value, int pe, const std::string& op) {
    const shmem::SignalOp signal_op = parse_op(op);
    auto* word = static_cast<std::uint64_t*>(address(sig));
    blocking([&] {
      return signal_op == shmem::SignalOp::kSet ? shmem::atomic_set(word, value, pe)
                                                : shmem::atomic_add(word, value, pe);
    });
  });
  m.def("wait_signal", [](std::uintptr_t sig, std::uint64_t value, const std::string& cmp) {
    const shmem::Cmp c = parse_cmp(cmp);
    std::uint64_t seen = 0;
    blocking([&] {
      return shmem::signal_wait_until(static_cast<std::uint64_t*>(address(sig)), c, value, &seen);
    });
    return seen;
  });
  m.def("fcollect", [](std::uintptr_t dest, std::uintptr_t source, std::size_t bytes) {
    blocking(
        [&] { return shmem::fcollect(shmem::kTeamWorld, address(dest), address(source), bytes); });
  });
  m.def("quiet", [] { blocking([] { return shmem::quiet(); }); });
  m.def("sum_scan", [](std::uintptr_t dest, std::uintptr_t source, std::size_t count,
                       const std::string& dtype, bool inclusive) {
    std::size_t element = 0;
    const shmem::ReduceFn fn = sum_of(dtype, &element);
    blocking([&] {
      return shmem::scan_with(shmem::kTeamWorld, address(dest), address(source), count, element, fn,
                              nullptr, inclusive);
    });
  });
}
