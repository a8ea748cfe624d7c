// TaskArgs: the arguments of one task (or one ChipWorker::run): tensors tagged with how the task
// uses them, 64-bit scalars, and explicit predecessor tasks.
//
// Tags (the orchestrator infers dependencies from them, see tensor_map.h):
//   INPUT            read only
//   OUTPUT           a new tensor the runtime allocates from the heap ring (give dtype + shape;
//                    the kernel sees its data pointer, submit() returns the view)
//   INOUT            read and written in place
//   OUTPUT_EXISTING  written entirely, in caller-provided memory (old contents not read)
//   NO_DEP           passed to the kernel, never a dependency (the caller orders it)
// Tensors and scalars are indexed separately, in the order they were added.
//
// Dump markers (diagnostics, OrchestratorConfig.diagnostics.dump_args = 1): dump() marks every
// tensor argument of the task, dump({i, ...}) the tensor arguments with those indices; a
// marked argument is captured before and after the task runs. Level 2 captures every argument
// of every task, marked or not; level 0 ignores the markers.
#ifndef HYPER_PARALLEL_RUNTIME_TASK_ARGS_H_
#define HYPER_PARALLEL_RUNTIME_TASK_ARGS_H_

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/api.h"
#include "common/status.h"
#include "common/tensor_view.h"
#include "runtime/task_types.h"

namespace hp::runtime {

enum class ArgTag : std::uint8_t { kInput, kOutput, kInOut, kOutputExisting, kNoDep };

namespace detail {

// A vector of trivially copyable T with room for N elements in place: TaskArgs of a few
// arguments allocate nothing (user code builds one per submit, and submit copies it into the
// task's slot). Beyond N it moves to the heap, like std::vector (growth doubles).
// An element with copy_to(T*) and copy_over(T*) members is copied by them (a TensorArg:
// TensorView::copy_to): copy_over() onto a place of the in-place room that held an element
// already (local_written_), copy_to() elsewhere.
template <typename T, std::size_t N>
class InlineVector {
  static_assert(std::is_trivially_copyable_v<T> && N > 0);

 public:
  InlineVector() noexcept = default;
  InlineVector(const InlineVector& other) { copy(other); }
  InlineVector(InlineVector&& other) noexcept { take(other); }
  InlineVector& operator=(const InlineVector& other) {
    if (this != &other) copy(other);
    return *this;
  }
  InlineVector& operator=(InlineVector&& other) noexcept {
    if (this != &other) {
      free_heap();
      take(other);
    }
    return *this;
  }
  ~InlineVector() { free_heap(); }

  std::size_t size() const noexcept { return size_; }
  bool full() const noexcept { return size_ == capacity(); }  // the next append grows it
  bool empty() const noexcept { return size_ == 0; }
  T* data() noexcept { return heap_ != nullptr ? heap_ : local(); }
  const T* data() const noexcept { return heap_ != nullptr ? heap_ : local(); }
  T* begin() noexcept { return data(); }
  T* end() noexcept { return data() + size_; }
  const T* begin() const noexcept { return data(); }
  const T* end() const noexcept { return data() + size_; }
  T& operator[](std::size_t i) noexcept { return data()[i]; }
  const T& operator[](std::size_t i) const noexcept { return data()[i]; }
  T& at(std::size_t i) {
    if (i >= size_) throw std::out_of_range("TaskArgs: argument index out of range");
    return data()[i];
  }
  const T& at(std::size_t i) const {
    if (i >= size_) throw std::out_of_range("TaskArgs: argument index out of range");
    return data()[i];
  }

  void clear() noexcept { size_ = 0; }
  // Room for one more element at the end, for the caller to write (T is trivially copyable:
  // writing its bytes makes it). When full(), the elements move (references to them dangle).
  T* append_uninitialized() {
    if (size_ == capacity()) grow(capacity() * 2);
    return data() + size_++;
  }
  void push_back(const T& value) {
    if (size_ == capacity()) {
      const T copy = value;  // `value` may live in the storage grow() frees
      grow(capacity() * 2);
      ::new (static_cast<void*>(data() + size_++)) T(copy);
      return;
    }
    ::new (static_cast<void*>(data() + size_++)) T(value);
  }
  template <typename It>
  void assign(It first, It last) {
    size_ = 0;
    append(first, last);
  }
  template <typename It>
  void append(It first, It last) {
    const auto n = static_cast<std::size_t>(std::distance(first, last));
    if (size_ + n > capacity()) grow(std::max(size_ + n, capacity() * 2));
    for (T* out = data() + size_; first != last; ++first, ++out)
      ::new (static_cast<void*>(out)) T(*first);
    size_ += static_cast<std::uint32_t>(n);
  }

 private:
  T* local() noexcept { return std::launder(reinterpret_cast<T*>(local_)); }
  const T* local() const noexcept { return std::launder(reinterpret_cast<const T*>(local_)); }
  std::size_t capacity() const noexcept { return heap_ != nullptr ? heap_capacity_ : N; }
  void grow(std::size_t capacity) {
    if (capacity > UINT32_MAX) throw std::length_error("TaskArgs: too many arguments");
    T* bigger = std::allocator<T>().allocate(capacity);
    if (size_ > 0) std::memcpy(static_cast<void*>(bigger), data(), size_ * sizeof(T));
    free_heap();
    heap_ = bigger;
    heap_capacity_ = static_cast<std::uint32_t>(capacity);
  }
  void free_heap() noexcept {
    if (heap_ != nullptr) std::allocator<T>().deallocate(heap_, heap_capacity_);
    heap_ = nullptr;
  }
  // The submit path copies a TaskArgs per task, most of its vectors empty or short: element by
  // element (a fixed-size copy the compiler inlines) up to N, one memcpy beyond.
  void copy(const InlineVector& other) {
    size_ = 0;
    if (other.size_ == 0) return;
    if (other.size_ > capacity()) grow(other.size_);
    T* out = data();
    const T* in = other.data();
    if (other.size_ <= N) {
      const std::uint32_t written = heap_ == nullptr ? local_written_ : 0;
#pragma GCC unroll 4
      for (std::size_t i = 0; i < N; ++i) {
        if (i == other.size_) break;
        if constexpr (requires(const T& from, T* to) { from.copy_to(to), from.copy_over(to); }) {
          if (i < written) {
            in[i].copy_over(out + i);
          } else {
            in[i].copy_to(out + i);
          }
        } else {
          std::memcpy(static_cast<void*>(out + i), in + i, sizeof(T));
        }
      }
      if (heap_ == nullptr) local_written_ = std::max(local_written_, other.size_);
    } else {
      std::memcpy(static_cast<void*>(out), in, other.size_ * sizeof(T));
    }
    size_ = other.size_;
  }
  void take(InlineVector& other) noexcept {  // this holds no heap storage
    size_ = other.size_;
    if (other.heap_ != nullptr) {
      heap_ = other.heap_;
      heap_capacity_ = other.heap_capacity_;
      other.heap_ = nullptr;
    } else if (size_ > 0) {
      std::memcpy(static_cast<void*>(local()), other.local(), size_ * sizeof(T));
    }
    other.size_ = 0;
  }

  // A new vector stores 16 bytes of zeros (user code builds a TaskArgs, four of these, per
  // submit, and the submitting thread is bound by its stores).
  T* heap_ = nullptr;  // null: the elements are in local_ (N of them fit)
  std::uint32_t size_ = 0;
  std::uint32_t local_written_ = 0;  // leading places of local_ that copy() wrote an element to
  std::uint32_t heap_capacity_;      // set with heap_
  alignas(T) std::byte local_[N * sizeof(T)];
};

}  // namespace detail

HP_API std::string_view to_string(ArgTag tag) noexcept;

class HP_API TaskArgs {
 public:
  struct TensorArg {
    TensorView view;
    ArgTag tag;
    // *out = *this (TensorView::copy_to); copy_over() for an `out` that holds an argument.
    void copy_to(TensorArg* out) const noexcept {
      view.copy_to(&out->view);
      out->tag = tag;
    }
    void copy_over(TensorArg* out) const noexcept {
      view.copy_over(&out->view);
      out->tag = tag;
    }
  };

  TaskArgs& input(const TensorView& tensor) { return add(tensor, ArgTag::kInput); }
  TaskArgs& inout(const TensorView& tensor) { return add(tensor, ArgTag::kInOut); }
  TaskArgs& output_existing(const TensorView& tensor) {
    return add(tensor, ArgTag::kOutputExisting);
  }
  TaskArgs& no_dep(const TensorView& tensor) { return add(tensor, ArgTag::kNoDep); }
  // A runtime-allocated output (contiguous, 64-byte aligned).
  TaskArgs& output(DType dtype, std::span<const std::int64_t> shape) {
    return add(TensorView(nullptr, dtype, shape), ArgTag::kOutput);
  }
  TaskArgs& output(DType dtype, std::initializer_list<std::int64_t> shape) {
    return output(dtype, std::span<const std::int64_t>(shape.begin(), shape.size()));
  }
  // Any trivially copyable value of at most 8 bytes, stored as its bits.
  // Its dtype is remembered (for argument dumps) when T is int8, uint8, int32, int64, float or
  // double; other types are opaque 64-bit patterns (scalar_dtype() is empty).
  template <typename T>
  TaskArgs& scalar(T value) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(std::uint64_t));
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    scalars_.push_back({bits, scalar_dtype_of<T>()});
    return *this;
  }
  // A scalar as its bits and remembered dtype (none: opaque), as scalar_bits() and scalar_dtype()
  // return them: for copies of another TaskArgs' scalars (a replay, a chip's mailbox).
  TaskArgs& scalar_bits_of(std::uint64_t bits, std::optional<DType> dtype) {
    scalars_.push_back({bits, dtype.value_or(DType::kCount)});
    return *this;
  }
  // Explicit predecessors (earlier tasks of the same run), in addition to inferred ones.
  TaskArgs& set_dependencies(std::span<const TaskId> preds) {
    explicit_deps_.assign(preds.begin(), preds.end());
    return *this;
  }
  TaskArgs& set_dependencies(std::initializer_list<TaskId> preds) {
    return set_dependencies(std::span<const TaskId>(preds.begin(), preds.size()));
  }
  // Dump markers (see above). Indices are checked by validate().
  TaskArgs& dump() {
    dump_all_ = true;
    return *this;
  }
  TaskArgs& dump(std::span<const int> tensor_indices) {
    dump_tensors_.append(tensor_indices.begin(), tensor_indices.end());
    return *this;
  }
  TaskArgs& dump(std::initializer_list<int> tensor_indices) {
    return dump(std::span<const int>(tensor_indices.begin(), tensor_indices.size()));
  }

  int num_tensors() const noexcept { return static_cast<int>(tensors_.size()); }
  // The tensor arguments in order (what tensor(i) and tag(i) return, without the index checks).
  std::span<const TensorArg> tensor_args() const noexcept {
    return {tensors_.data(), tensors_.size()};
  }
  const TensorView& tensor(int i) const { return tensors_.at(static_cast<std::size_t>(i)).view; }
  ArgTag tag(int i) const { return tensors_.at(static_cast<std::size_t>(i)).tag; }
  int num_scalars() const noexcept { return static_cast<int>(scalars_.size()); }
  std::uint64_t scalar_bits(int i) const { return scalars_.at(static_cast<std::size_t>(i)).bits; }
  std::optional<DType> scalar_dtype(int i) const {
    const DType d = scalars_.at(static_cast<std::size_t>(i)).dtype;
    return d == DType::kCount ? std::nullopt : std::optional<DType>(d);
  }
  template <typename T>
  T scalar_as(int i) const {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(std::uint64_t));
    const std::uint64_t bits = scalar_bits(i);
    T value;
    std::memcpy(&value, &bits, sizeof(T));
    return value;
  }
  std::span<const TaskId> explicit_dependencies() const noexcept {
    return {explicit_deps_.data(), explicit_deps_.size()};
  }
  bool dump_requested() const noexcept { return dump_all_ || !dump_tensors_.empty(); }
  bool dump_marked(int tensor_index) const noexcept;

  // Checks every tensor (validate(), OUTPUT tensors without data, others with data unless
  // empty) and the dump markers. `what` names the call in errors.
  Status validate(std::string_view what) const;
  // validate(...).is_ok() for the common case, inline (a check per submit): true when no tensor
  // is an OUTPUT, every tensor is dense() and no dump index is given; otherwise validate()'s
  // verdict.
  bool well_formed() const {
    if (!dump_tensors_.empty()) return validate({}).is_ok();
    for (const TensorArg& arg : tensors_) {
      if (arg.tag == ArgTag::kOutput || !arg.view.dense()) return validate({}).is_ok();
    }
    return true;
  }

  // The runtime gives OUTPUT tensors their memory before the task runs.
  void set_output_data(int i, void* data);

 private:
  TaskArgs& add(const TensorView& tensor, ArgTag tag) {
    if (tensors_.full()) {
      const TensorView kept = tensor;  // `tensor` may live in the storage that growing frees
      return append(kept, tag);
    }
    return append(tensor, tag);
  }
  TaskArgs& append(const TensorView& tensor, ArgTag tag) {
    TensorArg* arg = tensors_.append_uninitialized();
    tensor.copy_to(&arg->view);  // the view is often built just before (TensorView::copy_to)
    arg->tag = tag;
    return *this;
  }
  template <typename T>
  static constexpr DType scalar_dtype_of() {
    if constexpr (std::is_same_v<T, float>)
      return DType::kFP32;
    else if constexpr (std::is_same_v<T, double>)
      return DType::kFP64;
    else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> && std::is_signed_v<T>) {
      return sizeof(T) == 1   ? DType::kInt8
             : sizeof(T) == 4 ? DType::kInt32
             : sizeof(T) == 8 ? DType::kInt64
                              : DType::kCount;
    } else if constexpr (std::is_same_v<T, std::uint8_t>)
      return DType::kUInt8;
    else
      return DType::kCount;  // opaque bits
  }
  struct ScalarArg {
    std::uint64_t bits;
    DType dtype;  // kCount: opaque bits
  };
  // In place up to a few of each (detail::InlineVector): no allocation for common tasks.
  detail::InlineVector<TensorArg, 4> tensors_;
  detail::InlineVector<ScalarArg, 4> scalars_;
  detail::InlineVector<TaskId, 2> explicit_deps_;
  bool dump_all_ = false;
  detail::InlineVector<int, 4> dump_tensors_;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_TASK_ARGS_H_
