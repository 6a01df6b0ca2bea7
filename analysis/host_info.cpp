// paralab — the host a calibration measures and the paralab build that measured it
// (host_info.hpp).
#include "analysis/host_info.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#ifndef PARALAB_VERSION_STRING
#define PARALAB_VERSION_STRING "0.0.0"
#endif

namespace paralab::calib {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

}  // namespace

HostInfo host_info(int cores) {
  HostInfo h;
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) == 0) h.hostname = name;
  h.cores = cores;
  std::ifstream cpu("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(cpu, line)) {
    const size_t c = line.find(':');
    if (c == std::string::npos) continue;
    const std::string key = trim(line.substr(0, c)), val = trim(line.substr(c + 1));
    if (key == "model name" && h.cpu_model.empty()) h.cpu_model = val;
    else if (key == "cpu MHz" && h.cpu_mhz == 0) h.cpu_mhz = std::atof(val.c_str());
    else if (key == "flags" && flags.empty()) flags = " " + val + " ";
  }
  const bool avx512 = flags.find(" avx512f ") != std::string::npos;
  const bool avx2 = flags.find(" avx2 ") != std::string::npos;
  const bool fma = flags.find(" fma ") != std::string::npos;
  h.cpu_flags_summary = avx512 ? "avx512f" : avx2 ? "avx2" : "sse";
  if (fma) h.cpu_flags_summary += " fma";
  // Peak of one core: clock x FMA units (2 on every x86 core with AVX2 since Haswell) x fp32
  // lanes x 2 FLOP per FMA (Intel 64 and IA-32 Optimization Reference Manual, "Haswell
  // microarchitecture": two 256-bit FMA ports).
  const double lanes = avx512 ? 16 : avx2 ? 8 : 4;
  const double fma_flops = fma ? 2.0 * 2.0 : 2.0;
  h.theoretical_fp32_tflops_per_core = h.cpu_mhz * 1e6 * lanes * fma_flops * 1e-12;
  const std::string l2 = trim(read_file("/sys/devices/system/cpu/cpu0/cache/index2/size"));
  if (!l2.empty()) {
    double v = std::atof(l2.c_str());
    if (l2.back() == 'K') v /= 1024.0;
    else if (l2.back() != 'M') v /= 1024.0 * 1024.0;
    h.l2_mib = v;
  }
  std::ifstream mem("/proc/meminfo");
  std::string key, unit;
  double kb = 0;
  while (mem >> key >> kb >> unit)
    if (key == "MemTotal:") h.mem_total_gib = kb / (1024.0 * 1024.0);
  h.loadavg_start = loadavg();
  return h;
}

std::string paralab_version() {
  // FNV-1a over this executable: a rebuilt binary is a new version for the caches.
  uint64_t hash = 1469598103934665603ull;
  std::ifstream f("/proc/self/exe", std::ios::binary);
  std::vector<char> buf(1 << 20);
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize got = f.gcount();
    for (std::streamsize i = 0; i < got; ++i) {
      hash ^= static_cast<unsigned char>(buf[static_cast<size_t>(i)]);
      hash *= 1099511628211ull;
    }
  }
  char out[64];
  std::snprintf(out, sizeof out, "%s+%08llx", PARALAB_VERSION_STRING, (unsigned long long)(hash & 0xffffffffull));
  return out;
}

std::string loadavg() { return trim(read_file("/proc/loadavg")); }

}  // namespace paralab::calib
