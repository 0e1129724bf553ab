// The main of rungs' host tests, compiled by the host compiler only; Catch2's implementation
// and its session are catch_impl.cpp's (what CATCH_CONFIG_MAIN would define here).
int rungs_catch_run(int argc, char** argv);

int main(int argc, char** argv) { return rungs_catch_run(argc, argv); }
