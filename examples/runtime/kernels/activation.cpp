// hp::examples::activate (example_kernels.h).
#include <cmath>

#include "example_kernels.h"

namespace hp::examples {

float activate(float x, Activation activation) {
  switch (activation) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return x > 0 ? x : 0.0f;
    case Activation::kGelu: {
      const float c = 0.7978845608028654f;  // sqrt(2 / pi)
      return 0.5f * x * (1.0f + std::tanh(c * (x + 0.044715f * x * x * x)));
    }
  }
  return x;
}

}  // namespace hp::examples
