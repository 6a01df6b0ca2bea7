// paralab exec — loading the CUDA backend plugin (cuda_plugin.hpp).
#include "exec/cuda_plugin.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <vector>

#include "exec/error.hpp"

#ifndef PARALAB_CUDA_PLUGIN_BUILD_PATH
#define PARALAB_CUDA_PLUGIN_BUILD_PATH ""
#endif

namespace paralab::exec {

namespace {

constexpr const char* kFile = "libparalab_cuda_backend.so";

std::filesystem::path executable_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe.parent_path();
}

}  // namespace

std::string cuda_plugin_path() {
  if (const char* p = std::getenv("PARALAB_CUDA_BACKEND"); p && *p) return p;
  std::vector<std::filesystem::path> candidates;
  if (*PARALAB_CUDA_PLUGIN_BUILD_PATH) candidates.emplace_back(PARALAB_CUDA_PLUGIN_BUILD_PATH);
  const std::filesystem::path dir = executable_dir();
  if (!dir.empty()) {
    candidates.push_back(dir / kFile);
    candidates.push_back(dir / ".." / "lib" / "paralab" / kFile);
  }
  std::error_code ec;
  for (const auto& c : candidates)
    if (std::filesystem::is_regular_file(c, ec)) return c.string();
  return {};
}

const CudaPlugin& cuda_plugin(int64_t rank) {
  static std::mutex mu;
  static const CudaPlugin* loaded = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded) return *loaded;
  const std::string path = cuda_plugin_path();
  if (path.empty())
    throw ExecError(rank, std::string("the cuda backend is not built or not installed: no ") + kFile +
                              " (built when nvcc, cuBLASLt and NCCL are found; or set PARALAB_CUDA_BACKEND to its path)");
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    throw ExecError(rank, "the cuda backend could not be loaded from " + path + ": " + (why ? why : "unknown error") +
                              " (it needs the CUDA runtime, cuBLASLt and NCCL libraries on the loader's path and a driver)");
  }
  using Entry = const CudaPlugin* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(h, "paralab_cuda_plugin"));
  if (!entry) throw ExecError(rank, path + " is not paralab's cuda backend (no paralab_cuda_plugin symbol)");
  const CudaPlugin* p = entry();
  if (!p || p->abi != kCudaPluginAbi || !p->make_backend || !p->run_rank_threads)
    throw ExecError(rank, path + " is a cuda backend of another paralab (plugin ABI " + std::to_string(p ? p->abi : -1) +
                              ", this binary needs " + std::to_string(kCudaPluginAbi) + "): rebuild it with this one");
  loaded = p;
  return *loaded;
}

}  // namespace paralab::exec
