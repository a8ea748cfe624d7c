// TaskArgs: building, reading back, and copies (each of its vectors keeps a few elements in
// place and moves to the heap beyond them; submit copies a TaskArgs into the task's slot,
// reusing whatever the slot held before).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "runtime/task_args.h"

namespace hp::runtime {
namespace {

// `n` tensors (INPUT views of buffer[i]), n scalars, n explicit dependencies and n dump marks.
TaskArgs args_of(int n, std::vector<std::int32_t>& buffer) {
  buffer.assign(static_cast<std::size_t>(n) + 1, 0);
  TaskArgs args;
  std::vector<TaskId> deps;
  std::vector<int> marks;
  for (int i = 0; i < n; ++i) {
    args.input(TensorView(&buffer[static_cast<std::size_t>(i)], DType::kInt32, {1}));
    args.scalar(std::int64_t{100} + i);
    deps.push_back(static_cast<TaskId>(i));
    marks.push_back(i);
  }
  args.set_dependencies(deps);
  args.dump(marks);
  return args;
}

void expect_args_of(const TaskArgs& args, int n, const std::vector<std::int32_t>& buffer) {
  ASSERT_EQ(args.num_tensors(), n);
  ASSERT_EQ(args.num_scalars(), n);
  ASSERT_EQ(args.explicit_dependencies().size(), static_cast<std::size_t>(n));
  ASSERT_EQ(args.tensor_args().size(), static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(args.tensor(i).data(), &buffer[static_cast<std::size_t>(i)]);
    EXPECT_EQ(args.tensor_args()[static_cast<std::size_t>(i)].view.data(), args.tensor(i).data());
    EXPECT_EQ(args.tag(i), ArgTag::kInput);
    EXPECT_EQ(args.scalar_as<std::int64_t>(i), 100 + i);
    EXPECT_EQ(args.explicit_dependencies()[static_cast<std::size_t>(i)], static_cast<TaskId>(i));
    EXPECT_TRUE(args.dump_marked(i));
  }
  EXPECT_FALSE(args.dump_marked(n));
  EXPECT_EQ(args.dump_requested(), n > 0);
}

// well_formed() (submit's inline check) is validate()'s verdict, over arguments of every tag,
// dense and strided views, empty and bad views, and dump marks in and out of range.
TEST(TaskArgs, WellFormedAgreesWithValidate) {
  std::mt19937_64 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<std::int32_t> buffer(64);
  int good = 0, bad = 0, fast = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    TaskArgs args;
    const int n = pick(0, 5);
    for (int i = 0; i < n; ++i) {
      const auto tag = static_cast<ArgTag>(pick(0, 4));
      const std::int64_t size = pick(0, 6) == 0 ? pick(-1, 0) : pick(1, 4);
      const std::int64_t stride = pick(0, 2) == 0 ? pick(-1, 3) : 1;
      void* data = pick(0, 7) == 0 ? nullptr : static_cast<void*>(buffer.data());
      if (tag == ArgTag::kOutput) {
        args.output(DType::kInt32, {size, 2});
        // OUTPUT with data (refused: the runtime gives OUTPUT tensors their memory)
        if (pick(0, 3) == 0) args.set_output_data(args.num_tensors() - 1, buffer.data());
        continue;
      }
      const TensorView view(data, DType::kInt32, std::vector<std::int64_t>{size, 2},
                            std::vector<std::int64_t>{2 * stride, stride});
      switch (tag) {
        case ArgTag::kInput:
          args.input(view);
          break;
        case ArgTag::kInOut:
          args.inout(view);
          break;
        case ArgTag::kOutputExisting:
          args.output_existing(view);
          break;
        default:
          args.no_dep(view);
          break;
      }
    }
    if (pick(0, 4) == 0) args.dump({pick(-1, n)});
    const bool ok = args.validate("t").is_ok();
    ASSERT_EQ(args.well_formed(), ok) << "trial " << trial;
    (ok ? good : bad) += 1;
    bool all_dense = !args.dump_requested();
    for (const TaskArgs::TensorArg& arg : args.tensor_args()) all_dense &= arg.view.dense();
    fast += all_dense && n > 0 ? 1 : 0;
  }
  EXPECT_GT(good, 1000);
  EXPECT_GT(bad, 1000);
  EXPECT_GT(fast, 1000);
}

// An OUTPUT is checked on its dtype and shape alone (it has no data yet): a rank beyond
// TensorView::kMaxDims is refused like any other tensor's.
TEST(TaskArgs, AnOutputOfTooManyDimsIsRefused) {
  TaskArgs args;
  args.output(DType::kFP32, std::vector<std::int64_t>(TensorView::kMaxDims + 1, 1));
  const Status status = args.validate("t");
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("rank"), std::string::npos) << status.message();
  EXPECT_FALSE(args.well_formed());
  TaskArgs fits;
  fits.output(DType::kFP32, std::vector<std::int64_t>(TensorView::kMaxDims, 1));
  EXPECT_TRUE(fits.validate("t").is_ok());
}

TEST(TaskArgs, CopiesInPlaceAndOnTheHeapIntoEverySize) {
  // 0, 3 and 4: in place (4 fills the tensors' room); 5 and 17: beyond the in-place room of
  // every vector.
  for (int from : {0, 3, 4, 5, 17}) {
    for (int to : {0, 3, 4, 5, 17}) {
      SCOPED_TRACE(testing::Message() << "copy of " << from << " over " << to);
      std::vector<std::int32_t> from_buffer, to_buffer;
      const TaskArgs source = args_of(from, from_buffer);
      TaskArgs target = args_of(to, to_buffer);
      target = source;
      expect_args_of(target, from, from_buffer);
      expect_args_of(source, from, from_buffer);  // unchanged
      const TaskArgs constructed(source);
      expect_args_of(constructed, from, from_buffer);
    }
  }
}

// An argument added from the TaskArgs' own tensors while they move (4 in place, then 8 on the
// heap) is read before they move.
TEST(TaskArgs, AddingItsOwnTensorWhileItGrowsKeepsIt) {
  std::vector<std::int32_t> buffer;
  TaskArgs args = args_of(4, buffer);
  for (int i = 4; i < 9; ++i) {
    void* const data = args.tensor(i - 4).data();
    args.inout(args.tensor(i - 4));
    ASSERT_EQ(args.tensor(i).data(), data);
    EXPECT_EQ(args.tensor(i).to_string(), "int32[1] strides [1]");
    EXPECT_EQ(args.tag(i), ArgTag::kInOut);
  }
}

// The task's slot keeps its TaskArgs from task to task: a copy over arguments of a higher rank
// gives the new arguments' views.
TEST(TaskArgs, CopiesOverArgumentsOfAnotherRank) {
  std::vector<std::int32_t> buffer(64);
  TaskArgs wide, narrow, slot;
  for (int i = 0; i < 3; ++i) {
    wide.inout(TensorView(buffer.data(), DType::kInt32, {2, 2, 2, 2}));
    narrow.input(TensorView(&buffer[static_cast<std::size_t>(i)], DType::kInt32, {3}));
  }
  for (const TaskArgs* from : {&wide, &narrow, &wide, &narrow}) {
    slot = *from;
    ASSERT_EQ(slot.num_tensors(), 3);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(slot.tensor(i).to_string(), from->tensor(i).to_string());
      EXPECT_EQ(slot.tensor(i).data(), from->tensor(i).data());
      EXPECT_EQ(slot.tensor(i).numel(), from->tensor(i).numel());
      EXPECT_EQ(slot.tag(i), from->tag(i));
    }
  }
}

TEST(TaskArgs, CopyToItselfKeepsEverything) {
  std::vector<std::int32_t> buffer;
  TaskArgs args = args_of(6, buffer);
  const TaskArgs& alias = args;
  args = alias;
  expect_args_of(args, 6, buffer);
}

TEST(TaskArgs, AMoveTargetHoldsTheArguments) {
  for (int n : {3, 9}) {
    std::vector<std::int32_t> buffer;
    TaskArgs source = args_of(n, buffer);
    TaskArgs target = std::move(source);
    expect_args_of(target, n, buffer);
  }
}

TEST(TaskArgs, IndexChecksThrowOutOfRange) {
  std::vector<std::int32_t> buffer;
  const TaskArgs args = args_of(2, buffer);
  EXPECT_THROW((void)args.tensor(2), std::out_of_range);
  EXPECT_THROW((void)args.tag(-1), std::out_of_range);
  EXPECT_THROW((void)args.scalar_bits(2), std::out_of_range);
}

}  // namespace
}  // namespace hp::runtime
