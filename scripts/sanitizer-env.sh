# Sourced by scripts/ci-sanitizers.sh and scripts/ci-fuzz.sh: the sanitizer runtimes' options,
# exported so that every process a test starts (the CLI, a probing child) runs under the same.
# halt_on_error=1 everywhere: the first finding ends the process with a failure status.
# No suppressions: nothing is suppressed; a finding is fixed or the job fails.
symbolizer=$(command -v llvm-symbolizer-14 || command -v llvm-symbolizer || echo /usr/lib/llvm-14/bin/llvm-symbolizer)
export ASAN_SYMBOLIZER_PATH="$symbolizer" TSAN_SYMBOLIZER_PATH="$symbolizer"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1:strict_string_checks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
export LSAN_OPTIONS="print_suppressions=0"
