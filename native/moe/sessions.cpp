#include "moe/sessions.h"

namespace hp::moe {

SessionTable<BufferSession>& buffer_sessions() {
  static SessionTable<BufferSession> table;
  return table;
}

SessionTable<LayerSession>& layer_sessions() {
  static SessionTable<LayerSession> table;
  return table;
}

}  // namespace hp::moe
