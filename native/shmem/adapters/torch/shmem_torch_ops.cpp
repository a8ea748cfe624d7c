// torch.ops.hyper_parallel.shmem_*: symmetric memory for CPU torch tensors. The PE is the
// process's (hyper_parallel.shmem.acquire() initializes it); tensors from shmem_empty live on
// the symmetric heap and are freed explicitly with shmem_free (collective), never by torch.
// Errors raise RuntimeError("[hp <CODE> (<n>)] <message>"); hyper_parallel.shmem turns them
// into HpError.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <hyper_parallel/shmem/shmem.h>

#include <cstdint>
#include <string>

namespace {

namespace shmem = hp::shmem;

void check(const hp::Status& status) {
  TORCH_CHECK(status.is_ok(), "[hp ", hp::to_string(status.code()), " (",
              static_cast<std::uint32_t>(status.code()), ")] ", status.message());
}

void check_cpu_contiguous(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), "[hp INVALID_ARGUMENT (1)] ", what, " must be a CPU tensor");
  TORCH_CHECK(t.is_contiguous(), "[hp INVALID_ARGUMENT (1)] ", what, " must be contiguous");
}

std::size_t nbytes(const at::Tensor& t) { return std::size_t(t.numel()) * t.element_size(); }

void check_same_bytes(const at::Tensor& dest, const at::Tensor& src) {
  TORCH_CHECK(nbytes(dest) == nbytes(src), "[hp SHAPE_MISMATCH (3)] dest has ", nbytes(dest),
              " bytes, src ", nbytes(src), ": they must be equal");
}

std::uint64_t* signal_word(const at::Tensor& slot) {
  check_cpu_contiguous(slot, "the signal slot");
  TORCH_CHECK(slot.scalar_type() == at::kLong && slot.numel() >= 1,
              "[hp DTYPE_MISMATCH (4)] a signal slot is an int64 (uint64 bits) tensor element");
  return reinterpret_cast<std::uint64_t*>(slot.data_ptr());
}

shmem::SignalOp signal_op(const std::string& op) {
  TORCH_CHECK(op == "set" || op == "add", "[hp INVALID_ARGUMENT (1)] op='", op,
              "': expected 'set' or 'add'");
  return op == "set" ? shmem::SignalOp::kSet : shmem::SignalOp::kAdd;
}

shmem::Cmp cmp_of(const std::string& cmp) {
  static const std::pair<const char*, shmem::Cmp> kNames[] = {
      {"eq", shmem::Cmp::kEq}, {"ne", shmem::Cmp::kNe}, {"gt", shmem::Cmp::kGt},
      {"ge", shmem::Cmp::kGe}, {"lt", shmem::Cmp::kLt}, {"le", shmem::Cmp::kLe}};
  for (const auto& [name, value] : kNames) {
    if (cmp == name) return value;
  }
  TORCH_CHECK(false, "[hp INVALID_ARGUMENT (1)] cmp='", cmp, "': expected eq ne gt ge lt le");
}

at::Tensor shmem_empty(at::IntArrayRef size, at::ScalarType dtype, int64_t alignment) {
  const auto options = at::TensorOptions().dtype(dtype).device(at::kCPU);
  std::int64_t numel = 1;
  for (std::int64_t d : size) numel *= d;
  void* ptr = nullptr;
  check(shmem::align(std::size_t(alignment), std::size_t(numel) * at::elementSize(dtype), &ptr));
  return at::from_blob(ptr, size, options);  // no deleter: shmem_free releases it
}

void shmem_free(const at::Tensor& t) { check(shmem::free(t.data_ptr())); }

void shmem_put(const at::Tensor& dest, const at::Tensor& src, int64_t pe) {
  check_cpu_contiguous(dest, "dest");
  check_cpu_contiguous(src, "src");
  check_same_bytes(dest, src);
  check(shmem::put(dest.data_ptr(), src.data_ptr(), nbytes(src), int(pe)));
}

void shmem_put_signal(const at::Tensor& dest, const at::Tensor& src, const at::Tensor& slot,
                      int64_t value, const std::string& op, int64_t pe) {
  check_cpu_contiguous(dest, "dest");
  check_cpu_contiguous(src, "src");
  check_same_bytes(dest, src);
  check(shmem::put_signal(dest.data_ptr(), src.data_ptr(), nbytes(src), signal_word(slot),
                          std::uint64_t(value), signal_op(op), int(pe)));
}

void shmem_get(const at::Tensor& dest, const at::Tensor& src, int64_t pe) {
  check_cpu_contiguous(dest, "dest");
  check_cpu_contiguous(src, "src");
  check_same_bytes(dest, src);
  check(shmem::get(dest.data_ptr(), src.data_ptr(), nbytes(dest), int(pe)));
}

void shmem_signal(const at::Tensor& slot, int64_t value, int64_t pe, const std::string& op) {
  std::uint64_t* word = signal_word(slot);
  check(signal_op(op) == shmem::SignalOp::kSet
            ? shmem::atomic_set(word, std::uint64_t(value), int(pe))
            : shmem::atomic_add(word, std::uint64_t(value), int(pe)));
}

int64_t shmem_wait_signal(const at::Tensor& slot, int64_t value, const std::string& cmp) {
  std::uint64_t seen = 0;
  check(shmem::signal_wait_until(signal_word(slot), cmp_of(cmp), std::uint64_t(value), &seen));
  return int64_t(seen);
}

void shmem_barrier() { check(shmem::barrier_all()); }

void shmem_all_gather(const at::Tensor& dest, const at::Tensor& src) {
  check_cpu_contiguous(dest, "dest");
  check_cpu_contiguous(src, "src");
  TORCH_CHECK(nbytes(dest) == nbytes(src) * std::size_t(shmem::n_pes()),
              "[hp SHAPE_MISMATCH (3)] all_gather: dest has ", nbytes(dest),
              " bytes, needs n_pes x ", nbytes(src));
  check(shmem::fcollect(shmem::kTeamWorld, dest.data_ptr(), src.data_ptr(), nbytes(src)));
}

int64_t shmem_my_pe() { return shmem::my_pe(); }
int64_t shmem_n_pes() { return shmem::n_pes(); }

}  // namespace

TORCH_LIBRARY_FRAGMENT(hyper_parallel, m) {
  m.def("shmem_empty(int[] size, ScalarType dtype, int alignment=0) -> Tensor", &shmem_empty);
  m.def("shmem_free(Tensor t) -> ()", &shmem_free);
  m.def("shmem_put(Tensor dest, Tensor src, int pe) -> ()", &shmem_put);
  m.def("shmem_put_signal(Tensor dest, Tensor src, Tensor signal, int value, str op, int pe) -> ()",
        &shmem_put_signal);
  m.def("shmem_get(Tensor(a!) dest, Tensor src, int pe) -> ()", &shmem_get);
  m.def("shmem_signal(Tensor slot, int value, int pe, str op) -> ()", &shmem_signal);
  m.def("shmem_wait_signal(Tensor slot, int value, str cmp) -> int", &shmem_wait_signal);
  m.def("shmem_barrier() -> ()", &shmem_barrier);
  m.def("shmem_all_gather(Tensor(a!) dest, Tensor src) -> ()", &shmem_all_gather);
  m.def("shmem_my_pe() -> int", &shmem_my_pe);
  m.def("shmem_n_pes() -> int", &shmem_n_pes);
}
