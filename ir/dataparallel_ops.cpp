// paralab — nn.DataParallel's collectives (docs/dataparallel.md): PyTorch's single-process data
// parallelism, as torch/nn/parallel/data_parallel.py runs it. Device 0 holds the batch and the
// model: every forward scatters the inputs, the replicas' outputs are gathered onto device 0,
// which computes the loss over the whole batch; the output gradient is scattered back. (The
// parameter broadcast and the gradient reduce onto device 0 are ParamStore's.) The stage graph
// is device 0's: the busiest device, whose timeline is the step.
#include <algorithm>
#include <string>

#include "ir/stage_builder.hpp"

namespace paralab {

bool StageBuilder::dataparallel() const {
  return s_.parallel.data_parallel_impl == DataParallelImpl::dataparallel && s_.parallel.data > 1;
}

int64_t StageBuilder::dp_rows(int64_t rows) const { return dataparallel() ? rows * s_.parallel.data : rows; }

void StageBuilder::dp_collective(const char* name, CollKind kind, BufferId in, BufferId out) {
  OpSpec spec;
  spec.kind = OpKind::collective;
  spec.stream = Stream::dp_comm;
  spec.name = name;
  spec.reads = {b_.whole(in)};
  spec.writes = {b_.whole(out)};
  // NCCL's count: the root's whole buffer (gather's output, scatter's input).
  const int64_t bytes = std::max(b_.buf(in).bytes(), b_.buf(out).bytes());
  spec.attrs = CollectiveAttrs{kind, GroupKind::dp, ReduceOp::sum, bytes, b_.next_tag()};
  spec.bytes = static_cast<double>(bytes);
  b_.add(std::move(spec));
}

// [rows, cols] on each device from device 0's [G x rows, cols] (comm.scatter).
void StageBuilder::dp_scatter(const char* name, BufferId all, BufferId local) {
  dp_collective(name, CollKind::scatter, all, local);
  b_.release(all);
}

// Every device's [rows, cols] onto device 0 as [G x rows, cols] (comm.gather).
BufferId StageBuilder::dp_gather(const char* name, BufferId local) {
  const Buffer& b = b_.buf(local);
  const int64_t rows = b.elements, gpus = s_.parallel.data;
  const BufferId all = b_.buffer(std::string(name) + ".all", rows * gpus, b.dtype, b.category);
  dp_collective(name, CollKind::gather, local, all);
  b_.release(local);
  return all;
}

}  // namespace paralab
