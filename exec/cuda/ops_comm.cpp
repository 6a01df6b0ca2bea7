// paralab exec/cuda — the IR's collectives and transfers on NCCL, enqueued on the op's own CUDA
// stream (the IR stream's), with the conventions of exec/cpu/comm_ops.cpp (the reference):
// in-place and out-of-place all-reduce (several views packed into one message), all-gather
// (in place from a shard of the output), reduce-scatter (into a separate shard, into this
// rank's shard of the input buffer, or accumulated into a resident gradient shard), all-to-all,
// broadcast, pipeline send/recv on the edge communicators, and the CP ring's grouped sendrecv.
#include <optional>
#include <string>

#include "exec/cuda/cuda_ops.hpp"
#include "ir/error.hpp"

namespace paralab::exec::cuda {

namespace {

[[noreturn]] void bad(const Op& op, const std::string& why) { throw InternalError("op " + op_label(op) + ": " + why); }

bool same_view(const ResolvedRef& a, const ResolvedRef& b) { return a.buffer == b.buffer && a.offset == b.offset; }

void d2d(void* dst, const void* src, int64_t bytes, cudaStream_t s) {
  if (dst != src && bytes > 0) PARALAB_CU(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, s));
}

void collective(const OpCall& call, CudaOpContext& ctx, const Comm& comm) {
  const Op& op = call.op;
  const CollectiveAttrs& c = *op.collective();
  const auto& o = call.plan;
  const cudaStream_t s = ctx.stream();
  const int64_t g = comm.size, me = comm.index;
  if (o.reads.empty() || o.writes.empty()) bad(op, "a collective needs inputs and outputs");
  const DType t = o.writes[0].dtype;
  const int64_t es = bytes_of(t);
  switch (c.kind) {
    case CollKind::all_reduce: {
      if (o.reads.size() == 1 && o.writes.size() == 1) {
        if (o.reads[0].numel != o.writes[0].numel) bad(op, "all_reduce input and output differ in size");
        enqueue_all_reduce(comm, call.reads[0], call.writes[0], o.writes[0].numel, t, c.op, s);
        return;
      }
      if (o.reads.size() != o.writes.size()) bad(op, "all_reduce of several views must read and write the same views");
      int64_t total = 0;
      for (size_t i = 0; i < o.reads.size(); ++i) {
        if (!same_view(o.reads[i], o.writes[i]) || o.reads[i].dtype != t) bad(op, "packed all_reduce views differ");
        total += o.reads[i].numel;
      }
      Scratch buf(total * es, s);
      auto* p = static_cast<char*>(buf.get());
      int64_t at = 0;
      for (size_t i = 0; i < o.reads.size(); ++i) {
        d2d(p + at, call.reads[i], o.reads[i].numel * es, s);
        at += o.reads[i].numel * es;
      }
      enqueue_all_reduce(comm, p, p, total, t, c.op, s);
      at = 0;
      for (size_t i = 0; i < o.writes.size(); ++i) {
        d2d(call.writes[i], p + at, o.writes[i].numel * es, s);
        at += o.writes[i].numel * es;
      }
      return;
    }
    case CollKind::all_gather: {
      const int64_t n = o.reads[0].numel;
      if (o.writes[0].numel != n * g) bad(op, "all_gather output is not group size x input");
      enqueue_all_gather(comm, call.reads[0], call.writes[0], n, t, s);
      return;
    }
    case CollKind::reduce_scatter: {
      const int64_t N = o.reads[0].numel;
      if (N % g != 0) bad(op, "reduce_scatter input does not split evenly over the group");
      const int64_t shard = N / g;
      const ResolvedRef& out = o.writes[0];
      bool accumulate = false;  // the output is also an input: add into it (ZeRO-2/3 gradient shards)
      for (size_t i = 1; i < o.reads.size(); ++i) accumulate |= same_view(o.reads[i], out);
      if (out.numel == shard && !accumulate && out.buffer != o.reads[0].buffer) {
        enqueue_reduce_scatter(comm, call.reads[0], call.writes[0], shard, t, c.op, s);
        return;
      }
      if (out.numel == N && !accumulate) {  // this rank's shard of the whole buffer (NCCL's in-place form)
        enqueue_reduce_scatter(comm, call.reads[0], static_cast<char*>(call.writes[0]) + me * shard * es, shard, t, c.op, s);
        return;
      }
      if (out.numel != shard) bad(op, "reduce_scatter output is neither the shard nor the whole input");
      Scratch tmp(shard * es, s);
      enqueue_reduce_scatter(comm, call.reads[0], tmp.get(), shard, t, c.op, s);
      dev::copy2d(tmp.get(), dt(t), shard, call.writes[0], dt(t), shard, 1, shard, true, s);
      return;
    }
    case CollKind::all_to_all: {
      const int64_t N = o.reads[0].numel;
      if (N % g != 0 || o.writes[0].numel != N) bad(op, "all_to_all views must be equal and split evenly");
      enqueue_all_to_all(comm, call.reads[0], call.writes[0], N / g, t, s);
      return;
    }
    case CollKind::broadcast: {
      const int64_t n = o.writes[0].numel;
      d2d(call.writes[0], call.reads[0], n * es, s);
      enqueue_broadcast(comm, call.writes[0], n, t, 0, s);
      return;
    }
    case CollKind::reduce:
    case CollKind::gather:
    case CollKind::scatter:  // only nn.DataParallel's IR has them, and it is simulated only
      bad(op, std::string(to_string(c.kind)) + " is not executed (data_parallel_impl = \"dataparallel\" is simulated only)");
  }
}

void transfer(const OpCall& call, CudaOpContext& ctx, const Comm& comm, const OpComm& oc) {
  const Op& op = call.op;
  const P2PAttrs& p = *op.p2p();
  const auto& o = call.plan;
  const cudaStream_t s = ctx.stream();
  const void* send = nullptr;
  void* recv = nullptr;
  int64_t send_bytes = 0, recv_bytes = 0;
  std::optional<Scratch> packed;
  if (oc.send_peer >= 0) {
    if (o.reads.empty()) bad(op, "a send needs an input view");
    send = call.reads[0];
    send_bytes = o.reads[0].numel * bytes_of(o.reads[0].dtype);
    // Ring attention's first KV exchange reads all of qkv but sends the K and V columns only.
    const ModelShape& m = ctx.shape;
    const int64_t T = m.tokens(), es = bytes_of(o.reads[0].dtype), q = m.attn_cols(), kv = m.qkv_cols() - q;
    if (send_bytes != p.bytes && o.reads[0].numel == T * m.qkv_cols() && p.bytes == T * kv * es) {
      packed.emplace(T * kv * es, s);
      const DType t = o.reads[0].dtype;
      dev::copy2d(static_cast<const char*>(send) + q * es, dt(t), m.qkv_cols(), packed->get(), dt(t), kv, T, kv, false, s);
      send = packed->get();
      send_bytes = p.bytes;
    }
  }
  if (oc.recv_peer >= 0) {
    if (o.writes.empty()) bad(op, "a receive needs an output view");
    recv = call.writes[0];
    recv_bytes = o.writes[0].numel * bytes_of(o.writes[0].dtype);
  }
  for (int64_t b : {send_bytes, recv_bytes})
    if (b != 0 && b != p.bytes)
      bad(op, "transfer of " + std::to_string(b) + " B, the IR says " + std::to_string(p.bytes) + " B");
  enqueue_send_recv(comm, send, send_bytes, oc.send_peer, recv, recv_bytes, oc.recv_peer, s);
}

}  // namespace

void run_comm(const OpCall& call, CudaOpContext& ctx) {
  const OpComm& oc = ctx.op_comms->at(call.op.id);
  const Comm* comm = oc.comm >= 0 ? ctx.comms->at(static_cast<size_t>(oc.comm)).get() : nullptr;
  if (!comm) throw InternalError("op " + op_label(call.op) + ": no communicator on this rank");
  if (call.op.kind == OpKind::collective) collective(call, ctx, *comm);
  else transfer(call, ctx, *comm, oc);
}

}  // namespace paralab::exec::cuda
