#include "runtime/task_args.h"

#include <fmt/format.h>

namespace hp::runtime {

std::string_view to_string(ArgTag tag) noexcept {
  switch (tag) {
    case ArgTag::kInput:
      return "INPUT";
    case ArgTag::kOutput:
      return "OUTPUT";
    case ArgTag::kInOut:
      return "INOUT";
    case ArgTag::kOutputExisting:
      return "OUTPUT_EXISTING";
    case ArgTag::kNoDep:
      return "NO_DEP";
  }
  return "UNKNOWN";
}

bool TaskArgs::dump_marked(int tensor_index) const noexcept {
  if (dump_all_) return true;
  for (int i : dump_tensors_) {
    if (i == tensor_index) return true;
  }
  return false;
}

Status TaskArgs::validate(std::string_view what) const {
  for (int i : dump_tensors_) {
    HP_ENSURE(i >= 0 && i < num_tensors(), ErrorCode::kInvalidArgument,
              "{}: dump({}) marks a tensor argument that does not exist (the task has {} tensor "
              "arguments, indexed from 0 in the order they were added)",
              what, i, num_tensors());
  }
  for (int i = 0; i < num_tensors(); ++i) {
    const TensorArg& arg = tensors_[static_cast<std::size_t>(i)];
    // Formatted only for an error: validate runs on every submit.
    auto name = [&] {
      return fmt::format("{}: tensor argument {} ({})", what, i, to_string(arg.tag));
    };
    if (arg.tag == ArgTag::kOutput) {
      HP_ENSURE(arg.view.data() == nullptr, ErrorCode::kInvalidArgument,
                "{} has data; OUTPUT tensors are allocated by the runtime: pass dtype and shape "
                "only, or tag caller memory OUTPUT_EXISTING",
                name());
      // validate() wants data for a non-empty view: check the shape (and rank) on a stand-in
      // pointer.
      alignas(64) static std::byte stand_in[1];
      const TensorView shape_only = arg.view.with_data(stand_in);
      if (!shape_only.well_formed()) return shape_only.validate(name());
      continue;
    }
    if (!arg.view.well_formed()) return arg.view.validate(name());
  }
  return Status::ok();
}

void TaskArgs::set_output_data(int i, void* data) {
  TensorArg& arg = tensors_.at(static_cast<std::size_t>(i));
  arg.view = arg.view.with_data(data);
}

}  // namespace hp::runtime
