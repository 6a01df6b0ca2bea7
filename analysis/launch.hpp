// paralab — launching paralab's own multi-rank jobs: `paralab validate` runs `mpirun -np N
// paralab execute ...` and `paralab calibrate` runs its ranks the same way, so a calibration
// measures the machine under exactly the launch (binding, oversubscription) that the execution
// it predicts uses.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace paralab::calib {

// This process's rank and world size as the MPI launcher set them (Open MPI, PMI, PMIx);
// -1 / 0 when not launched by one.
int launcher_rank();
int launcher_size();

// The executable of this process (/proc/self/exe).
std::filesystem::path self_executable();

struct Launcher {
  std::vector<std::string> prefix;  // e.g. {"mpirun", "-np", "4", "--oversubscribe"}; empty for one rank
  std::vector<std::string> env;     // "NAME=value" added to the child's environment
  std::string description;          // the launcher part of the command line as a user would type it (one rank: a note)

  // The whole launch of `args` as a user would type it: the description, then the arguments,
  // each separated by one space (one rank: "(one rank, no launcher) /path/paralab execute ...").
  [[nodiscard]] std::string command_line(const std::vector<std::string>& args) const;
};

// How to start `np` ranks here: Open MPI's mpirun with --oversubscribe (several ranks per core
// on small hosts), and as root OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1; MPICH's mpiexec as is. One
// rank runs without a launcher. Throws std::runtime_error when np > 1 and no mpirun is found
// (it names what to install). $PARALAB_MPIRUN overrides the launcher program.
Launcher make_launcher(int np);

struct ProcessResult {
  int exit_code = -1;     // the child's exit status; 128 + signal when killed
  bool timed_out = false;
  std::string out;        // everything the child wrote on stdout
};

// Runs `argv` (argv[0] searched in PATH) with `env` added, stdout captured, stderr passed line
// by line to `on_stderr` (or to this process's stderr when empty). Kills the child's process
// group after `timeout_s` (0 = none).
ProcessResult run_process(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          const std::function<void(const std::string&)>& on_stderr = {}, double timeout_s = 0);

// A child's last `n` stderr lines, each indented by two spaces and ended by a newline: what
// an error about a failed child quotes.
std::string last_lines(const std::vector<std::string>& lines, size_t n);

// Seconds as a command-line argument: "%g" (0.5, 2, 0.25), which paralab's options parse back.
std::string seconds_arg(double s);

// A progress bar on stderr, drawn only when stderr is a terminal (otherwise silent).
class ProgressBar {
 public:
  explicit ProgressBar(std::string title);
  ~ProgressBar();
  void update(double fraction, const std::string& what);
  void done();
  [[nodiscard]] bool active() const { return tty_; }

 private:
  std::string title_;
  bool tty_ = false, finished_ = false;
  int last_permille_ = -1;
  std::string last_what_;
};

// Progress lines a worker prints on stderr for its parent to draw: "@paralab-progress F WHAT".
std::string progress_line(double fraction, const std::string& what);
bool parse_progress_line(const std::string& line, double& fraction, std::string& what);

}  // namespace paralab::calib
