// A kernel library that uses a symbol nothing defines: loading it with RTLD_NOW must fail, naming
// the symbol, when it is registered (not when a task runs).
#include "runtime/task_args.h"

extern "C" int hp_node_test_missing_symbol(int);

extern "C" [[gnu::visibility("default")]] hp::Status hp_node_test_unresolved(
    const hp::runtime::TaskArgs& args, hp::platform::BlockContext&) {
  static_cast<int*>(args.tensor(0).data())[0] = hp_node_test_missing_symbol(1);
  return hp::Status::ok();
}
