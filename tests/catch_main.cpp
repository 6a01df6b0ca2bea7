// Catch2 main for every paralab test executable; the implementation is catch_impl.cpp.
#include "catch_session.hpp"

int main(int argc, char* argv[]) { return paralab::test::run_catch_session(argc, argv); }
