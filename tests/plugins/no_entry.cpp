// A library that is no plugin: it exports no entry symbol (everything is hidden).
namespace {
int unused_function() { return 42; }
}  // namespace
int (*const keep_it)() = unused_function;
