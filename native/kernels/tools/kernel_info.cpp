// hp-kernel-info: the kernel targets of this payload as JSON: the CPU's features, the targets
// installed and whether this CPU runs them, and the one this process selects (honouring
// HP_KERNEL_TARGET) or the error that selection reports. Exit status 0 when a target is
// selected, 1 otherwise.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "common/cpu_features.h"
#include "kernels/targets.h"

int main(int argc, char** argv) {
  if (argc > 1) {
    std::fprintf(stderr, "usage: %s   (prints the kernel targets as JSON; takes no arguments)\n",
                 argv[0]);
    return 2;
  }
  nlohmann::json out;
  out["cpu_features"] = hp::cpu_features().to_string();
  nlohmann::json installed = nlohmann::json::array();
  for (const std::string& name : hp::kernels::installed_targets()) {
    installed.push_back(
        {{"name", name}, {"cpu_supports", hp::kernels::cpu_supports(name, hp::cpu_features())}});
  }
  out["installed"] = installed;
  const hp::kernels::KernelTable* table = nullptr;
  const hp::Status s = hp::kernels::selected_target(&table);
  if (s.is_ok()) {
    out["selected"] = table->target;
  } else {
    out["selected"] = nullptr;
    out["error"] = {{"code", std::string(hp::to_string(s.code()))}, {"message", s.message()}};
  }
  std::printf("%s\n", out.dump(2).c_str());
  return s.is_ok() ? 0 : 1;
}
