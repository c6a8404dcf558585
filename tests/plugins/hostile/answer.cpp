// The dependency of with_dependency: a library of its own, built twice with different answers
// (DK_ANSWER), so a test can replace it under a cached verdict.
extern "C" __attribute__((visibility("default"))) int deltakern_test_answer() { return DK_ANSWER; }
