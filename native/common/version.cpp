#include "common/version.h"

namespace hp {

std::string_view version() noexcept { return HP_VERSION_STRING; }

}  // namespace hp
