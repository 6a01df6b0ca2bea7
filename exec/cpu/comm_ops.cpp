// paralab exec/cpu — collectives and transfers of docs/ir.md ("Communication") on a
// GroupComm: in-place and out-of-place all-reduce (several views are packed into one message),
// all-gather (from a shard of the output: in place), reduce-scatter (into a separate shard, into
// this rank's shard of the input buffer, or accumulated into a resident gradient shard),
// all-to-all, broadcast, and send/recv/sendrecv with the IR's tags.
#include <cstring>
#include <string>

#include "exec/cpu/cpu_math.hpp"
#include "exec/plan.hpp"
#include "ir/error.hpp"

namespace paralab::exec::cpu {

namespace {

[[noreturn]] void bad(const Op& op, const std::string& why) {
  throw InternalError("op " + op_label(op) + ": " + why);
}

bool same_view(const ResolvedRef& a, const ResolvedRef& b) { return a.buffer == b.buffer && a.offset == b.offset; }

void collective(const OpCall& call, CpuContext& ctx, GroupComm& comm) {
  const Op& op = call.op;
  const CollectiveAttrs& c = *op.collective();
  const auto& o = call.plan;
  const int64_t g = comm.size(), me = comm.index();
  if (o.reads.empty() || o.writes.empty()) bad(op, "a collective needs inputs and outputs");
  const DType t = o.writes[0].dtype;
  const int64_t es = bytes_of(t);
  switch (c.kind) {
    case CollKind::all_reduce: {
      if (o.reads.size() == 1 && o.writes.size() == 1) {
        if (o.reads[0].numel != o.writes[0].numel) bad(op, "all_reduce input and output differ in size");
        comm.all_reduce(call.reads[0], call.writes[0], o.writes[0].numel, t, c.op, call.wait);
        return;
      }
      // Several views (e.g. the replicated parameters' gradients): one packed message.
      if (o.reads.size() != o.writes.size()) bad(op, "all_reduce of several views must read and write the same views");
      int64_t total = 0;
      for (size_t i = 0; i < o.reads.size(); ++i) {
        if (!same_view(o.reads[i], o.writes[i]) || o.reads[i].dtype != t) bad(op, "packed all_reduce views differ");
        total += o.reads[i].numel;
      }
      auto* buf = reinterpret_cast<char*>(ctx.scratch.get(0, (total * es + 3) / 4));
      int64_t at = 0;
      for (size_t i = 0; i < o.reads.size(); ++i) {
        std::memcpy(buf + at, call.reads[i], static_cast<size_t>(o.reads[i].numel * es));
        at += o.reads[i].numel * es;
      }
      comm.all_reduce(buf, buf, total, t, c.op, call.wait);
      at = 0;
      for (size_t i = 0; i < o.writes.size(); ++i) {
        std::memcpy(call.writes[i], buf + at, static_cast<size_t>(o.writes[i].numel * es));
        at += o.writes[i].numel * es;
      }
      return;
    }
    case CollKind::all_gather: {
      const int64_t n = o.reads[0].numel;
      if (o.writes[0].numel != n * g) bad(op, "all_gather output is not group size x input");
      comm.all_gather(call.reads[0], call.writes[0], n, t, call.wait);
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
        comm.reduce_scatter(call.reads[0], call.writes[0], shard, t, c.op, call.wait);
        return;
      }
      auto* tmp = reinterpret_cast<char*>(ctx.scratch.get(0, (shard * es + 3) / 4));
      comm.reduce_scatter(call.reads[0], tmp, shard, t, c.op, call.wait);
      if (out.numel == shard) {  // accumulate into the shard
        accumulate_into(call.writes[0], tmp, t, shard);
      } else if (out.numel == N) {  // in place: this rank's shard of the (input) buffer
        std::memcpy(static_cast<char*>(call.writes[0]) + me * shard * es, tmp, static_cast<size_t>(shard * es));
      } else {
        bad(op, "reduce_scatter output is neither the shard nor the whole input");
      }
      return;
    }
    case CollKind::all_to_all: {
      const int64_t N = o.reads[0].numel;
      if (N % g != 0 || o.writes[0].numel != N) bad(op, "all_to_all views must be equal and split evenly");
      comm.all_to_all(call.reads[0], call.writes[0], N / g, t, call.wait);
      return;
    }
    case CollKind::broadcast: {
      const int64_t n = o.writes[0].numel;
      if (call.reads[0] != call.writes[0]) std::memcpy(call.writes[0], call.reads[0], static_cast<size_t>(n * es));
      comm.broadcast(call.writes[0], n, t, 0, call.wait);
      return;
    }
    case CollKind::reduce:
    case CollKind::gather:
    case CollKind::scatter:  // only nn.DataParallel's IR has them, and it is simulated only
      bad(op, std::string(to_string(c.kind)) + " is not executed (data_parallel_impl = \"dataparallel\" is simulated only)");
  }
}

void transfer(const OpCall& call, CpuContext& ctx, GroupComm& comm) {
  const Op& op = call.op;
  const P2PAttrs& p = *op.p2p();
  const auto& o = call.plan;
  const void* send = nullptr;
  void* recv = nullptr;
  int64_t send_bytes = 0, recv_bytes = 0;
  if (o.send_to >= 0) {
    if (o.reads.empty()) bad(op, "a send needs an input view");
    send = call.reads[0];
    send_bytes = o.reads[0].numel * bytes_of(o.reads[0].dtype);
    // Ring attention's first KV exchange reads the whole qkv buffer (that is its dependency)
    // but sends only the key and value columns of each row: pack them into one message.
    const ModelShape& m = ctx.shape;
    const int64_t T = m.tokens(), es = bytes_of(o.reads[0].dtype), q = m.attn_cols(), kv = m.qkv_cols() - q;
    if (send_bytes != p.bytes && o.reads[0].numel == T * m.qkv_cols() && p.bytes == T * kv * es) {
      auto* packed = reinterpret_cast<char*>(ctx.scratch.get(0, (T * kv * es + 3) / 4));
      for (int64_t r = 0; r < T; ++r)
        std::memcpy(packed + r * kv * es, static_cast<const char*>(send) + (r * m.qkv_cols() + q) * es,
                    static_cast<size_t>(kv * es));
      send = packed;
      send_bytes = p.bytes;
    }
  }
  if (o.recv_from >= 0) {
    if (o.writes.empty()) bad(op, "a receive needs an output view");
    recv = call.writes[0];
    recv_bytes = o.writes[0].numel * bytes_of(o.writes[0].dtype);
  }
  for (int64_t b : {send_bytes, recv_bytes})
    if (b != 0 && b != p.bytes)
      bad(op, "transfer of " + std::to_string(b) + " B, the IR says " + std::to_string(p.bytes) + " B");
  comm.send_recv(send, send_bytes, o.send_to, recv, recv_bytes, o.recv_from, p.tag, call.wait);
}

}  // namespace

void run_comm(const OpCall& call, CpuContext& ctx, GroupComm& comm) {
  if (call.op.kind == OpKind::collective) collective(call, ctx, comm);
  else transfer(call, ctx, comm);
}

}  // namespace paralab::exec::cpu
