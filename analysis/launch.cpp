// paralab — child processes (mpirun), progress bars.
#include "analysis/launch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace paralab::calib {

int launcher_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return -1;
}

int launcher_size() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return std::getenv("PMIX_RANK") ? 2 : 0;
}

std::filesystem::path self_executable() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find this executable (/proc/self/exe): " + ec.message());
  return p;
}

namespace {

std::string find_in_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= p.size()) {
    const size_t c = p.find(':', pos);
    const std::string dir = p.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
    pos = c == std::string::npos ? p.size() + 1 : c + 1;
    const std::string cand = (dir.empty() ? "." : dir) + "/" + name;
    if (access(cand.c_str(), X_OK) == 0) return cand;
  }
  return "";
}

}  // namespace

Launcher make_launcher(int np) {
  Launcher l;
  if (np <= 1) {
    l.description = "(one rank, no launcher)";
    return l;
  }
  std::string prog;
  if (const char* e = std::getenv("PARALAB_MPIRUN"); e && *e) prog = e;
  if (prog.empty()) prog = find_in_path("mpirun");
  if (prog.empty()) prog = find_in_path("mpiexec");
  if (prog.empty())
    throw std::runtime_error("running " + std::to_string(np) +
                             " ranks needs mpirun, which is not in PATH; install Open MPI (Debian: apt-get install openmpi-bin "
                             "libopenmpi-dev) or set PARALAB_MPIRUN");
  // Open MPI or not: its mpirun answers --version with "Open MPI" / "OpenRTE".
  const ProcessResult v = run_process({prog, "--version"}, {}, [](const std::string&) {}, 20);
  const bool ompi = v.out.find("Open MPI") != std::string::npos || v.out.find("OpenRTE") != std::string::npos;
  l.prefix = {prog, "-np", std::to_string(np)};
  if (ompi) {
    l.prefix.push_back("--oversubscribe");
    if (geteuid() == 0) {
      l.env.push_back("OMPI_ALLOW_RUN_AS_ROOT=1");
      l.env.push_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
    }
  }
  for (const auto& e : l.env) l.description += e + " ";
  for (size_t i = 0; i < l.prefix.size(); ++i) l.description += (i ? " " : "") + l.prefix[i];
  return l;
}

std::string Launcher::command_line(const std::vector<std::string>& args) const {
  std::string line = description;
  for (const std::string& a : args) line.append(line.empty() ? "" : " ").append(a);
  return line;
}

ProcessResult run_process(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          const std::function<void(const std::string&)>& on_stderr, double timeout_s) {
  if (argv.empty()) throw std::invalid_argument("run_process: no command");
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::vector<std::string> envs;
  for (char** e = environ; e && *e; ++e) envs.emplace_back(*e);
  for (const auto& add : env) {
    const std::string name = add.substr(0, add.find('=') + 1);
    std::erase_if(envs, [&](const std::string& x) { return x.rfind(name, 0) == 0; });
    envs.push_back(add);
  }
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  std::string prog = argv[0];
  if (prog.find('/') == std::string::npos) {
    const std::string found = find_in_path(prog);
    if (found.empty()) throw std::runtime_error("command not found in PATH: " + prog);
    prog = found;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);  // its own process group: a timeout kills mpirun and its ranks together
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    close(out_pipe[1]);
    close(err_pipe[1]);
    execve(prog.c_str(), cargv.data(), cenv.data());
    std::fprintf(stderr, "cannot run %s: %s\n", prog.c_str(), std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  close(out_pipe[1]);
  close(err_pipe[1]);
  ProcessResult r;
  std::string err_buf;
  auto flush_err = [&](bool all) {
    size_t nl;
    while ((nl = err_buf.find('\n')) != std::string::npos) {
      const std::string line = err_buf.substr(0, nl);
      err_buf.erase(0, nl + 1);
      if (on_stderr) on_stderr(line);
      else std::fprintf(stderr, "%s\n", line.c_str());
    }
    if (all && !err_buf.empty()) {
      if (on_stderr) on_stderr(err_buf);
      else std::fprintf(stderr, "%s\n", err_buf.c_str());
      err_buf.clear();
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  bool out_open = true, err_open = true;
  char buf[65536];
  while (out_open || err_open) {
    pollfd fds[2];
    int n = 0;
    if (out_open) fds[n++] = {out_pipe[0], POLLIN, 0};
    if (err_open) fds[n++] = {err_pipe[0], POLLIN, 0};
    const int rc = poll(fds, static_cast<nfds_t>(n), 200);
    if (rc < 0 && errno != EINTR) break;
    for (int i = 0; i < n && rc > 0; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got <= 0) {
        (fds[i].fd == out_pipe[0] ? out_open : err_open) = false;
        continue;
      }
      if (fds[i].fd == out_pipe[0]) r.out.append(buf, static_cast<size_t>(got));
      else {
        err_buf.append(buf, static_cast<size_t>(got));
        flush_err(false);
      }
    }
    if (timeout_s > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
      r.timed_out = true;
      kill(-pid, SIGTERM);
      usleep(500000);
      kill(-pid, SIGKILL);
      break;
    }
  }
  flush_err(true);
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  return r;
}

// ---- Progress --------------------------------------------------------------------------------

ProgressBar::ProgressBar(std::string title) : title_(std::move(title)), tty_(isatty(2) != 0) {}

ProgressBar::~ProgressBar() { done(); }

void ProgressBar::update(double fraction, const std::string& what) {
  if (!tty_ || finished_) return;
  const int permille = static_cast<int>(1000 * std::min(1.0, std::max(0.0, fraction)));
  if (permille == last_permille_ && what == last_what_) return;
  last_permille_ = permille;
  last_what_ = what;
  constexpr int kWidth = 30;
  const int filled = permille * kWidth / 1000;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::string w = what.size() > 38 ? what.substr(0, 35) + "..." : what;
  std::fprintf(stderr, "\r\033[K%s [%s] %3d%%  %s", title_.c_str(), bar.c_str(), permille / 10, w.c_str());
  std::fflush(stderr);
}

void ProgressBar::done() {
  if (!tty_ || finished_) return;
  finished_ = true;
  if (last_permille_ >= 0) std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

std::string progress_line(double fraction, const std::string& what) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "@paralab-progress %.4f ", fraction);
  return buf + what;
}

bool parse_progress_line(const std::string& line, double& fraction, std::string& what) {
  static const std::string tag = "@paralab-progress ";
  const size_t at = line.find(tag);  // mpirun may prefix lines ([1,0]<stderr>:)
  if (at == std::string::npos) return false;
  const std::string rest = line.substr(at + tag.size());
  char* end = nullptr;
  fraction = std::strtod(rest.c_str(), &end);
  if (end == rest.c_str()) return false;
  what = *end == ' ' ? std::string(end + 1) : std::string(end);
  return true;
}

std::string last_lines(const std::vector<std::string>& lines, size_t n) {
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) out += "  " + lines[i] + "\n";
  return out;
}

std::string seconds_arg(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

}  // namespace paralab::calib
