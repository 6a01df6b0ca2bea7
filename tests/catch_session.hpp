// paralab tests — run the Catch2 session. Catch2 v2 declares Catch::Session only in the
// translation unit holding its implementation (catch_impl.cpp), so every main calls this.
#pragma once

namespace paralab::test {
int run_catch_session(int argc, char** argv);  // Catch::Session().run(argc, argv)
}
