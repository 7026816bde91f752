#pragma once

namespace spin_gemm {
void burn();  // EXTRA_ITERS dependent multiply-adds (spin.cpp)
}
