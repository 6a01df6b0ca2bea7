// paralab — nn.DataParallel's launch cost (docs/dataparallel.md): one Python thread launches every
// forward op on each of its GPUs in turn (parallel_apply's threads hold the GIL), so the next op
// can start on any GPU only after `rows` launches. A launch costs the device's
// launch_overhead_us (the host side of a kernel of no work). The backward pass needs no such op:
// PyTorch's autograd engine runs one C++ thread per device (PyTorch docs, "Autograd mechanics",
// multithreading).
#include "sim/compute/compute_model.hpp"

namespace paralab::sim {

double launch_model_us(const Op& op, const DeviceSpec& dev) {
  const KernelAttrs* k = op.kernel();
  return static_cast<double>(k ? k->rows : 1) * dev.launch_overhead_us;
}

}  // namespace paralab::sim
