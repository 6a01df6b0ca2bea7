// paralab exec/cuda — the CUDA backend (docs/cuda_backend.md).
//
// Streams: every IR stream the rank uses is a CUDA stream (non-blocking; the communication
// streams at the highest priority so NCCL kernels start as soon as their inputs are ready),
// driven by the runtime's worker thread for it (attach_stream binds the thread). Operations are
// enqueued and run() returns: the runtime releases dependents at issue time and calls
// wait_for(), which records nothing new: every op's end event is recorded by op_end(), and a
// dependent stream waits on it with cudaStreamWaitEvent unless an earlier wait of that stream
// already implies it (plan_waits). Nothing synchronizes the host between ops of a step; the one
// step-level synchronization is synchronize() after the last op, which polls (so a hung peer is
// reported by the watchdog, not waited for forever) and checks NCCL's asynchronous errors.
//
// Memory: cudaMallocAsync/cudaFreeAsync from the device's default pool on the stream of the
// thread that allocates/frees (the runtime frees after an op in its stream's order, so a buffer
// stays valid until the ops before the free have run); the pool keeps its memory (release
// threshold = max) and may not insert waits between streams (ReuseAllowInternalDependencies =
// 0): such waits would order streams in ways the IR does not, which with NCCL's rendezvous
// transfers could deadlock across ranks. Main-thread work (resident buffers, fills, uploads,
// verification) runs on a host stream and is synchronized before returning.
#include "exec/cuda/cuda_backend.hpp"
#include "exec/cuda/cuda_backend_impl.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include "exec/cuda/comm_plan.hpp"
#include "exec/cuda/cuda_ops.hpp"
#include "exec/cuda/device_ops.hpp"
#include "exec/cuda/gemm_plan.hpp"
#include "exec/cuda/nccl_comm.hpp"
#include "exec/fill.hpp"
#include "exec/error.hpp"
#include "ir/accounting.hpp"
#include "ir/error.hpp"
#include "kernels/loss_scale.hpp"

namespace paralab::exec {

namespace cuda {

namespace {
thread_local int tls_device = -1;
}  // namespace

void set_thread_device(int device) { tls_device = device; }
int thread_device() { return tls_device; }

bool cuda_available(std::string* why, int* device_count) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (device_count) *device_count = e == cudaSuccess ? n : 0;
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why)
      *why = std::string("the cuda backend needs a CUDA GPU, but none is usable here: cudaGetDeviceCount failed: ") +
             cudaGetErrorName(e) + ": " + cudaGetErrorString(e) +
             " (is the NVIDIA driver installed and a GPU visible to this process? check nvidia-smi and "
             "CUDA_VISIBLE_DEVICES); run with --backend cpu instead";
    return false;
  }
  if (n == 0) {
    if (why)
      *why = "the cuda backend needs a CUDA GPU, but the driver reports none (check nvidia-smi and "
             "CUDA_VISIBLE_DEVICES); run with --backend cpu instead";
    return false;
  }
  return true;
}

namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // cuBLASLt workspace (NVIDIA's Hopper recommendation)

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / kGiB);
  return buf;
}

int local_rank_from_env() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "PMI_LOCAL_RANK", "LOCAL_RANK"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return -1;
}

bool is_comm_stream(Stream s) { return s != Stream::compute; }

}  // namespace


void CudaBackend::setup(const RankPlan& plan, Transport& world) {
  plan_ = &plan;
  rank_ = plan.rank;
  auto t_last = std::chrono::steady_clock::now();
  auto lap = [&](const char* part) {  // setup_s_: wall time of each part
    const auto now = std::chrono::steady_clock::now();
    setup_s_[std::string("setup_") + part + "_s"] = std::chrono::duration<double>(now - t_last).count();
    t_last = now;
  };
  try {
    std::string why;
    int count = 0;
    if (!cuda_available(&why, &count)) throw ExecError(rank_, why);
    const int local = local_rank_from_env();
    device_ = thread_device() >= 0 ? thread_device() : (local >= 0 ? local : world.rank()) % count;
    PARALAB_CU(cudaSetDevice(device_));
    PARALAB_CU(cudaGetDeviceProperties(&prop_, device_));
    lap("device");  // driver and context initialization, device properties
    const int cc = prop_.major * 10 + prop_.minor;
    fp8_ = cc >= 89;
    const Scenario& s = ir_.scenario;
    if (s.training.precision == Precision::fp8 && !fp8_)
      throw ExecError(rank_, "precision fp8 needs FP8 tensor cores (compute capability 8.9 Ada or 9.0 Hopper and "
                             "newer, for cuBLASLt's e4m3 GEMMs); device " + std::to_string(device_) + " is " +
                             prop_.name + " (sm_" + std::to_string(cc) + "); use precision bf16");

    // The IR's memory for this rank must fit in what the device has free (collective verdict).
    planned_ = replay_memory(*plan.graph);
    size_t free_b = 0, total_b = 0;
    PARALAB_CU(cudaMemGetInfo(&free_b, &total_b));
    const double overhead = 1.0 * kGiB;  // context, NCCL buffers, cuBLASLt workspaces
    int64_t bad = planned_.peak_total() + overhead > static_cast<double>(free_b) ? 1 : 0;
    world.all_reduce(&bad, 1, ReduceOp::max);
    if (bad)
      throw ExecError(rank_, "the step needs about " + gib(planned_.peak_total()) + " on each GPU (the IR's peak: resident " +
                                 gib(planned_.resident_total()) + " + transient " + gib(planned_.peak_transient) +
                                 ", plus ~1 GiB of runtime overhead) but device " + std::to_string(device_) + " (" +
                                 prop_.name + ") has " + gib(static_cast<double>(free_b)) + " free of " +
                                 gib(static_cast<double>(total_b)) + " (or another rank's device is short); use a smaller "
                                 "model, batch or sequence, or more parallelism");

    // Stream-ordered pool: keep memory, never add cross-stream waits.
    PARALAB_CU(cudaDeviceGetDefaultMemPool(&pool_, device_));
    uint64_t keep = UINT64_MAX;
    PARALAB_CU(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep));
    int no = 0;
    PARALAB_CU(cudaMemPoolSetAttribute(pool_, cudaMemPoolReuseAllowInternalDependencies, &no));

    lap("memory_check");
    int least = 0, greatest = 0;
    PARALAB_CU(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    PARALAB_CU(cudaStreamCreateWithFlags(&host_stream_, cudaStreamNonBlocking));
    std::array<bool, kStreams> gemms{};
    for (const Op& op : plan.graph->ops)
      if (op.kind == OpKind::gemm) gemms[static_cast<size_t>(op.stream)] = true;
    for (int i = 0; i < kStreams; ++i) {
      if (!plan.stream_used[static_cast<size_t>(i)]) continue;
      StreamRes& r = streams_[static_cast<size_t>(i)];
      r.id = static_cast<Stream>(i);
      PARALAB_CU(cudaStreamCreateWithPriority(&r.stream, cudaStreamNonBlocking, is_comm_stream(r.id) ? greatest : least));
      if (gemms[static_cast<size_t>(i)]) r.lt = std::make_unique<LtGemm>(r.stream, kWorkspaceBytes);
      PARALAB_CU(cudaMalloc(&r.scalars, ScalarSlots::kBytes));
    }

    lap("streams");  // streams, cuBLASLt handles and workspaces
    // fp16 loss scaling state and the loss accumulator live on the device.
    kernels::LossScaleState st;
    st.scale = static_cast<float>(s.training.initial_loss_scale);
    PARALAB_CU(cudaMalloc(&scaler_, sizeof st));
    PARALAB_CU(cudaMemcpy(scaler_, &st, sizeof st, cudaMemcpyHostToDevice));
    PARALAB_CU(cudaMalloc(reinterpret_cast<void**>(&loss_acc_), sizeof(double)));

    const StepGraph& g = *plan.graph;
    begin_ev_.assign(g.ops.size(), nullptr);
    end_ev_.assign(g.ops.size(), nullptr);
    for (size_t i = 0; i < g.ops.size(); ++i) {
      PARALAB_CU(cudaEventCreate(&begin_ev_[i]));
      PARALAB_CU(cudaEventCreate(&end_ev_[i]));
    }
    PARALAB_CU(cudaEventCreate(&origin_ev_));
    lap("events");
    ran_.assign(g.ops.size(), 0);
    gemm_plans_.resize(g.ops.size());
    for (const Op& op : g.ops)
      if (op.kind == OpKind::gemm) gemm_plans_[op.id] = plan_gemm(op, ir_.shape);
    waits_ = plan_waits(g);

    lap("plans");  // GEMM plans and cross-stream waits
    // Communicators: the same list, created in the same order, on every rank.
    check_p2p_order(ir_);
    specs_ = job_nccl_comms(ir_);
    for (const CommSpec& spec : specs_) {
      const std::vector<int64_t> members = comm_members(ir_, spec, rank_);
      std::string label = spec.kind == CommSpec::Kind::slot ? plan.comms[static_cast<size_t>(spec.slot)].label() : spec.label();
      comms_.push_back(create_comm(world, members, rank_, label));
    }
    blocking_.resize(plan.comms.size());
    for (size_t i = 0; i < specs_.size(); ++i)
      if (specs_[i].kind == CommSpec::Kind::slot && comms_[i])
        blocking_[static_cast<size_t>(specs_[i].slot)] = make_blocking_comm(*comms_[i], device_);
    op_comms_ = plan_op_comms(plan, specs_);
    lap("comms");  // NCCL communicators
  } catch (const ExecError&) {
    throw;
  } catch (const std::exception& e) {
    throw ExecError(rank_, std::string("cuda backend setup: ") + e.what());
  }
}

CudaBackend::~CudaBackend() {
  const bool failing = std::uncaught_exceptions() > 0;
  (void)cudaSetDevice(device_);
  blocking_.clear();
  for (auto& c : comms_) {
    if (!c || !c->nccl) continue;
    unregister_comm(c->nccl);
    // On failure, abort: a peer may never complete what we started. Otherwise drain and destroy.
    if (failing) (void)ncclCommAbort(c->nccl);
    else (void)ncclCommDestroy(c->nccl);
  }
  comms_.clear();
  for (auto* v : {&begin_ev_, &end_ev_})
    for (cudaEvent_t e : *v)
      if (e) (void)cudaEventDestroy(e);
  if (origin_ev_) (void)cudaEventDestroy(origin_ev_);
  for (StreamRes& r : streams_) {
    r.lt.reset();
    if (r.scalars) (void)cudaFree(r.scalars);
    if (r.stream) (void)cudaStreamDestroy(r.stream);
  }
  if (scaler_) (void)cudaFree(scaler_);
  if (loss_acc_) (void)cudaFree(loss_acc_);
  if (host_stream_) (void)cudaStreamDestroy(host_stream_);
}

void* CudaBackend::allocate(int64_t bytes) {
  bool host = false;
  const cudaStream_t s = current_stream(&host);
  const size_t n = (static_cast<size_t>(std::max<int64_t>(bytes, 1)) + 255) / 256 * 256;
  void* p = nullptr;
  const cudaError_t e = cudaMallocAsync(&p, n, s);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    throw std::runtime_error(
        "out of device memory: cudaMallocAsync of " + gib(static_cast<double>(n)) + " failed at " __FILE__ ":" +
        std::to_string(__LINE__) + " (cudaErrorMemoryAllocation); this rank holds " +
        gib(static_cast<double>(live_bytes_.load())) + " of paralab buffers, the IR predicts a peak of " +
        gib(planned_.peak_total()) + " (resident " + gib(planned_.resident_total()) + " + transient " +
        gib(planned_.peak_transient) + "); device " + std::to_string(device_) + " has " + gib(static_cast<double>(total_b)) +
        " (" + gib(static_cast<double>(free_b)) + " free)");
  }
  if (e != cudaSuccess) throw_cuda(e, "cudaMallocAsync(&p, n, stream)", __FILE__, __LINE__);
  live_bytes_ += static_cast<int64_t>(n);
  if (host) PARALAB_CU(cudaStreamSynchronize(s));
  return p;
}

// Never throws: the runtime also frees while a failure unwinds (its destructor), when the
// device may already be in an error state; a free that fails there changes nothing.
void CudaBackend::deallocate(void* p, int64_t bytes) {
  if (!p) return;
  live_bytes_ -= static_cast<int64_t>((static_cast<size_t>(std::max<int64_t>(bytes, 1)) + 255) / 256 * 256);
  const bool host = !(tls_owner == this && tls_stream >= 0);
  const cudaStream_t s = host ? host_stream_ : streams_[static_cast<size_t>(tls_stream)].stream;
  if (host) (void)cudaSetDevice(device_);
  if (cudaFreeAsync(p, s) != cudaSuccess || (host && cudaStreamSynchronize(s) != cudaSuccess)) (void)cudaGetLastError();
}

// Pinned host memory (cudaMallocHost): with unified addressing the device's kernels and copies
// address it directly, so fills and the verifier's reads work on it as on device memory.
void* CudaBackend::allocate_host(int64_t bytes) {
  PARALAB_CU(cudaSetDevice(device_));
  void* p = nullptr;
  const size_t n = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  const cudaError_t e = cudaMallocHost(&p, n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw std::runtime_error("out of pinned host memory: cudaMallocHost of " + gib(static_cast<double>(n)) +
                             " failed (" + cudaGetErrorName(e) + ") for optimizer offload");
  }
  return p;
}

void CudaBackend::deallocate_host(void* p, int64_t) {
  if (p && cudaFreeHost(p) != cudaSuccess) (void)cudaGetLastError();
}

void CudaBackend::fill(void* p, const Buffer& b, const BufferPlan& how) {
  bool host = false;
  const cudaStream_t s = current_stream(&host);
  const bool is_float = b.dtype == DType::f32 || b.dtype == DType::bf16 || b.dtype == DType::f16;
  switch (how.fill) {
    case Fill::none: return;
    case Fill::zero: PARALAB_CU(cudaMemsetAsync(p, 0, static_cast<size_t>(b.bytes()), s)); break;
    case Fill::token_ids: {
      if (b.dtype != DType::i32) throw InternalError("token ids in a non-int32 buffer '" + b.name + "'");
      // Under context parallelism two affine pieces (the rank's two sequence chunks,
      // BufferPlan::global_index): [0, split) from global_offset, [split, n) from second_offset.
      const int64_t split = how.split > 0 ? std::min(how.split, b.elements) : b.elements;
      dev::fill(p, dev::T::i32, split, 4, how.key, how.global_offset, how.vocab, s);
      dev::fill(static_cast<int32_t*>(p) + split, dev::T::i32, b.elements - split, 4, how.key, how.second_offset,
                how.vocab, s);
      break;
    }
    case Fill::poison:
      if (!is_float) return;  // as the CPU backend: only float buffers are poisoned
      dev::fill(p, dt(b.dtype), b.elements, 3, 0, 0, 0, s);
      break;
    case Fill::weights:
    case Fill::moment1:
    case Fill::moment2: {
      if (!is_float) throw InternalError("random fill of a non-float buffer '" + b.name + "'");
      const int kind = how.fill == Fill::weights ? 0 : how.fill == Fill::moment1 ? 1 : 2;
      dev::fill(p, dt(b.dtype), b.elements, kind, how.key, how.global_offset, 0, s);
      break;
    }
  }
  if (host) PARALAB_CU(cudaStreamSynchronize(s));
}

bool CudaBackend::fill_params(void* p, DType t, const ParamRegion& r, int64_t local0, int64_t n) {
  if (t != DType::f32 && t != DType::bf16 && t != DType::f16) return false;
  const fillmath::ParamGeo geo = param_geo(r);
  bool host = false;
  const cudaStream_t s = current_stream(&host);
  dev::fill_params(p, dt(t), n, geo, local0, s);
  if (host) PARALAB_CU(cudaStreamSynchronize(s));
  return true;
}

bool CudaBackend::widen_copy(float* dst, const void* src, DType t, int64_t n) {
  if (t != DType::f32 && t != DType::bf16 && t != DType::f16) return false;
  bool host = false;
  const cudaStream_t s = current_stream(&host);
  dev::copy2d(src, dt(t), n, dst, dev::T::f32, n, 1, n, false, s);  // one row of n: exact widening
  if (host) PARALAB_CU(cudaStreamSynchronize(s));
  return true;
}

void CudaBackend::to_host(void* host_p, const void* p, int64_t bytes) {
  bool host = false;
  const cudaStream_t s = current_stream(&host);
  PARALAB_CU(cudaMemcpyAsync(host_p, p, static_cast<size_t>(bytes), cudaMemcpyDefault, s));
  PARALAB_CU(cudaStreamSynchronize(s));  // verification snapshots and setup only: never in a timed step
}

void CudaBackend::from_host(void* p, const void* host_p, int64_t bytes) {
  bool host = false;
  const cudaStream_t s = current_stream(&host);
  PARALAB_CU(cudaMemcpyAsync(p, host_p, static_cast<size_t>(bytes), cudaMemcpyDefault, s));
  PARALAB_CU(cudaStreamSynchronize(s));
}

void CudaBackend::wait_for(Stream stream, OpId dep) {
  const auto si = static_cast<size_t>(stream);
  const auto& order = plan_->graph->streams[si];
  if (cursor_[si] >= order.size()) throw InternalError("cuda backend: wait_for past the end of stream " + std::string(to_string(stream)));
  const auto& keep = waits_.waits[order[cursor_[si]]];
  if (std::find(keep.begin(), keep.end(), dep) == keep.end()) return;  // implied by an earlier wait
  PARALAB_CU(cudaStreamWaitEvent(streams_[si].stream, end_ev_[dep], 0));
}

void CudaBackend::run(Stream stream, const OpCall& call) {
  StreamRes& r = streams_[static_cast<size_t>(stream)];
  CudaOpContext ctx{*plan_, ir_.shape, ir_.scenario, r};
  ctx.scaler = scaler_;
  ctx.loss_acc = loss_acc_;
  ctx.loss_tokens = &loss_tokens_;
  ctx.comms = &comms_;
  ctx.op_comms = &op_comms_;
  ctx.gemm_plans = &gemm_plans_;
  ctx.fp8 = fp8_;
  ctx.fp8_fallbacks = &fp8_fallbacks_;
  ctx.fp8_bias_kernels = &fp8_bias_kernels_;
  switch (call.op.kind) {
    case OpKind::gemm:
      if (!r.lt) throw InternalError("op " + op_label(call.op) + ": a GEMM on a stream without cuBLASLt");
      run_gemm(call, ctx);
      break;
    case OpKind::attention_fwd:
    case OpKind::attention_bwd: run_attention(call, ctx); break;
    case OpKind::collective:
    case OpKind::send:
    case OpKind::recv:
    case OpKind::sendrecv: run_comm(call, ctx); break;
    default: run_kernel(call, ctx); break;
  }
}

}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend(const StepIR& ir) { return std::make_unique<cuda::CudaBackend>(ir); }

}  // namespace paralab::exec
