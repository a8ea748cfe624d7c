// hyper_parallel._hp_core: the native core seen from Python. The only place where a Status
// becomes an exception (hyper_parallel.errors.HpError, carrying the stable code).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <optional>

#include "common/cpu_features.h"
#include "common/settings.h"
#include "common/sha256.h"
#include "common/soc_targets.h"
#include "common/status.h"
#include "common/tensor_view.h"
#include "common/version.h"
#include "platform/chip.h"
#include "raise_status.h"

namespace py = pybind11;

namespace {

using hp::python::check;
using hp::python::raise;

py::list error_codes() {
  py::list out;
  for (std::uint32_t c = 0; c < static_cast<std::uint32_t>(hp::ErrorCode::kCount); ++c) {
    out.append(py::make_tuple(c, std::string(hp::to_string(static_cast<hp::ErrorCode>(c)))));
  }
  return out;
}

py::list setting_specs() {
  py::list out;
  for (const auto& spec : hp::setting_specs()) {
    py::dict d;
    d["name"] = std::string(spec.name);
    d["type"] = std::string(hp::to_string(spec.type));
    d["scope"] = std::string(hp::to_string(spec.scope));
    d["default"] = std::string(spec.default_value);
    d["choices"] = std::string(spec.choices);
    d["description"] = std::string(spec.description);
    out.append(d);
  }
  return out;
}

py::dict cpu_features() {
  py::dict d;
  for (const auto& field : hp::cpu_feature_fields()) {
    d[py::str(std::string(field.name))] = hp::cpu_features().*field.member;
  }
  return d;
}

// [(name, bytes per element)] of every hp::DType, in its numbering.
py::list dtypes() {
  py::list out;
  for (int d = 0; d < static_cast<int>(hp::DType::kCount); ++d) {
    const auto dtype = static_cast<hp::DType>(d);
    out.append(py::make_tuple(std::string(hp::to_string(dtype)), hp::dtype_size(dtype)));
  }
  return out;
}

// [(name, [feature, ...])] of the SoC target table, narrowest first.
py::list soc_targets() {
  py::list out;
  for (const hp::SocTarget& t : hp::soc_targets()) {
    py::list features;
    for (std::string_view f : t.requires_features) features.append(std::string(f));
    out.append(py::make_tuple(std::string(t.name), features));
  }
  return out;
}

// Creates a chip and runs one mix launch in which every cube block hands a value to its
// vector blocks through a flag, then all blocks meet at sync_all. Proves the platform works
// on this host and reports where the cores ran.
py::dict platform_selftest(int num_cube, int num_vector, std::optional<int> groups) {
  hp::platform::ChipConfig config{.num_cube = num_cube, .num_vector = num_vector};
  std::unique_ptr<hp::platform::Chip> chip;
  check(hp::platform::Chip::create(config, &chip));
  std::vector<int> handed(num_cube, 0);
  std::vector<int> seen(num_vector, -1);
  const int ratio = chip->ratio();
  const auto start = std::chrono::steady_clock::now();
  hp::Status launched;
  {
    // No Python API (raising included) while the GIL is released: check() comes after.
    py::gil_scoped_release release;
    launched = chip->launch(
        {.mode = hp::platform::LaunchMode::kMix, .block_dim = groups.value_or(num_cube)},
        [&](hp::platform::BlockContext& ctx) -> hp::Status {
          if (ctx.core_type() == hp::platform::CoreType::kCube) {
            handed[ctx.block_idx()] = 1000 + ctx.block_idx();
            HP_RETURN_IF_ERROR(ctx.set_flag(ctx.block_idx()));
          } else {
            HP_RETURN_IF_ERROR(ctx.wait_flag(ctx.block_idx(), 1));
            seen[ctx.block_idx() * ratio + ctx.sub_block_idx()] = handed[ctx.block_idx()];
          }
          return ctx.sync_all();
        });
  }
  check(launched);
  const double micros =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  for (int v = 0; v < num_vector; ++v) {
    if (seen[v] != 1000 + v / ratio) {
      raise(hp::Status::error(hp::ErrorCode::kInternal,
                              "platform self-test: vector core {} saw {} instead of {}", v, seen[v],
                              1000 + v / ratio));
    }
  }
  py::dict d;
  d["num_cube"] = chip->num_cube();
  d["num_vector"] = chip->num_vector();
  d["cpus"] = std::vector<int>(chip->cpus().begin(), chip->cpus().end());
  d["pinned"] = chip->pinned();
  d["oversubscribed"] = chip->oversubscribed();
  d["launch_us"] = micros;
  return d;
}

}  // namespace

PYBIND11_MODULE(_hp_core, m) {
  m.doc() = "HyperParallel native core (common + platform)";
  m.def("version", [] { return std::string(hp::version()); });
  m.def("error_codes", &error_codes, "[(number, name)] of every stable error code");
  m.def("setting_specs", &setting_specs, "the table of every HP_* environment variable");
  m.def(
      "settings_error",
      [] {
        const hp::Status& s = hp::settings_status();
        return s.is_ok() ? py::object(py::none()) : py::object(py::str(s.to_string()));
      },
      "the error of reading the runtime settings from the environment, or None");
  m.def("sha256_hex", [](py::bytes data) {
    std::string_view view = data;
    return hp::to_hex(hp::sha256(view));
  });
  m.def("cpu_features", &cpu_features);
  m.def("dtypes", &dtypes, "[(name, bytes per element)] of every native dtype, in its numbering");
  m.def("soc_targets", &soc_targets,
        "[(name, [cpu feature, ...])] of every SoC target, narrowest first");
  m.def("platform_selftest", &platform_selftest, py::arg("num_cube") = 1, py::arg("num_vector") = 2,
        py::arg("groups") = py::none(),
        "one mix launch of `groups` (default num_cube) groups on a fresh chip");
}
